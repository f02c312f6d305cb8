"""How long a killed ``ray_apex`` worker stalls the learner, measured in the same run as a baseline.

``configs/apex_cartpole.yaml`` under ``ray_apex`` (2 workers, torch eager, one torch thread per
process) learns for ``--steps`` env steps; once the learner has updated for ``--warm-s`` seconds,
worker 0 is killed (``ray.kill``, as a crash). A callback stamps every learner update. Reported:

* **baseline**: the longest gap between two learner updates, and updates/s, in the ``--window-s``
  seconds before the kill;
* **after the kill**: the same in the ``--window-s`` seconds after it;
* **replacement**: seconds from the kill until the replacement worker (generation 1) answers
  ``ready()``.

Before issue 19 the replacement was awaited synchronously: the learner stopped for 6-7 s per
restart. Now it is built while the learner goes on learning from the shards and the live worker,
so the longest gap after the kill should stay near the baseline's. Run:

    python benchmarks/bench_restart_stall.py [--steps 40000] [--warm-s 5] [--window-s 8] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time

from rlgraph_core.assemble import assemble
from rlgraph_core.config.run import apply_overrides, load_shipped_config, validate_config
from rlgraph_core.plugins import PluginManager, hookimpl


class Killer:
    """Hook plugin: kills worker 0 once the learner has updated for ``warm_s`` seconds, then (in a
    thread, so the run is not held up) waits for its replacement to answer ``ready()``."""

    def __init__(self, ray, stamps: UpdateStamps, warm_s: float):
        self.ray, self.stamps, self.warm_s = ray, stamps, warm_s
        self.names: list[str] = []
        self.t_kill: float | None = None
        self.t_ready: float | None = None

    @hookimpl
    def rlgraph_on_train_start(self, run_info):
        self.names = run_info["ray"]["workers"]

    def maybe_kill(self) -> None:
        stamps = self.stamps.stamps
        if self.t_kill is not None or not stamps or time.perf_counter() - stamps[0][0] < self.warm_s:
            return
        victim = self.names[0]
        self.t_kill = time.perf_counter()
        self.ray.kill(self.ray.get_actor(victim), no_restart=False)
        threading.Thread(target=self._wait_ready, args=(victim[: -len("-0")] + "-1",), daemon=True).start()

    def _wait_ready(self, name: str) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                self.ray.get(self.ray.get_actor(name).ready.remote())
                self.t_ready = time.perf_counter()
                return
            except (ValueError, self.ray.exceptions.RayError):
                time.sleep(0.05)


class UpdateStamps:
    """Callback: stamps (time, learner updates) after every step in which the learner updated,
    gives the killer its chance, and stops the run once the window after the kill is measured and
    the replacement is ready."""

    def __init__(self, window_s: float):
        self.window_s = window_s
        self.stamps: list[tuple[float, int]] = []
        self.killer: Killer | None = None

    def on_update(self, run):
        self.stamps.append((time.perf_counter(), int(run.updates)))
        killer = self.killer
        if killer is None:
            return None
        killer.maybe_kill()
        measured = killer.t_kill is not None and time.perf_counter() > killer.t_kill + self.window_s + 1
        return not (measured and killer.t_ready is not None)


def window(stamps: list[tuple[float, int]], start: float, end: float) -> tuple[float, float]:
    """(longest gap between consecutive updates in [start, end], updates/s there)."""
    inside = [s for s in stamps if start <= s[0] <= end]
    if len(inside) < 2:
        return end - start, 0.0
    gaps = [b[0] - a[0] for a, b in zip(inside, inside[1:])]
    rate = (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])
    return max(gaps), rate


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=40000, help="env steps of the run (a cap: it needs only the windows)")
    p.add_argument("--warm-s", type=float, default=5.0, help="seconds of learning before the kill")
    p.add_argument("--window-s", type=float, default=8.0, help="seconds compared before and after the kill")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    tmp = tempfile.mkdtemp(prefix="rlgraph-stall-")
    ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=tmp, configure_logging=False)
    out = tempfile.mkdtemp(prefix="rlgraph-stall-run-")
    try:
        overrides = [
            "train.progress_bar=false", "train.loggers=[jsonl]", "train.num_threads=1", f"train.seed={args.seed}",
            f"train.total_timesteps={args.steps}", "train.target_return=null", "train.eval_interval=10000000",
            "train.log_interval=2000",
        ]  # fmt: skip
        config = validate_config(apply_overrides(load_shipped_config("apex_cartpole"), overrides))
        pm = PluginManager()
        stamps = UpdateStamps(args.window_s)
        killer = Killer(ray, stamps, args.warm_s)
        stamps.killer = killer
        pm.register(killer, "stall-killer")
        assembly = assemble(config, pm)
        assembly.callbacks.append(stamps)
        summary = assembly.executor_class(config, out, assembly=assembly).run()
    finally:
        ray.shutdown()
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    if killer.t_kill is None:
        raise SystemExit("the run ended before the kill: raise --steps")
    before = window(stamps.stamps, killer.t_kill - args.window_s, killer.t_kill)
    after = window(stamps.stamps, killer.t_kill, killer.t_kill + args.window_s)
    ready = None if killer.t_ready is None else killer.t_ready - killer.t_kill
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end")
    print(f"apex_cartpole, ray_apex, 2 workers, seed {args.seed}; ended by {summary['ended_by']} at "
          f"{summary['timesteps']} env steps, {summary['worker_restarts']} restart(s)")  # fmt: skip
    print()
    print(f"| window ({args.window_s:g} s) | longest gap between learner updates (s) | learner updates/s |")
    print("|---|---:|---:|")
    print(f"| before the kill (baseline) | {before[0]:.3f} | {before[1]:.0f} |")
    print(f"| after the kill | {after[0]:.3f} | {after[1]:.0f} |")
    print()
    print(f"replacement ready {ready:.1f} s after the kill" if ready is not None else "replacement not ready")


if __name__ == "__main__":
    main()
