"""Pong env frames/s through the executors: ``local`` against ``ray_apex`` / ``ray_impala`` with 2 workers.

The shipped Pong configs (``ALE/Pong-v5``, AtariPreprocessing with frame skip 4, 84x84, a stack
of 4, rewards clipped), trained for real through :func:`rlgraph_core.assemble.train`, in one run:

* **dqn**: ``configs/apex_pong.yaml`` (dueling double DQN, Nature CNN, 3-step returns, prioritized
  replay, batch 512, 4 learner updates per 256 env steps, 4 envs in all) under ``local`` (the
  baseline: one process, 4 envs, the config's constant epsilon 0.4) and ``ray_apex`` with 2
  workers (2 envs each, Ape-X epsilons, one replay shard; ``throttle`` keeps the same replay ratio);
* **impala**: ``configs/impala_pong.yaml`` (IMPALA CNN, 20-step unrolls, 16 envs in all) under
  ``local`` (the baseline: the agent is its own actor; one update per 16 x 20 = 320 env steps) and
  ``ray_impala`` with 2 workers (8 envs each; a learner batch is 4 fragments = 640 env steps).

Only what makes a case short is changed: ``train.total_timesteps`` (``--steps``), no evaluation,
no target return, a metrics row every ``--steps / 8`` env steps, no progress bar, the ``jsonl``
logger only, one torch thread per process; for DQN a replay of ``--steps`` records (at least two
batches) that starts learning after ``max(batch_size, --steps / 4)`` env steps, and no replay
snapshots (``executor.placement_timeout_s`` is raised to 600 s for loaded machines).

For each case:

* **startup**: seconds from calling ``train`` to the train-start hook (agent built; for Ray,
  learner built and the workers and shard placed and built). The private Ray session is started
  once, before all cases, and its start-up time printed apart;
* **env steps/s** and **frames/s** (env steps x the frame skip of 4) between the first metrics
  row at which the learner has already updated (so start-up, ``learning_starts``, the first
  compiles of act and update fall outside) and the last row;
* **updates/s**: learner updates (gradient steps) per second over the same window. A ``ray_impala``
  update learns from twice the samples of a local one (640 vs 320 env steps), so compare the
  IMPALA rows by env steps/s;
* **CPU s**: CPU seconds (user + system) spent over the window by this process alone (``local``)
  or by this process and every process it started (``ray_*``: the Ray daemons, the workers, the
  replay shard), with **steps/CPU-s**: on a loaded machine the wall time includes waiting for a
  core, CPU time much less so.

``ratio`` is relative to the ``local`` run of the same agent, measured in the same run. Run:

    python benchmarks/bench_pong_executors.py                      # both agents, 4000 env steps each
    python benchmarks/bench_pong_executors.py --cases impala --steps 8000 --mode eager

A ``ray_*`` case needs three free cores (the learner in this process and the two workers) to
measure the executor rather than contention; see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import bench_distributed  # the benchmarks folder: this script's own
from rlgraph_core.assemble import train
from rlgraph_core.config.run import apply_overrides, load_shipped_config, validate_config
from rlgraph_core.plugins import PluginManager, hookimpl

CASES = {
    # agent: (shipped config, Ray executor)
    "dqn": ("apex_pong", "ray_apex"),
    "impala": ("impala_pong", "ray_impala"),
}
WORKERS = 2
QUIET = [
    "train.progress_bar=false",
    "train.loggers=[jsonl]",
    "train.num_threads=1",
    "train.eval_interval=1000000000",
    "train.target_return=null",
]


def cpu_seconds(tree: bool) -> float:
    """User + system CPU seconds of this process, with ``tree`` also of every process it started."""
    import psutil

    me = psutil.Process()
    procs = [me] + (me.children(recursive=True) if tree else [])
    total = 0.0
    for proc in procs:
        try:
            t = proc.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        total += t.user + t.system
    return total


class Clock(bench_distributed.Clock):
    """Hook plugin: when training started, and (time, env steps, updates, CPU s) at every metrics row
    (``bench_distributed.Clock`` with the CPU seconds in place of the eval return)."""

    def __init__(self, tree: bool):
        super().__init__()
        self.tree = tree

    @hookimpl
    def rlgraph_on_iteration(self, metrics):
        self.rows.append(
            (time.perf_counter(), int(metrics["timesteps"]), float(metrics.get("updates") or 0), cpu_seconds(self.tree))
        )


def frame_skip(raw: dict) -> int:
    """The ``atari_preprocessing`` wrapper's frame skip in a raw config (1 without one)."""
    for w in raw["env"].get("wrappers", []):
        if w.get("type") == "atari_preprocessing":
            return int(w.get("frame_skip", 4))
    return 1


def config_for(agent: str, executor: str, args) -> tuple:
    """The shipped Pong config of ``agent`` under ``executor``, shortened; ``(config, frame skip)``."""
    name, _ = CASES[agent]
    raw = load_shipped_config(name)
    steps = args.steps
    more = [
        f"train.seed={args.seed}",
        f"train.executor={executor}",
        f"train.total_timesteps={steps}",
        f"train.log_interval={max(steps // 8, 1)}",
    ]
    if args.backend:
        more.append(f"train.backend={args.backend}")
    # static unless told: the configs' mode auto would pick eager for a run this short
    more.append(f"train.mode={args.mode or 'static'}")
    if agent == "dqn":
        batch = int(raw["agent"]["batch_size"])
        more += [f"agent.learning_starts={max(batch, steps // 4)}", f"agent.memory.capacity={max(steps, 2 * batch)}"]
    if executor == "local":
        more.append("executor={}")
    else:
        more += [
            f"executor.num_workers={WORKERS}",
            f"executor.envs_per_worker={max(1, raw['env']['num_envs'] // WORKERS)}",
            "executor.placement_timeout_s=600",
        ]
        if executor == "ray_apex":
            more.append("executor.replay_snapshot_interval=null")
    return validate_config(apply_overrides(raw, QUIET + more)), frame_skip(raw)


def run_case(agent: str, executor: str, args) -> dict:
    """Train one shortened run; start-up seconds and the rates over the window (see the docstring)."""
    config, skip = config_for(agent, executor, args)
    clock = Clock(tree=executor != "local")
    out = Path(tempfile.mkdtemp(prefix="rlgraph-bench-pongexec-"))
    try:
        pm = PluginManager()
        pm.register(clock, "bench-clock")
        clock.t_call = time.perf_counter()
        summary = train(config, out, plugin_manager=pm)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    total = time.perf_counter() - clock.t_call
    learned = [r for r in clock.rows if r[2] > 0]
    if len(learned) < 2:
        raise RuntimeError(
            f"{agent} {executor}: {len(learned)} metrics row(s) after the first update in {summary['timesteps']} "
            f"env steps ({summary['updates']} updates): raise --steps"
        )
    (t0, s0, u0, c0), (t1, s1, u1, c1) = learned[0], learned[-1]
    dt = max(t1 - t0, 1e-9)
    return {
        "startup_s": clock.t_start - clock.t_call,
        "total_s": total,
        "window_steps": s1 - s0,
        "steps_per_s": (s1 - s0) / dt,
        "frames_per_s": skip * (s1 - s0) / dt,
        "updates_per_s": (u1 - u0) / dt,
        "cpu_s": c1 - c0,
        "steps_per_cpu_s": (s1 - s0) / max(c1 - c0, 1e-9),
        "updates": summary["updates"],
    }


def ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}" if base else "-"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=4000, help="env steps of each run (all workers together)")
    p.add_argument(
        "--cases", default="dqn,impala", help="comma list of: dqn (local vs ray_apex), impala (local vs ray_impala)"
    )
    p.add_argument("--backend", default=None, help="train.backend (default: the configs', torch)")
    p.add_argument(
        "--mode",
        default=None,
        choices=["eager", "static"],
        help="train.mode (default: static, the configs' mode for their full runs)",
    )
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    agents = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [a for a in agents if a not in CASES]
    if unknown:
        p.error(f"unknown case(s) {unknown}; known: {', '.join(CASES)}")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # the learning-curve plot of a run without finished episodes has no legend entries
    warnings.filterwarnings("ignore", message="No artists with labels found")
    import ray
    import torch

    torch.set_num_threads(1)
    cpus = max(os.cpu_count() or 1, WORKERS + 1)
    ray_tmp = tempfile.mkdtemp(prefix="rlgraph-bench-ray-")
    t = time.perf_counter()
    for attempt in (1, 2, 3):  # on a loaded machine the raylet can miss Ray's fixed 30 s start-up wait
        try:
            ray.init(
                address="local", num_cpus=cpus, include_dashboard=False, _temp_dir=ray_tmp, configure_logging=False
            )
            break
        except Exception as exc:
            ray.shutdown()
            if attempt == 3:
                raise
            print(f"Ray did not start ({type(exc).__name__}: {exc}); trying again")
    print(f"private Ray session with {cpus} CPUs started in {time.perf_counter() - t:.1f} s")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    print(
        f"ALE/Pong-v5, {args.steps} env steps per run, backend {args.backend or 'torch (the configs)'}, "
        f"mode {args.mode or 'static (the configs)'}, seed {args.seed}, {WORKERS} Ray workers",
        flush=True,
    )
    try:
        for agent in agents:
            _, ray_executor = CASES[agent]
            results = {}
            for executor in ("local", ray_executor):
                r = results[executor] = run_case(agent, executor, args)
                print(
                    f"  {agent} {executor}: "
                    + ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in r.items()),
                    flush=True,
                )
            base = results["local"]
            print(f"\n{agent.upper()} ({CASES[agent][0]}), {args.steps} env steps per run; window: see the docstring\n")
            print(
                "| agent | executor | workers | startup s | window env steps | env steps/s | frames/s | vs local "
                "| updates/s | vs local | CPU s | env steps/CPU-s | vs local |"
            )
            print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
            for executor, m in results.items():
                print(
                    f"| {agent.upper()} | {executor} | {'-' if executor == 'local' else WORKERS} | {m['startup_s']:.1f} "
                    f"| {m['window_steps']} | {m['steps_per_s']:.1f} | {m['frames_per_s']:.0f} "
                    f"| {ratio(m['steps_per_s'], base['steps_per_s'])} | {m['updates_per_s']:.2f} "
                    f"| {ratio(m['updates_per_s'], base['updates_per_s'])} | {m['cpu_s']:.1f} "
                    f"| {m['steps_per_cpu_s']:.1f} | {ratio(m['steps_per_cpu_s'], base['steps_per_cpu_s'])} |"
                )
            print(flush=True)
    finally:
        ray.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
