"""Mutable state on a functional framework: cells whose values the backend swaps.

rlgraph's components hold *variable handles* and change them in place (``ops.assign``,
``ops.polyak``, optimizer updates). JAX arrays are immutable and ``jax.jit`` compiles pure
functions. The two meet here:

* every piece of mutable state -- a component's variable (:class:`JaxVariable`), a train step's
  optax state, its learning rate -- is a :class:`Cell`: a small Python object owning one value (an
  array or a pytree of arrays), registered with its backend's :class:`CellRegistry`. "In place"
  means: the backend swaps the cell's value for a new array. Components keep the cell (the handle)
  and never see the swap.
* :class:`StatefulFunction` makes a pure function of a stateful one: the compiled program takes
  the values of all the backend's cells as inputs, the cells hold the tracers while the Python
  function is traced, and the program returns the cells' new values, which the call writes back.
  So a jitted act, train step or fused loop reads the variables' current values on every call
  (never constants baked in at trace time) and its assignments survive the call.

The registry only grows (cells are never removed), so a program traced for the first ``n`` cells
stays valid while more cells are added: a program is cached per ``n`` (and by jit per input
shape). Unchanged cells come back as the same buffers (jit forwards inputs that are returned
unchanged), so passing every cell costs little.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np


class Cell:
    """A mutable holder of one value (an array or a pytree of arrays) owned by a backend.

    Args:
        value: the initial value.
        name: a label (for error messages and ``repr``).
    """

    __slots__ = ("value", "name", "reads", "__weakref__")

    def __init__(self, value: Any, name: str = ""):
        self.value = value
        self.name = name
        #: the read-tracking set of the trace in progress (see :func:`track_reads`), else None
        self.reads: set | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def _unwrap(x: Any) -> Any:
    """The array a variable holds (recording the read), else ``x`` unchanged."""
    if isinstance(x, JaxVariable):
        return x.read()
    return x


def unwrap_tree(tree: Any) -> Any:
    """``tree`` with every variable replaced by its current array."""
    return jax.tree_util.tree_map(_unwrap, tree, is_leaf=lambda x: isinstance(x, JaxVariable))


def _binary(name: str) -> Callable:
    def method(self, other):
        return getattr(self.read(), name)(_unwrap(other))

    method.__name__ = name
    return method


class JaxVariable(Cell):
    """A component variable on the jax backend: a :class:`Cell` that behaves like its array.

    Components use variables as tensors (``x * self.scale``, ``self.w.shape``, ``self.w[0]``), so
    the arithmetic operators, indexing, ``shape``/``dtype``/``ndim`` and ``__jax_array__``
    delegate to the current value; every :mod:`rlgraph_jax.ops` op unwraps variables explicitly.
    Reading the value through :meth:`read` records the variable as *reached* while a train step
    traces its loss (unreached variables get no optimizer update, as on the other backends).

    Args:
        value: the initial array.
        name: the variable's scope path.
        trainable: whether train steps update it.
    """

    __slots__ = ("trainable",)

    def __init__(self, value: Any, name: str, trainable: bool):
        super().__init__(value, name)
        self.trainable = bool(trainable)

    def read(self) -> jax.Array:
        """The current value (recorded as reached while a loss is being differentiated)."""
        if self.reads is not None:
            self.reads.add(id(self))
        return self.value

    # --- array protocol ---------------------------------------------------------------------
    def __jax_array__(self) -> jax.Array:
        return self.read()

    def __array__(self, dtype=None, copy=None):
        arr = np.asarray(self.value)
        return arr if dtype is None else arr.astype(dtype)

    @property
    def shape(self) -> tuple[int, ...]:
        """The value's shape."""
        return tuple(self.value.shape)

    @property
    def dtype(self):
        """The value's dtype."""
        return self.value.dtype

    @property
    def ndim(self) -> int:
        """The value's rank."""
        return self.value.ndim

    def __len__(self) -> int:
        return len(self.value)

    def __getitem__(self, index):
        return self.read()[_unwrap(index)]

    def __neg__(self):
        return -self.read()

    def __pos__(self):
        return self.read()

    def __abs__(self):
        return abs(self.read())

    __add__ = _binary("__add__")
    __radd__ = _binary("__radd__")
    __sub__ = _binary("__sub__")
    __rsub__ = _binary("__rsub__")
    __mul__ = _binary("__mul__")
    __rmul__ = _binary("__rmul__")
    __truediv__ = _binary("__truediv__")
    __rtruediv__ = _binary("__rtruediv__")
    __pow__ = _binary("__pow__")
    __rpow__ = _binary("__rpow__")
    __matmul__ = _binary("__matmul__")
    __rmatmul__ = _binary("__rmatmul__")
    __lt__ = _binary("__lt__")
    __le__ = _binary("__le__")
    __gt__ = _binary("__gt__")
    __ge__ = _binary("__ge__")
    __and__ = _binary("__and__")
    __or__ = _binary("__or__")
    # == and != stay identity comparisons: a variable is a handle (hashable, usable in sets).


class track_reads:
    """Context manager: while active, reading any of ``variables`` records its id in :attr:`ids`."""

    def __init__(self, variables):
        self.variables = [v for v in variables if isinstance(v, JaxVariable)]
        self.ids: set[int] = set()

    def __enter__(self) -> "track_reads":
        for v in self.variables:
            v.reads = self.ids
        return self

    def __exit__(self, *exc) -> None:
        for v in self.variables:
            v.reads = None


class CellRegistry:
    """Every cell of one backend, in creation order (append-only)."""

    def __init__(self):
        self.cells: list[Cell] = []

    def add(self, cell: Cell) -> Cell:
        """Register ``cell`` and return it."""
        self.cells.append(cell)
        return cell


class swapped:
    """Context manager: ``cells`` hold ``values`` inside, their previous values again after.

    The values set inside (new tracers) are read with :meth:`current` before leaving.
    """

    def __init__(self, cells, values):
        self.cells = list(cells)
        self.values = list(values)

    def __enter__(self) -> "swapped":
        self.saved = [c.value for c in self.cells]
        for c, v in zip(self.cells, self.values):
            c.value = v
        return self

    def current(self) -> list:
        """The cells' values now (what the traced code assigned)."""
        return [c.value for c in self.cells]

    def __exit__(self, *exc) -> None:
        for c, v in zip(self.cells, self.saved):
            c.value = v


class StatefulFunction:
    """``fn`` (which reads and assigns cells) compiled with ``jax.jit`` as a pure function.

    Calling it passes the current values of the registry's cells into the compiled program and
    writes the program's new values back, so reads are never stale and assignments persist. It
    can be called inside another traced function (the cells then hold tracers, which flow in and
    out like any value).

    Args:
        registry: the backend's cells.
        fn: the Python function.
    """

    def __init__(self, registry: CellRegistry, fn: Callable):
        self.registry = registry
        self.fn = fn
        self._programs: dict[int, Callable] = {}
        #: programs traced so far (one per cell count and input shape)
        self.trace_count = 0

    def _program(self, n: int) -> Callable:
        program = self._programs.get(n)
        if program is None:
            cells = self.registry.cells[:n]

            def pure(values, args):
                self.trace_count += 1
                with swapped(cells, values) as state:
                    out = unwrap_tree(self.fn(*args))
                    return out, state.current()

            program = self._programs[n] = jax.jit(pure)
        return program

    def __call__(self, *args):
        cells = self.registry.cells
        n = len(cells)
        cells = cells[:n]
        out, values = self._program(n)([c.value for c in cells], unwrap_tree(args))
        for c, v in zip(cells, values):
            c.value = v
        return out
