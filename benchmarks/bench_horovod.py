"""Horovod executor: allreduce cost per update against a bare ``hvd.allreduce``, and 1 vs 2 ranks.

    python benchmarks/bench_horovod.py                 # both parts (a few minutes on 2 cores)
    python benchmarks/bench_horovod.py --skip-train    # only the allreduce part (~20 s)

Part 1 (under ``horovodrun -np 2 --gloo``): each rank builds the default PPO agent of
``configs/ppo_cartpole.yaml`` (64x64 MLP actor and critic) on torch, takes one flat gradient
buffer of its train step, and times, interleaved, (a) the executor's gradient hook
(``TimedAllreduce``: numpy -> ``horovod.torch`` allreduce -> numpy) and (b) a bare
``hvd.allreduce`` of a torch tensor of the same buffer. Both medians are printed per call; the
target is (a) <= 1.5 x (b).

Part 2: ``rlgraph train configs/ppo_cartpole.yaml --executor horovod`` with 1 rank (no launcher)
and with 2 ranks, until eval >= 475: env steps (global and per rank) to the target, global and
per-rank env steps/s, updates/s and allreduce ms per update, from each run's ``summary.json``.
Needs Horovod (``python -m rlgraph_horovod.install``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(TF_CPP_MIN_LOG_LEVEL="3", MPLBACKEND="Agg", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return env


def worker_allreduce(calls: int, out: Path) -> None:
    """Runs on every rank: time the executor's hook against a bare hvd.allreduce."""
    import horovod.torch as hvd
    import numpy as np
    import torch

    from rlgraph_core.assemble import assemble
    from rlgraph_core.config.run import apply_overrides, load_config_file, validate_config
    from rlgraph_core.plugins import get_plugin_manager
    from rlgraph_horovod.collectives import TimedAllreduce, collectives_for

    torch.set_num_threads(1)
    config = validate_config(apply_overrides(load_config_file(ROOT / "configs/ppo_cartpole.yaml"), []))
    parts = assemble(config, get_plugin_manager())
    envs = parts.make_vector_env(0)
    agent = parts.make_agent(envs.single_observation_space, envs.single_action_space, num_envs=config.env.num_envs)
    size = agent.train_steps()["policy"].num_parameters
    coll = collectives_for(parts.backend)
    hook = TimedAllreduce(coll)
    rng = np.random.default_rng(coll.rank)
    buf = rng.standard_normal(size).astype(np.float32)
    hooked, bare = [], []
    for i in range(calls + 20):
        t0 = time.perf_counter()
        hook(buf)
        t1 = time.perf_counter()
        hvd.allreduce(torch.from_numpy(buf), name="bare", op=hvd.Average)
        t2 = time.perf_counter()
        if i >= 20:  # warm-up
            hooked.append(t1 - t0)
            bare.append(t2 - t1)
    if coll.rank == 0:
        out.write_text(
            json.dumps(
                {
                    "floats": int(size),
                    "hook_ms": 1000 * statistics.median(hooked),
                    "bare_ms": 1000 * statistics.median(bare),
                }
            )
        )


def _train(np_: int, out: Path, budget: int) -> dict:
    cmd = [str(BIN / "rlgraph"), "train", str(ROOT / "configs/ppo_cartpole.yaml"), "--executor", "horovod"]
    cmd += [
        "--out",
        str(out),
        "--no-progress",
        "--set",
        f"train.total_timesteps={budget}",
        "--set",
        "train.eval_interval=2048",
    ]
    if np_ > 1:
        cmd = [str(BIN / "horovodrun"), "-np", str(np_), "-H", f"localhost:{np_}", "--gloo", *cmd]
    start = time.perf_counter()
    subprocess.run(cmd, env=_env(), check=True, capture_output=True, text=True)
    summary = json.loads((out / "summary.json").read_text())
    summary["process_wall_s"] = time.perf_counter() - start
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="allreduce calls timed per method")
    parser.add_argument("--budget", type=int, default=100_000, help="env step budget of the training runs")
    parser.add_argument("--skip-train", action="store_true")
    parser.add_argument("--worker", choices=["allreduce"], help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker_allreduce(args.calls, Path(args.out))
        return
    with tempfile.TemporaryDirectory() as tmp:
        res = Path(tmp) / "allreduce.json"
        cmd = [str(BIN / "horovodrun"), "-np", "2", "-H", "localhost:2", "--gloo", sys.executable, __file__]
        subprocess.run(
            [*cmd, "--worker", "allreduce", "--calls", str(args.calls), "--out", str(res)], env=_env(), check=True
        )
        ar = json.loads(res.read_text())
        ratio = ar["hook_ms"] / ar["bare_ms"]
        print(
            f"\nallreduce of one PPO gradient buffer ({ar['floats']} float32), 2 ranks, Gloo, median of {args.calls}:"
        )
        print(f"  bare hvd.allreduce (torch tensor)      {ar['bare_ms']:.3f} ms")
        print(f"  executor gradient hook (numpy in/out)  {ar['hook_ms']:.3f} ms   ratio {ratio:.2f} (target <= 1.5)")
        if args.skip_train:
            return
        rows = []
        for np_ in (1, 2):
            s = _train(np_, Path(tmp) / f"np{np_}", args.budget)
            rows.append((np_, s))
        print(f"\nPPO CartPole-v1 to eval >= 475 (budget {args.budget} env steps, torch eager, 8 envs per rank):")
        print(" ranks  reached  env steps  per rank  env steps/s  per rank       updates/s  allreduce ms/upd  wall s")
        for np_, s in rows:
            per_rank = s["timesteps"] // np_
            rates = "/".join(f"{r:.0f}" for r in s.get("rank_env_steps_per_s", []))
            print(
                f" {np_:5d}  {str(s['target_reached']):7s}  {s['timesteps']:9d}  {per_rank:8d}  {s['env_steps_per_s']:11.0f}  "
                f"{rates:13s}  {s['updates_per_s']:9.1f}  {s['allreduce_ms_per_update']:16.3f}  {s['process_wall_s']:6.1f}"
            )


if __name__ == "__main__":
    main()
