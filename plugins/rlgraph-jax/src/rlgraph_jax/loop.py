"""The fused update loop of the jax backend's static mode: K steps as one ``lax.scan`` program.

:meth:`rlgraph_jax.backend.JaxBackend.fused_loop` returns a :class:`JaxFusedLoop`. The loop is a
:class:`~rlgraph_jax.state.StatefulFunction` (one ``jax.jit`` program per input shape) whose body
is a ``lax.scan``: the scan's carry is the value of every cell of the backend (variables,
optimizer states, learning rates), so step ``k + 1`` reads what step ``k`` wrote, exactly as K
separate calls would, and the loop's body -- :meth:`TrainStep.inline` and ``ops.assign`` /
``ops.polyak`` -- is written against cells as everywhere else.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import numpy as np

from rlgraph_jax.optim import new_guard, raise_non_finite
from rlgraph_jax.state import Cell, CellRegistry, StatefulFunction, swapped, unwrap_tree


class JaxFusedLoop:
    """``loop(per_step, constants)``: ``body`` once per leading index of ``per_step``, compiled.

    See :meth:`rlgraph_core.backend.Backend.fused_loop` for the contract.

    Args:
        registry: the backend's cells (the scan carries all of them).
        body: ``body(*per_step_slices, *constants) -> tuple of tensors`` (fixed shapes).
        guard: the backend's non-finite guard cell ``[ok, loss, norm]`` that its train steps'
            inline updates read and write (carried by the scan like every cell); None: a new one.
        reset: the guard's reset value ``[1, 0, 0]`` on the backend's device.

    Non-finite updates: the guard is reset before each call; a train step's inline update
    clears ``ok`` on the first non-finite loss or gradient and applies nothing while it is clear,
    so that step and every later one leave the variables and optimizer state as they were. The
    scan also stacks ``ok`` after every step (one more output, not shown to the caller); one read
    of the guard after the call decides whether to raise NonFiniteError naming the step.
    """

    def __init__(
        self,
        registry: CellRegistry,
        body: Callable[..., Sequence[Any]],
        guard: Cell | None = None,
        reset: Any = None,
    ):
        self.registry = registry
        self.body = body
        self.guard = registry.add(new_guard()) if guard is None else guard
        self.reset = self.guard.value if reset is None else reset
        self._program = StatefulFunction(registry, self._scan)

    def _scan(self, per_step: list, constants: list) -> tuple:
        cells = list(self.registry.cells)

        def step(carry, xs):
            with swapped(cells, carry) as state:
                outputs = unwrap_tree(tuple(self.body(*xs, *constants)))
                outputs = (*outputs, self.guard.value[0])  # the guard's ok after this step
                new = state.current()
            return new, tuple(jax.lax.stop_gradient(o) for o in outputs)

        final, stacked = jax.lax.scan(step, [c.value for c in cells], tuple(per_step))
        for cell, value in zip(cells, final):
            cell.value = value
        return stacked

    def traced(self, per_step: Sequence[Any], constants: Sequence[Any] = ()) -> tuple[Any, ...]:
        """The loop's scan inside a trace already in progress (the cells hold that trace's values):
        the body's outputs stacked ``[K, ...]`` plus the guard's ``ok`` after each step; the cells
        hold the values after the last step. No host read: the caller checks the guard."""
        return self._scan(list(unwrap_tree(list(per_step))), list(constants))

    def __call__(self, per_step: Sequence[Any], constants: Sequence[Any] = ()) -> tuple[Any, ...]:
        """Run the body for every leading index of ``per_step``; its outputs stacked ``[K, ...]``."""
        per_step = list(unwrap_tree(list(per_step)))
        if not per_step:
            raise ValueError("fused_loop needs at least one per-step tensor (its leading dimension is K).")
        steps = {tuple(x.shape[:1]) for x in per_step}
        if len(steps) != 1 or () in steps:
            raise ValueError(
                "fused_loop: every per-step tensor needs the same leading dimension K, got shapes "
                f"{[tuple(x.shape) for x in per_step]}."
            )
        self.guard.value = self.reset  # no step of this round has failed yet
        *outputs, ok = self._program(per_step, list(constants))
        guard = np.asarray(self.guard.value)  # one host read per round, after the program
        if guard[0] < 0.5:
            flags = np.asarray(ok)
            raise_non_finite(guard[1:], int((flags < 0.5).argmax()) + 1, int(flags.shape[0]))
        return tuple(outputs)

    @property
    def trace_count(self) -> int:
        """Programs traced so far: one per distinct input shape."""
        return self._program.trace_count
