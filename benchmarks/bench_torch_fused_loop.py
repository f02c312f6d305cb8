"""Microseconds per gradient step of the torch train step: eager, static single step, fused loop.

Real agents from ``configs/ppo_cartpole.yaml`` (two 64-64 tanh trunks, minibatch 256, Adam, grad
clip 0.5, 20 steps per round) and ``configs/dqn_cartpole.yaml`` (256-256 relu, batch 64, double-Q
Huber, 128 steps per round, hard target copy every 128 steps), one torch thread, random inputs of
the right shapes, the learning rate changed before every step (as a schedule does). The variants
are interleaved in one process and repeated; medians are printed. Run from the repository root:

    python benchmarks/bench_torch_fused_loop.py --repeats 5
    python benchmarks/bench_torch_fused_loop.py --only ppo --modes static --no-loop  # another checkout
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from rlgraph_core.assemble import make_agent
from rlgraph_core.config.run import apply_overrides, load_config_file, validate_config
from workloads import ppo_samples

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def build(name: str, mode: str):
    """The agent of ``configs/<name>_cartpole.yaml`` on torch in ``mode``."""
    config = validate_config(
        apply_overrides(load_config_file(CONFIGS / f"{name}_cartpole.yaml"), [f"train.mode={mode}", "train.device=cpu"])
    )
    env = gym.make("CartPole-v1")
    return make_agent(config, env.observation_space, env.action_space)


def ppo_case(agent, rng, steps: int = 20):
    """(single-step inputs per k, fused-loop body, per_step, constants) for a PPO round."""
    n = 256
    data = ppo_samples(rng, n)
    to_t = agent.backend.to_tensor
    idx = np.stack([rng.permutation(n) for _ in range(steps)]).astype(np.int64)
    clip = to_t(np.float32(0.2))
    singles = [tuple(to_t(np.ascontiguousarray(d[i])) for d in data) + (clip,) for i in idx]
    ops, step = agent.backend.ops, agent.train_step

    def body(i, *const):
        *full, clip_t = const
        return step.inline(*(ops.take(x, i) for x in full), clip_t)

    return singles, body, [to_t(idx)], [to_t(d) for d in data] + [clip]


def dqn_case(agent, rng, steps: int = 128):
    """The same for a DQN round: a hard target sync after the last step."""
    n = 64
    to_t = agent.backend.to_tensor
    per = [
        rng.standard_normal((steps, n, 4)).astype(np.float32),
        rng.integers(0, 2, (steps, n)).astype(np.int64),
        rng.standard_normal((steps, n)).astype(np.float32),
        rng.standard_normal((steps, n, 4)).astype(np.float32),
        rng.random((steps, n)) < 0.05,
        np.full((steps, n), 0.99, np.float32),
        np.ones((steps, n), np.float32),
    ]
    due = np.zeros(steps, np.float32)
    due[-1] = 1.0
    singles = [tuple(to_t(np.ascontiguousarray(p[k])) for p in per) for k in range(steps)]
    step, sync = agent.train_step, agent.graph.target_sync

    def body(*args):
        *inputs, due_k = args
        out = step.inline(*inputs)
        sync.sync_if(due_k)
        return out

    return singles, body, [to_t(p) for p in per] + [to_t(due)], []


class UnrolledLoop:
    """The rejected alternative, for comparison: all K iterations unrolled into one compiled graph."""

    def __init__(self, body):
        from rlgraph_torch.compile import try_compile

        self.body = body
        self.trace = [0]
        self.compiled = try_compile(self._round, self.trace, trace_autograd=True)

    def _round(self, n_per, *args):
        per_step, constants = args[:n_per], args[n_per:]
        outs = [self.body(*(x[k] for x in per_step), *constants) for k in range(per_step[0].shape[0])]
        return tuple(torch.stack([o[i].detach() for o in outs]) for i in range(len(outs[0])))

    @property
    def trace_count(self):
        """Compiled graphs."""
        return self.trace[0]

    def __call__(self, per_step, constants=()):
        """One round."""
        return self.compiled(len(per_step), *per_step, *constants)


def time_singles(agent, singles, lrs, sync_last: bool) -> float:
    """Seconds for one round of single ``train_step`` calls (lr written before each)."""
    step = agent.train_step
    t = time.perf_counter()
    for lr, inputs in zip(lrs, singles):
        step.learning_rate = lr
        step(*inputs)
    if sync_last:
        agent.graph.sync_target()
    return time.perf_counter() - t


def time_loop(agent, loop, per_step, constants, lr) -> float:
    """Seconds for one fused-loop round (lr written once: a schedule moves per round there)."""
    t = time.perf_counter()
    agent.train_step.learning_rate = lr
    out = loop(per_step, constants)
    float(out[0][-1])
    return time.perf_counter() - t


def main() -> None:
    """Time every variant, interleaved, and print medians in microseconds per gradient step."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", default="ppo,dqn")
    parser.add_argument("--modes", default="eager,static")
    parser.add_argument("--no-loop", action="store_true")
    parser.add_argument("--unrolled", action="store_true", help="also time the whole round unrolled in one graph")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name in args.only.split(","):
        rng = np.random.default_rng(0)
        variants = {}
        for mode in args.modes.split(","):
            agent = build(name, mode)
            singles, body, per_step, constants = (ppo_case if name == "ppo" else dqn_case)(agent, rng)
            variants[f"{mode} step"] = (agent, singles, None)
            if mode == "static" and not args.no_loop and agent.backend.fuses_loops:
                variants["static fused_loop"] = (agent, None, (agent.backend.fused_loop(body), per_step, constants))
                if args.unrolled:
                    variants["static unrolled"] = (agent, None, (UnrolledLoop(body), per_step, constants))
        k = len(next(iter(variants.values()))[1])
        t0 = time.perf_counter()
        for agent, singles, loop in variants.values():  # warm-up: compile every program
            for _ in range(2):
                if loop is None:
                    time_singles(agent, singles, [1e-3 * (1 - j / k) for j in range(k)], name == "dqn")
                else:
                    time_loop(agent, loop[0], loop[1], loop[2], 1e-3)
        print(f"{name}: warm-up (compiles) {time.perf_counter() - t0:.1f} s")
        times: dict[str, list[float]] = {v: [] for v in variants}
        for r in range(args.repeats):
            lrs = [1e-3 * (1 - (r * k + j) / (10 * k * args.repeats)) for j in range(k)]
            for v, (agent, singles, loop) in variants.items():
                if loop is None:
                    times[v].append(time_singles(agent, singles, lrs, name == "dqn") / k)
                else:
                    times[v].append(time_loop(agent, loop[0], loop[1], loop[2], lrs[0]) / k)
        for v, ts in times.items():
            agent = variants[v][0]
            traces = variants[v][2][0].trace_count if variants[v][2] else getattr(agent.train_step, "trace_count", "-")
            print(
                f"{name} {v:18s} {statistics.median(ts) * 1e6:8.0f} us/step  (min {min(ts) * 1e6:.0f}; traces {traces})"
            )


if __name__ == "__main__":
    main()
