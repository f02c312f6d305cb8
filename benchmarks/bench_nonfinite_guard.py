"""What the non-finite update guard (issue 19) costs per gradient step on torch, same process.

For PPO (``configs/ppo_cartpole.yaml``: minibatch 256, 20 steps a round, Adam, clip 0.5) and
DQN (``configs/dqn_cartpole.yaml``: 256-256, batch 64, 128 steps a round, Adam, clip 10), torch
eager and static (single step and fused loop), two agents each: ``new`` as shipped and ``old``
with the guard patched out (the step as it was before: no finiteness check, no ``torch.where``
select of the old values, no host read of the health after a step). The variants are interleaved
in one process; medians and minimums in microseconds per gradient step. The patch reaches into
private methods of ``TorchTrainStep``: update it when those change.

Measured 2026-12-03 on the shared 2-core development machine (load average 4-8, one torch
thread; noisy, differences under ~5 % are within the noise), median us/step old -> new:
PPO eager 1469 -> 1436, static step 553 -> 558, static loop 548 -> 546; DQN eager 1233 -> 1311,
static step 919 -> 943, static loop 945 -> 992.

    python benchmarks/bench_nonfinite_guard.py --repeats 25
"""

from __future__ import annotations

import argparse
import statistics
import sys
import types
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_torch_fused_loop import build, dqn_case, ppo_case, time_loop, time_singles  # noqa: E402

from rlgraph_torch.functional_optim import clip_by_global_norm  # noqa: E402


def unguard(step) -> None:
    """Patch ``step`` (a ``TorchTrainStep``, before its first call) to the pre-guard behaviour."""
    if step._static:

        def _guarded_update(self, loss, grads, guard):
            idx = [i for i, g in enumerate(grads) if g is not None]
            present = [g for g in grads if g is not None]
            if idx:
                if self.max_grad_norm is not None:
                    present = clip_by_global_norm(present, float(self.max_grad_norm))
                self.functional.update(idx, present)
            return loss.detach().reshape(1).expand(2)

        def _fused_step(self, *inputs):
            *outputs, _ = self._step(*inputs)
            return tuple(outputs)

        step._guarded_update = types.MethodType(_guarded_update, step)
    else:

        def _fused_step(self, *inputs):
            outputs = self.loss_fn(*inputs)
            self.optimizer.zero_grad(set_to_none=True)
            outputs[0].backward()
            if self.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm, foreach=True)
            self.optimizer.step()
            return tuple(o.detach() for o in outputs)

    step._fused_step = types.MethodType(_fused_step, step)


def main() -> None:
    """Time every variant, interleaved, and print medians in microseconds per gradient step."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--only", default="ppo,dqn")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name in args.only.split(","):
        variants = {}
        for mode in ("eager", "static"):
            for label in ("old", "new"):
                agent = build(name, mode)
                if label == "old":
                    unguard(agent.train_step)
                singles, body, per_step, constants = (ppo_case if name == "ppo" else dqn_case)(
                    agent, np.random.default_rng(0)
                )
                variants[f"{mode} step {label}"] = (agent, singles, None)
                if mode == "static":
                    loop = (agent.backend.fused_loop(body), per_step, constants)
                    variants[f"static loop {label}"] = (agent, None, loop)
        k = len(variants["eager step old"][1])
        for _ in range(2):  # warm-up: compile every program
            for agent, singles, loop in variants.values():
                if loop is None:
                    time_singles(agent, singles, [1e-3] * k, name == "dqn")
                else:
                    time_loop(agent, *loop, 1e-3)
        times: dict[str, list[float]] = {v: [] for v in variants}
        for _ in range(args.repeats):
            for v, (agent, singles, loop) in variants.items():
                if loop is None:
                    times[v].append(time_singles(agent, singles, [1e-3] * k, name == "dqn") / k)
                else:
                    times[v].append(time_loop(agent, *loop, 1e-3) / k)
        for v, ts in times.items():
            print(f"{name} {v:16s} median {statistics.median(ts) * 1e6:7.0f} us/step  min {min(ts) * 1e6:6.0f}")


if __name__ == "__main__":
    main()
