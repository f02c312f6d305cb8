"""Static mode's fused update loop (``TorchBackend.fused_loop``).

How the loop is compiled (measured on torch 2.13, CPU, one thread; see the benchmark numbers in
``TorchFusedLoop``'s docstring): one ``torch.compile`` d program for the loop *body* (the gathers,
the inline train step with ``torch.autograd.grad`` traced into the graph, the polyak sync), called
from a Python loop over ``k``. The alternatives were slower or unusable here:

* unrolling all ``K`` iterations into one graph compiles for minutes at ``K = 128`` (DQN) and ran
  no faster per step at ``K = 20`` (PPO): the per-call overhead of a compiled program is a few
  microseconds against hundreds for the step itself;
* ``torch._higher_order_ops.scan`` / ``while_loop`` need a functional body (no in-place update of
  variables captured by the body), which is what the train step and polyak are;
* CUDA graphs do not apply on the CPU.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from rlgraph_torch.optim import _call_compiled_or_eager, _try_compile


class TorchFusedLoop:
    """``loop(per_step, constants)``: the body compiled once per input shape, run for each ``k``.

    Args:
        body: ``body(*per_step_k, *constants) -> tuple of tensors`` (see ``Backend.fused_loop``).
    """

    def __init__(self, body: Callable[..., Sequence[Any]]):
        self.body = body
        self._traces = [0]
        self._compiled = _try_compile(self._iteration, self._traces, trace_autograd=True)
        self.compiled = self._compiled is not self._iteration

    def _iteration(self, *args):
        """One step of the loop: the body, its outputs detached."""
        return tuple(torch.as_tensor(o).detach() for o in self.body(*args))

    @property
    def trace_count(self) -> int | None:
        """Programs compiled for this loop so far (one per distinct input shape)."""
        return self._traces[0]

    def __call__(self, per_step: Sequence[Any], constants: Sequence[Any] = ()) -> tuple[Any, ...]:
        """Run the body for every leading index of ``per_step``; outputs stacked ``[K, ...]``."""
        per_step, constants = list(per_step), list(constants)
        if not per_step:
            raise ValueError("fused_loop needs at least one per-step tensor (its leading dimension is K).")
        rows = [x.unbind(0) for x in per_step]
        outputs = []
        for k in range(int(per_step[0].shape[0])):
            args = (*(r[k] for r in rows), *constants)
            if self._compiled is self._iteration:
                outputs.append(self._iteration(*args))
                continue
            out, compiled_ok = _call_compiled_or_eager(self._compiled, self._iteration, args, "a fused loop body")
            if not compiled_ok:
                self._compiled = self._iteration
                self.compiled = False
            outputs.append(out)
        if not outputs:
            return ()
        return tuple(torch.stack([out[i] for out in outputs]) for i in range(len(outputs[0])))
