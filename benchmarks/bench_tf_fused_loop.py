"""Microseconds per gradient step of the tf backend: eager, static single step, fused loop.

Two update rounds of the shipped CartPole configs, built as real agents with the tf backend:

* ``ppo``: configs/ppo_cartpole.yaml (separate 64-64 tanh trunks, 4-dim obs, 2 actions,
  minibatch 256, 20 steps per round, Adam, grad clip 0.5);
* ``dqn``: configs/dqn_cartpole.yaml (256-256 relu, batch 64, double-Q Huber loss, 128 steps per
  round, hard target copy every 128 steps).

Variants, each timed on the same inputs in one process, interleaved and repeated (medians):
``eager`` (K calls of ``agent.train_step`` in eager mode), ``static`` (K calls of the static
step, XLA), ``loop-xla`` and ``loop-plain`` (one call of a fused loop whose body takes the
minibatch rows from constants with per-step index rows and calls ``train_step.inline``; DQN's
body also calls ``target_sync.sync_if``). Single-step inputs are converted to tensors before
timing. Wall-clock and process CPU time (steadier on a shared machine) are reported. Run from the repository root::

    OMP_NUM_THREADS=1 python benchmarks/bench_tf_fused_loop.py --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

from rlgraph_core.assemble import make_agent
from rlgraph_core.config.run import apply_overrides, load_config_file, validate_config
from rlgraph_core.spaces import Discrete, FloatBox
from rlgraph_tf.loop import TFFusedLoop
from workloads import ppo_samples

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def build(algo: str, mode: str):
    """The agent of ``configs/<algo>_cartpole.yaml`` on the tf backend in ``mode``."""
    raw = load_config_file(CONFIGS / f"{algo}_cartpole.yaml")
    raw = apply_overrides(raw, ["train.backend=tf", f"train.mode={mode}", "train.device=cpu"])
    config = validate_config(raw)
    num_envs = config.env.num_envs
    return make_agent(config, FloatBox(shape=(4,)), Discrete(2), num_envs=num_envs)


def ppo_workload(agent, rng):
    """Per-step index rows, constants and the single-step argument lists of one PPO round."""
    n, k, b = 256, 20, 256
    consts = ppo_samples(rng, n)
    idx = np.stack([rng.permutation(n)[:b] for _ in range(k)]).astype(np.int64)
    return idx, None, consts, [np.float32(0.2)]


def dqn_workload(agent, rng):
    n, k, b = 8192, 128, 64
    consts = [
        rng.standard_normal((n, 4)).astype(np.float32),
        rng.integers(0, 2, n).astype(np.int64),
        rng.random(n).astype(np.float32),
        rng.standard_normal((n, 4)).astype(np.float32),
        rng.random(n) < 0.05,
        np.full(n, 0.99, np.float32),
        np.ones(n, np.float32),
    ]
    idx = rng.integers(0, n, (k, b)).astype(np.int64)
    due = np.zeros(k, np.float32)
    due[-1] = 1.0  # target_update_interval 128: one hard copy per round, after its last step
    return idx, due, consts, []


def variants(algo: str):
    """``{name: run_round}``: each call runs one update round and blocks on its result."""
    make = ppo_workload if algo == "ppo" else dqn_workload
    out = {}
    for mode in ("eager", "static"):
        agent = build(algo, mode)
        be = agent.backend
        idx, due, consts, extra = make(agent, np.random.default_rng(0))
        per_call = [[be.to_tensor(c[rows]) for c in consts] + [be.to_tensor(e) for e in extra] for rows in idx]

        def single(agent=agent, per_call=per_call, due=due):
            out = None
            for k, args in enumerate(per_call):
                out = agent.train_step(*args)
                if due is not None and due[k]:
                    agent.graph.sync_target()
            return float(agent.backend.to_numpy(out[0]))

        out[mode] = single
        if mode != "static":
            continue
        consts_t = [be.to_tensor(c) for c in consts] + [be.to_tensor(e) for e in extra]
        per_step = [be.to_tensor(idx)] + ([] if due is None else [be.to_tensor(due)])
        n_data = len(consts)

        def body(rows, *rest, agent=agent, dqn=due is not None, n_data=n_data):
            ops = agent.backend.ops
            tail = list(rest)
            due_k = tail.pop(0) if dqn else None
            data = [ops.take(c, rows) for c in tail[:n_data]]
            outputs = agent.train_step.inline(*data, *tail[n_data:])
            if dqn:
                agent.graph.target_sync.sync_if(due_k)
            return tuple(outputs)

        for jit in (True, False):
            loop = TFFusedLoop(body, jit_compile=jit)

            def fused(loop=loop, per_step=per_step, consts_t=consts_t, be=be):
                outs = loop(per_step, consts_t)
                return float(be.to_numpy(outs[0])[-1])

            out["loop-xla" if jit else "loop-plain"] = fused
    return out, 20 if algo == "ppo" else 128


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", default="ppo,dqn")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3, help="update rounds per timing")
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    for algo in args.algos.split(","):
        runs, k = variants(algo)
        t0 = time.perf_counter()
        for fn in runs.values():  # warm-up: traces and XLA compiles outside the timing
            fn()
        print(f"{algo}: warm-up (traces, compiles) {time.perf_counter() - t0:.1f} s")
        wall: dict[str, list[float]] = {name: [] for name in runs}
        cpu: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.repeats):
            for name, fn in runs.items():
                start, start_cpu = time.perf_counter(), time.process_time()
                for _ in range(args.rounds):
                    fn()
                wall[name].append((time.perf_counter() - start) / (args.rounds * k) * 1e6)
                cpu[name].append((time.process_time() - start_cpu) / (args.rounds * k) * 1e6)
        for name, ts in wall.items():
            print(
                f"  {algo} {name:10s} {statistics.median(ts):8.0f} us/step wall, "
                f"{statistics.median(cpu[name]):8.0f} us/step cpu  (wall runs: {', '.join(f'{t:.0f}' for t in ts)})"
            )


if __name__ == "__main__":
    main()
