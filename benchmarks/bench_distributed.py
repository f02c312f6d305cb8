"""The Ray executors against the local executor, measured in the same run.

Cases (CartPole-v1, torch eager, one torch thread per process):

* **PPO**: ``configs/ppo_cartpole_ray.yaml`` (8 envs x 32 steps = 256 samples per update) under
  ``local`` (the baseline: one process, 8 envs) and ``ray_sync`` with 1 worker (8 envs) and
  2 workers (4 envs each) -- the same total batch per update in all three;
* **DQN**: ``configs/apex_cartpole.yaml`` (2 envs in all, the learner keeps the replay ratio of
  128 updates per 256 env steps) under ``local`` (the baseline; its agent explores with the
  config's constant epsilon 0.4) and ``ray_apex`` with 1 and 2 workers (Ape-X epsilons).

For each case and seed:

* **startup**: seconds from calling ``train`` to the train-start hook (learner built, actors
  placed and built; the private Ray session itself is started once, before all cases, and its
  start-up time printed apart);
* **throughput**: env steps/s and learner updates/s between the first and the last metrics row
  of a run of ``--steps`` env steps without evaluation (the start-up and the first row --
  ``learning_starts`` for DQN -- fall outside the window);
* **to 475** (``--solve``): a second run with a greedy 10-episode evaluation every
  ``--eval-interval`` env steps until the mean evaluation return reaches 475, or
  ``--solve-budget`` env steps: env steps and wall-clock seconds (start-up and evaluations
  included) to get there; medians over ``--seeds``.

``ratio`` is relative to the local executor of the same agent, measured in the same run. Run:

    python benchmarks/bench_distributed.py                          # throughput, 6000 steps
    python benchmarks/bench_distributed.py --steps 20000 --solve --seeds 0,1,2
    python benchmarks/bench_distributed.py --agents ppo --workers 1,2,4 --cpus 4

On a machine with fewer free cores than processes (learner + workers), the Ray cases measure
contention more than the executors; see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from rlgraph_core.assemble import train
from rlgraph_core.config.run import apply_overrides, load_shipped_config, validate_config
from rlgraph_core.plugins import PluginManager, hookimpl

AGENTS = {
    # agent: (shipped config, Ray executor)
    "ppo": ("ppo_cartpole_ray", "ray_sync"),
    "dqn": ("apex_cartpole", "ray_apex"),
}
QUIET = ["train.progress_bar=false", "train.loggers=[jsonl]", "train.num_threads=1"]


class Clock:
    """Hook plugin: when the run started training, and (time, timesteps, updates/s, eval return) of every row."""

    def __init__(self):
        self.t_call = time.perf_counter()
        self.t_start: float | None = None
        self.rows: list[tuple[float, int, float, float | None]] = []

    @hookimpl
    def rlgraph_on_train_start(self, run_info):
        self.t_start = time.perf_counter()

    @hookimpl
    def rlgraph_on_iteration(self, metrics):
        self.rows.append(
            (
                time.perf_counter(),
                int(metrics["timesteps"]),
                float(metrics["updates_per_s"]),
                metrics["eval_return_mean"],
            )
        )


def config_for(agent: str, executor: str, workers: int, seed: int, overrides: list[str]):
    """The shipped config of ``agent`` under ``executor`` (``local`` or its Ray executor)."""
    name, _ = AGENTS[agent]
    more = [f"train.seed={seed}", f"train.executor={executor}"]
    if executor == "local":
        more.append("executor={}")
    else:
        raw_env = load_shipped_config(name)["env"]["num_envs"]
        more += [f"executor.num_workers={workers}", f"executor.envs_per_worker={max(1, raw_env // workers)}"]
    return validate_config(apply_overrides(load_shipped_config(name), QUIET + more + overrides))


def one_run(agent: str, executor: str, workers: int, seed: int, overrides: list[str]) -> tuple[dict, Clock]:
    """Train :func:`config_for`'s config in a scratch folder with a :class:`Clock` registered;
    return the run's summary and the clock."""
    config, clock = config_for(agent, executor, workers, seed, overrides), Clock()
    out = Path(tempfile.mkdtemp(prefix="rlgraph-bench-dist-"))
    try:
        pm = PluginManager()
        pm.register(clock, "bench-clock")
        clock.t_call = time.perf_counter()
        return train(config, out, plugin_manager=pm), clock
    finally:
        shutil.rmtree(out, ignore_errors=True)


def throughput(agent, executor, workers, seed, steps, overrides) -> dict:
    """Start-up seconds and steady env steps/s and updates/s of one run without evaluation."""
    quiet = [f"train.total_timesteps={steps}", f"train.log_interval={max(steps // 8, 1)}"]
    quiet += ["train.eval_interval=1000000000", "train.target_return=null"]
    _, clock = one_run(agent, executor, workers, seed, quiet + overrides)
    (t0, s0, _, _), (t1, s1, _, _) = clock.rows[0], clock.rows[-1]
    dt = max(t1 - t0, 1e-9)
    # each row's updates/s covers the time since the row before it
    updates = sum(rate * (t - prev[0]) for prev, (t, _, rate, _) in zip(clock.rows, clock.rows[1:]))
    return {"startup": clock.t_start - clock.t_call, "steps_per_s": (s1 - s0) / dt, "updates_per_s": updates / dt}


def solve(agent, executor, workers, seed, budget, eval_interval, overrides) -> dict:
    """Env steps and seconds to a mean evaluation return >= 475 (None when not reached)."""
    to_solve = [f"train.total_timesteps={budget}", f"train.eval_interval={eval_interval}"]
    to_solve += [f"train.log_interval={eval_interval}", "train.target_return=475"]
    summary, clock = one_run(agent, executor, workers, seed, to_solve + overrides)
    reached = summary["ended_by"] == "target_return"
    return {
        "solve_steps": summary["timesteps"] if reached else None,
        "solve_s": (clock.rows[-1][0] - clock.t_call) if reached else None,
    }


def median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--agents", default="ppo,dqn", help="comma list of: ppo (vs ray_sync), dqn (vs ray_apex)")
    p.add_argument("--workers", default="1,2", help="Ray worker counts to measure")
    p.add_argument("--steps", type=int, default=6000, help="env steps of each throughput run")
    p.add_argument("--seeds", default="0", help="comma list of seeds (medians are printed)")
    p.add_argument("--solve", action="store_true", help="also measure env steps / seconds to eval >= 475")
    p.add_argument("--solve-budget", type=int, default=60000, help="env steps before a solve run gives up")
    p.add_argument("--eval-interval", type=int, default=4096, help="env steps between evaluations (solve)")
    p.add_argument("--cpus", type=int, default=os.cpu_count() or 2, help="CPUs of the private Ray session")
    p.add_argument("--set", dest="overrides", action="append", default=[], help="extra config override k=v")
    args = p.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    import torch

    torch.set_num_threads(1)
    seeds = [int(s) for s in args.seeds.split(",")]
    workers = [int(w) for w in args.workers.split(",")]
    ray_tmp = tempfile.mkdtemp(prefix="rlgraph-bench-ray-")
    t = time.perf_counter()
    ray.init(address="local", num_cpus=args.cpus, include_dashboard=False, _temp_dir=ray_tmp, configure_logging=False)
    print(f"private Ray session with {args.cpus} CPUs started in {time.perf_counter() - t:.1f} s")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    try:
        for agent in args.agents.split(","):
            _, ray_executor = AGENTS[agent]
            cases = [("local", 1)] + [(ray_executor, w) for w in workers]
            results = {case: [] for case in cases}
            for seed in seeds:  # cases interleaved per seed, so each sees the same machine load
                for executor, w in cases:
                    r = throughput(agent, executor, w, seed, args.steps, args.overrides)
                    if args.solve:
                        r.update(solve(agent, executor, w, seed, args.solve_budget, args.eval_interval, args.overrides))
                    results[(executor, w)].append(r)
                    print(
                        f"  {agent} {executor} x{w} seed {seed}: "
                        + ", ".join(f"{k} {fmt(v, '.1f')}" for k, v in r.items())
                    )
            base = {k: median(r[k] for r in results[("local", 1)]) for k in results[("local", 1)][0]}
            print(f"\n{agent.upper()}: {args.steps} env steps per throughput run, median of {len(seeds)} seed(s)")
            head = f"{'executor':<10} {'workers':>7} {'startup s':>9} {'env steps/s':>11} {'ratio':>6} {'updates/s':>9} {'ratio':>6}"
            if args.solve:
                head += f" {'steps to 475':>12} {'s to 475':>8} {'solved':>6}"
            print(head)
            for (executor, w), runs in results.items():
                m = {k: median(r[k] for r in runs) for k in runs[0]}
                sr = m["steps_per_s"] / base["steps_per_s"] if base["steps_per_s"] else None
                ur = m["updates_per_s"] / base["updates_per_s"] if base["updates_per_s"] else None
                line = (
                    f"{executor:<10} {('-' if executor == 'local' else w):>7} {m['startup']:>9.1f} "
                    f"{m['steps_per_s']:>11.0f} {fmt(sr, '.2f'):>6} {m['updates_per_s']:>9.0f} {fmt(ur, '.2f'):>6}"
                )
                if args.solve:
                    solved = sum(r["solve_steps"] is not None for r in runs)
                    line += f" {fmt(m['solve_steps'], '.0f'):>12} {fmt(m['solve_s'], '.0f'):>8} {solved:>3}/{len(runs)}"
                print(line)
            print()
    finally:
        ray.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
