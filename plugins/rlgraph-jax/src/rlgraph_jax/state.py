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
  the values of the cells the function reads as inputs, the cells hold the tracers while the
  Python function is traced, and the program returns the new values of the cells it assigns,
  which the call writes back (which cells those are is read off the function's jaxpr once).
  So a jitted act, train step or fused loop reads the variables' current values on every call
  (never constants baked in at trace time) and its assignments survive the call.

The registry only grows (cells are never removed), so a program traced for the first ``n`` cells
stays valid while more cells are added: a program is cached per ``n`` (and by jit per input
shape).
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


def _stand_in(value: Any) -> Any:
    """What a cell a pruned program does not take holds while it is traced: its shapes and dtypes
    (``jax.ShapeDtypeStruct``), which code may look at (``assign`` casts to the variable's dtype),
    but no array: if a trace for other input shapes does read the cell after all, jax refuses it
    and the call falls back to the program that takes every cell."""
    return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(np.shape(x), x.dtype), value)


class _PrunedMismatch(Exception):
    """A pruned program's trace changed a cell outside the set it returns."""


def _flat_positions(values: list) -> list[list[int]]:
    """The flat leaf indices of each cell value in ``jax.tree_util`` order."""
    positions, at = [], 0
    for value in values:
        count = len(jax.tree_util.tree_leaves(value))
        positions.append(list(range(at, at + count)))
        at += count
    return positions


class StatefulFunction:
    """``fn`` (which reads and assigns cells) compiled with ``jax.jit`` as a pure function.

    Calling it passes the current values of the cells ``fn`` reads into the compiled program and
    writes back the new values of the cells it assigns, so reads are never stale and assignments
    persist. It can be called inside another traced function (the cells then hold tracers, which
    flow in and out like any value).

    Which cells those are is read off the function's jaxpr once per cell count (``jax.make_jaxpr``
    over every cell): a cell is read when one of its leaves is used, and assigned when one of its
    leaves comes back as anything but the input it came in as. Passing every cell in and out would
    be correct too, but jit's per-array cost on each input and output then dominates a small
    program: measured on one core, an act of DQN's 256-256 network with its 44 cell arrays in and
    out took 100 us, against 20 us for the 6 weights in and none out. A trace for new input shapes
    that reads or assigns a cell outside the sets (a shape-dependent branch) cannot go wrong
    silently: the missing cell holds a non-array, or the change is seen, and the call falls back
    to the program over every cell.

    Args:
        registry: the backend's cells.
        fn: the Python function.
    """

    def __init__(self, registry: CellRegistry, fn: Callable):
        self.registry = registry
        self.fn = fn
        self._programs: dict[int, Callable] = {}
        #: per cell count: (cells read, cells assigned, program), or None where the full program is used
        self._pruned: dict[int, tuple[list[int], list[int], Callable] | None] = {}
        #: programs traced so far (one per cell count and input shape)
        self.trace_count = 0

    def _full_pure(self, cells: list, count: bool) -> Callable:
        def pure(values, args):
            if count:
                self.trace_count += 1
            with swapped(cells, values) as state:
                out = unwrap_tree(self.fn(*args))
                return out, state.current()

        return pure

    def _program(self, n: int) -> Callable:
        program = self._programs.get(n)
        if program is None:
            program = self._programs[n] = jax.jit(self._full_pure(self.registry.cells[:n], count=True))
        return program

    def _prune(self, n: int, values: list, args: Any) -> tuple[list[int], list[int], Callable]:
        """The cells ``fn`` reads and assigns (from its jaxpr) and a program over just those."""
        cells = self.registry.cells[:n]
        jaxpr = jax.make_jaxpr(self._full_pure(cells, count=False))(values, args).jaxpr
        positions = _flat_positions(values)
        n_leaves = sum(len(p) for p in positions)
        invars = jaxpr.invars[:n_leaves]
        used = {id(v) for eqn in jaxpr.eqns for v in eqn.invars}
        n_out = len(jaxpr.outvars) - n_leaves
        cell_out = jaxpr.outvars[n_out:]
        used |= {id(v) for v in jaxpr.outvars[:n_out]}  # returned by the function
        used |= {id(v) for j, v in enumerate(cell_out) if v is not invars[j]}  # one cell's value given to another
        read = [i for i, pos in enumerate(positions) if any(id(invars[j]) in used for j in pos)]
        wrote = [i for i, pos in enumerate(positions) if any(cell_out[j] is not invars[j] for j in pos)]
        wrote_set = set(wrote)

        def pure(read_values, args):
            self.trace_count += 1
            values = [_stand_in(c.value) for c in cells]  # the real ones for the cells read:
            for i, v in zip(read, read_values):
                values[i] = v
            with swapped(cells, values) as state:
                out = unwrap_tree(self.fn(*args))
                now = state.current()
            if any(now[i] is not values[i] for i in range(n) if i not in wrote_set):
                raise _PrunedMismatch
            return out, [now[i] for i in wrote]

        return read, wrote, jax.jit(pure)

    def __call__(self, *args):
        cells = self.registry.cells
        n = len(cells)
        cells = cells[:n]
        args = unwrap_tree(args)
        if n not in self._pruned:
            self._pruned[n] = self._prune(n, [c.value for c in cells], args)
        pruned = self._pruned[n]
        if pruned is not None:
            read, wrote, program = pruned
            try:
                out, values = program([cells[i].value for i in read], args)
            except (TypeError, AttributeError, _PrunedMismatch):
                # A trace for new shapes reached a cell outside the sets: every cell from now on
                # (a genuine error is raised again by the full program).
                self._pruned[n] = None
            else:
                for i, v in zip(wrote, values):
                    cells[i].value = v
                return out
        out, values = self._program(n)([c.value for c in cells], args)
        for c, v in zip(cells, values):
            c.value = v
        return out
