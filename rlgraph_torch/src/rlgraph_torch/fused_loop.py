"""Static mode's fused update loop (``TorchBackend.fused_loop``).

The loop is one ``torch.compile`` d program for the loop *body* (the gathers, the inline train
step with ``torch.autograd.grad`` traced into the same graph, the polyak sync), called from a
Python loop over ``k``. Measured on torch 2.13, CPU, one thread, on a heavily loaded 2-core
machine (``benchmarks/bench_torch_fused_loop.py``, medians of 7 rounds, us per
gradient step), PPO (configs/ppo_cartpole.yaml, minibatch 256, 20 steps per round):

* eager step 2662, static single step 1011, this loop 817 (a second run: 4986, 1827, 1664);
* DQN (configs/dqn_cartpole.yaml, batch 64, 128 steps, one hard sync): eager 3307, static
  single step 2469, this loop 2377;
* all 20 iterations unrolled into one graph: 565 per step, but it took about 10 minutes to
  compile (one 20-step graph, against seconds for the body) and grows with ``K`` (DQN rounds are
  128 steps): not worth it for a 30% faster step;
* ``torch._higher_order_ops.scan`` / ``while_loop`` need a functional body (no in-place update of
  variables captured by the body), which the train step and polyak are not;
* CUDA graphs do not apply on the CPU.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from rlgraph_core.backend import PythonLoop
from rlgraph_torch.compile import call_compiled_or_eager, try_compile, with_traced_autograd
from rlgraph_torch.optim import new_guard, raise_non_finite


class TorchFusedLoop(PythonLoop):
    """``loop(per_step, constants)``: the body compiled once per input shape, run for each ``k``.

    The loop itself (slicing step ``k``'s rows, stacking the outputs) is the contract's
    :class:`~rlgraph_core.backend.PythonLoop`; what differs is the body it calls: compiled, with
    ``torch.autograd.grad`` traced (set once around the whole loop), and the eager body from the
    first call that fails to compile on (with a warning).

    Non-finite updates: the backend's ``loop_guard`` (``[ok, loss, norm]``) is reset before the
    round; a train step's inline update clears ``ok`` on the first non-finite loss or gradient and
    applies nothing while it is clear, so that step and every later one of the round leave the
    variables and optimizer state as they were. Each step also returns ``ok`` (one more output,
    not shown to the caller), and after the round one read of the guard decides whether to raise
    NonFiniteError naming the first bad step.

    Args:
        backend: the torch backend (its ops stack the outputs).
        body: ``body(*per_step_k, *constants) -> tuple of tensors`` (see ``Backend.fused_loop``).
    """

    def __init__(self, backend: Any, body: Callable[..., Sequence[Any]]):
        super().__init__(backend, self._step)
        self._body = body
        self._traces = [0]
        self._compiled = try_compile(self._iteration, self._traces)
        self.compiled = self._compiled is not self._iteration
        self._reset = new_guard(backend.device)
        # the round's steps with dynamo's trace_autograd_ops on (with_traced_autograd: a plain
        # try/finally, once per round, which for SAC is every env step)
        self._rows = with_traced_autograd(self._run_rows)

    def _iteration(self, *args):
        """One step of the loop: the body, its outputs detached, and the guard's ``ok`` after it."""
        outputs = tuple(torch.as_tensor(o).detach() for o in self._body(*args))
        return (*outputs, self.backend.loop_guard[0].clone())

    def _step(self, *args):
        """One step through the compiled body (the eager one once compiling has failed)."""
        if self._compiled is self._iteration:
            return self._iteration(*args)
        out, compiled_ok = call_compiled_or_eager(self._compiled, self._iteration, args, "a fused loop body")
        if not compiled_ok:
            self._compiled = self._iteration
            self.compiled = False
        return out

    def _run_rows(self, per_step: list[Any], constants: list[Any]) -> list[tuple[Any, ...]]:
        """Each step's outputs, detached already (:meth:`_iteration`), for every leading index."""
        return [self._step(*(x[k] for x in per_step), *constants) for k in range(int(per_step[0].shape[0]))]

    @property
    def trace_count(self) -> int | None:
        """Programs compiled for this loop so far (one per distinct input shape)."""
        return self._traces[0]

    def __call__(self, per_step: Sequence[Any], constants: Sequence[Any] = ()) -> tuple[Any, ...]:
        """Run the body for every leading index of ``per_step``; outputs stacked ``[K, ...]``."""
        per_step, constants = list(per_step), list(constants)
        if not per_step:
            return super().__call__(per_step, constants)  # its error names what is missing
        guard = self.backend.loop_guard
        guard.copy_(self._reset)  # no step of this round has failed yet
        rows = self._rows(per_step, constants)
        if len(rows) == 1:
            *outputs, ok = (o.unsqueeze(0) for o in rows[0])
        else:
            *outputs, ok = (torch.stack(column) for column in zip(*rows))
        # The guard carries a failure from step to step: the train steps' inline update applies
        # nothing once it is cleared. One host sync per round, after the loop.
        if float(guard[0]) < 0.5:
            flags = ok.cpu().numpy()
            raise_non_finite(guard[1:], int((flags < 0.5).argmax()) + 1, int(flags.shape[0]))
        return tuple(outputs)
