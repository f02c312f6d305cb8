"""The config zoo: train every shipped config for its budget and publish the table in docs/zoo.md.

As RL-Zoo publishes its benchmark, this script runs each config that ``rlgraph train NAME``
accepts (``rlgraph_core/src/rlgraph_core/configs/*.yaml``) for its own budget and stop rule
(``train.total_timesteps``, ``train.target_return``), one seed at a time, and writes the table
(final evaluation return, env steps, wall time, env steps/s and CPU-seconds) into
``docs/zoo.md``; a config measured with at least five seeds also gets the interquartile mean of
its final evaluation returns with a 95 % stratified-bootstrap confidence interval (rliable,
extra ``stats``: :mod:`rlgraph_core.stats`). The table is generated from the results file (``benchmarks/zoo_results.json``),
never typed: ``--table-only`` regenerates it.

Usage::

    python benchmarks/zoo.py                           # every config not measured yet, seed 0
    python benchmarks/zoo.py --configs dqn_acrobot,dqn_lunarlander --seeds 0,1,2
    python benchmarks/zoo.py --configs ppo_cartpole --seeds 0,1,2,3,4   # + IQM [95% CI] (extra stats)
    python benchmarks/zoo.py --table-only              # rewrite docs/zoo.md from the results file
    python benchmarks/zoo.py --list                    # the configs and what would happen to each

What runs:

* Each run is a child process, ``rlgraph train NAME --seed S --out RUNS/NAME/seed_S``, on the
  config's own executor setting; configs of a distributed executor (``ray_*``) are listed, not run,
  unless ``--distributed`` is given (the zoo measures the local executor; the distributed
  executors have ``bench_distributed.py``). CPU-seconds are the child's user + system time (the
  machine is shared, so wall time alone says little).
* Before a config is run, a short in-process probe (``--probe-steps`` env steps of training with
  learning from the first step, eager mode, no evaluation; the agent is built before the clock
  starts) measures its training speed here; a config whose budget would take longer than ``--max-hours`` of CPU time at that speed (Atari, MuJoCo) is listed
  with its budget and that estimate instead of being run (CPU time, not wall time: on a shared
  machine the wall time depends on the others' load). The estimate leaves out evaluation time.
* Results are kept per (config, seed) in the results file as soon as each run ends, so an
  interrupted zoo continues where it stopped; ``--rerun`` measures again.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rlgraph_core.errors import RLGraphError
from rlgraph_core.stats import MIN_SEEDS, Interval, format_interval, iqm_interval

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "zoo_results.json"
DOC = ROOT / "docs" / "zoo.md"
#: Executors the zoo runs by default (the others are distributed: see --distributed).
LOCAL_EXECUTORS = ("local",)


@dataclass(frozen=True)
class ZooConfig:
    """What the table needs to know of one shipped config."""

    name: str
    algo: str
    env_id: str
    executor: str
    budget: int
    target_return: float | None
    num_envs: int
    rollout: int | None  # env steps per on-policy rollout (n_steps x num_envs), None when off-policy


def discover(names: list[str] | None = None) -> list[ZooConfig]:
    """The shipped configs (all, or ``names``) with their algorithm, env, executor and budget."""
    from rlgraph_core.config.run import load_shipped_config, shipped_configs

    shipped = shipped_configs()
    unknown = sorted(set(names or []) - set(shipped))
    if unknown:
        raise SystemExit(f"zoo: no shipped config named {', '.join(unknown)}; shipped configs: {', '.join(shipped)}")
    found = []
    for name in names or shipped:
        raw = load_shipped_config(name)
        agent, env, train = raw.get("agent", {}), raw.get("env", {}), raw.get("train", {})
        num_envs = int(env.get("num_envs", 1))
        n_steps = agent.get("n_steps") if agent.get("type") in ("ppo", "a2c", "impala") else None
        found.append(
            ZooConfig(
                name=name,
                algo=str(agent.get("type", "?")),
                env_id=str(env.get("id", "?")),
                executor=str(train.get("executor", "local")),
                budget=int(train.get("total_timesteps", 100_000)),
                target_return=train.get("target_return"),
                num_envs=num_envs,
                rollout=None if n_steps is None else int(n_steps) * num_envs,
            )
        )
    return found


# ---------------------------------------------------------------------------------------------
# results file


def load_results(path: Path) -> dict:
    """The results file: ``{"runs": {"NAME/seed_S": row}, "estimates": {NAME: row}, "intervals":
    {NAME: {"seeds", "returns", "interval"}}}`` (intervals: see :func:`_fmt_iqm`)."""
    if path.exists():
        return json.loads(path.read_text())
    return {"runs": {}, "estimates": {}}


def save_results(results: dict, path: Path) -> None:
    """Write the results file atomically (a zoo may be interrupted at any time)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def machine() -> dict:
    """Where and when a row was measured (the table says it; numbers move with the load)."""
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpus": os.cpu_count(),
        "load_1min": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
    }


# ---------------------------------------------------------------------------------------------
# probe and runs


def probe_overrides(cfg: ZooConfig, raw: dict, steps: int) -> tuple[int, list[str]]:
    """The probe's env-step budget and ``--set`` overrides: learning from the first step, no
    evaluation inside the probe, a replay no larger than the probe needs."""
    if cfg.rollout is not None:
        steps = max(steps, 2 * cfg.rollout)
    sets = [f"train.total_timesteps={steps}", f"train.eval_interval={steps + 1}", f"train.log_interval={steps}"]
    # Eager: a static-mode config would spend the probe compiling (steady-state static is faster,
    # so the estimate errs long).
    sets.append("train.mode=eager")
    agent = raw.get("agent", {})
    if "learning_starts" in agent:
        sets.append("agent.learning_starts=0")
    memory = agent.get("memory")
    if isinstance(memory, dict) and "capacity" in memory:
        sets.append(f"agent.memory.capacity={min(int(memory['capacity']), 4 * steps)}")
    return steps, sets


def probe(cfg: ZooConfig, steps: int) -> dict:
    """Train ``cfg`` for a few env steps in this process (nothing written); its speed here.

    Where the executor takes a prebuilt agent, it is built before the clock starts, so the estimate
    is of training alone. A distributed executor builds its own (and starts Ray) inside the probe,
    and its workers' CPU time is not this process's: its CPU estimate errs short, its wall one long.
    """
    from rlgraph_core.assemble import assemble
    from rlgraph_core.config.run import apply_overrides, load_shipped_config, validate_config
    from rlgraph_core.plugins import get_plugin_manager
    from rlgraph_core.training import run_training

    raw = load_shipped_config(cfg.name)
    steps, sets = probe_overrides(cfg, raw, steps)
    config = validate_config(apply_overrides(raw, [*sets, "train.progress_bar=false", "train.loggers=[]"]))
    assembly = assemble(config, get_plugin_manager())
    kwargs = {}
    if getattr(assembly.executor_class, "accepts_agent", False):  # as the facade does; Ray's build their own
        obs_space, act_space = assembly.agent_spaces()
        kwargs["agent"] = assembly.make_agent(obs_space, act_space, num_envs=config.env.num_envs)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    summary = run_training(config, None, assembly=assembly, executor_kwargs=kwargs)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    steps_done = int(summary["timesteps"])
    return {
        "probe_steps": steps_done,
        "probe_wall_s": round(wall, 2),
        "probe_cpu_s": round(cpu, 2),
        "estimate_wall_s": round(cfg.budget * wall / max(steps_done, 1), 1),
        "estimate_cpu_s": round(cfg.budget * cpu / max(steps_done, 1), 1),
        **machine(),
    }


def run_one(cfg: ZooConfig, seed: int, runs_dir: Path, extra_sets: list[str]) -> dict:
    """``rlgraph train`` the config with ``seed`` in a child process; the row of the table."""
    out = runs_dir / cfg.name / f"seed_{seed}"
    cmd = [sys.executable, "-m", "rlgraph_core.cli", "train", cfg.name, "--seed", str(seed)]
    cmd += ["--out", str(out), "--overwrite", "--no-progress"]
    for item in extra_sets:
        cmd += ["--set", item]
    log = out.parent / f"seed_{seed}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with log.open("w") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    row = {"config": cfg.name, "seed": seed, "exit_code": proc.returncode, "log": str(log), **machine()}
    summary_file = out / "summary.json"
    if not summary_file.exists():
        return {**row, "error": f"no summary.json (exit code {proc.returncode}); see {log}"}
    summary = json.loads(summary_file.read_text())
    return {
        **row,
        "ended_by": summary.get("ended_by"),
        "env_steps": int(summary["timesteps"]),
        "updates": int(summary.get("updates", 0)),
        "final_eval_return": summary.get("eval_return_mean"),
        "best_eval_return": summary.get("best_eval_return"),
        "train_wall_s": round(float(summary["wall_time"]), 1),
        "process_wall_s": round(wall, 1),
        "env_steps_per_s": round(float(summary["env_steps_per_s"]), 1),
        "cpu_s": round(cpu, 1),
    }


# ---------------------------------------------------------------------------------------------
# the table


def _fmt_return(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def _fmt_num(values: list[float], digits: int = 0) -> str:
    if not values:
        return "-"
    mean = statistics.mean(values)
    return f"{mean:,.{digits}f}"


def _fmt_hours(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def _fmt_iqm(name: str, rows: list[dict], results: dict) -> str:
    """IQM [95% CI] of the seeds' final returns (rliable), or "-" below MIN_SEEDS seeds.

    The interval is kept in the results file (``intervals``, with the seeds and returns it is of)
    and computed again only when those change, so the table renders without rliable (the docs
    test does) and the same results always give the same table."""
    measured = [(r["seed"], r["final_eval_return"]) for r in rows if r.get("final_eval_return") is not None]
    if len(measured) < MIN_SEEDS:
        return "-"
    key = {"seeds": [s for s, _ in measured], "returns": [v for _, v in measured]}
    stored = results.get("intervals", {}).get(name)
    if stored is None or {k: stored.get(k) for k in key} != key:
        interval = iqm_interval({name: key["returns"]})[name]
        stored = {**key, "interval": dataclasses.asdict(interval)}
        results.setdefault("intervals", {})[name] = stored
    return format_interval(Interval(**stored["interval"]))


def render_table(configs: list[ZooConfig], results: dict, max_hours: float) -> str:
    """docs/zoo.md's text: measured rows, then configs listed with a budget and an estimate only."""
    runs = results.get("runs", {})
    estimates = results.get("estimates", {})
    lines = [
        "# Config zoo",
        "",
        "<!-- Generated by benchmarks/zoo.py from benchmarks/zoo_results.json: do not edit by hand;",
        "     run `python benchmarks/zoo.py` (or `--table-only`) to regenerate. -->",
        "",
        "Every config shipped with rlgraph-core (`rlgraph train NAME`), trained for its own budget",
        "(`train.total_timesteps`; a config with `train.target_return` stops once the mean evaluation",
        "return reaches it) by `benchmarks/zoo.py`, one child process per seed, on the machine named",
        "under each table. *Final eval* is the mean return of the last evaluation (mean ± std over",
        "seeds); *IQM [95% CI]* is, for a config run with at least five seeds, the interquartile mean",
        "of the seeds' final evaluation returns with its 95 % stratified-bootstrap confidence interval",
        '(rliable, as Agarwal et al. 2021 recommend; `pip install -e "./rlgraph_core[stats]"`);',
        "*CPU-s* is the run's user + system CPU time, the fairer cost on a shared machine;",
        "*wall* is the training loop's time (evaluations included, start-up excluded).",
        "",
        "## Measured",
        "",
        "| config | algo | env | seeds | budget | env steps | final eval | IQM [95% CI] | target | ended by "
        "| wall | env steps/s | CPU-s |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    measured_on: set[str] = set()
    listed = []
    for cfg in configs:
        rows = [r for key, r in sorted(runs.items()) if key.split("/")[0] == cfg.name and "error" not in r]
        if not rows:
            listed.append(cfg)
            continue
        for r in rows:
            measured_on.add(f"{r['date']}: {r['cpus']} CPUs, load {r['load_1min']} at the end")
        ended = sorted({str(r.get("ended_by")) for r in rows})
        returns = [r["final_eval_return"] for r in rows if r.get("final_eval_return") is not None]
        target = "-" if cfg.target_return is None else f"{cfg.target_return:g}"
        lines.append(
            f"| `{cfg.name}` | {cfg.algo} | {cfg.env_id} | {','.join(str(r['seed']) for r in rows)} "
            f"| {cfg.budget:,} | {_fmt_num([r['env_steps'] for r in rows])} | {_fmt_return(returns)} "
            f"| {_fmt_iqm(cfg.name, rows, results)} | {target} "
            f"| {', '.join(ended)} | {_fmt_hours(statistics.mean(r['train_wall_s'] for r in rows))} "
            f"| {_fmt_num([r['env_steps_per_s'] for r in rows])} | {_fmt_num([r['cpu_s'] for r in rows])} |"
        )
    lines += ["", "Measured on: " + ("; ".join(sorted(measured_on)) if measured_on else "nothing yet") + "."]
    lines += [
        "",
        "## Listed, not run",
        "",
        f"Configs whose budget would take longer than {max_hours:g} h of CPU time here (the estimate is the",
        "budget at the training speed of a short probe: learning from the first step, eager mode,",
        "evaluations left out; CPU time, as the wall time of a shared machine depends on the others'",
        "load), and configs of a distributed executor (measured by `benchmarks/bench_distributed.py`).",
        "",
        "| config | algo | env | executor | budget | estimate (wall) | estimate (CPU) | why not run |",
        "|---|---|---|---|---:|---:|---:|---|",
    ]
    for cfg in listed:
        est = estimates.get(cfg.name)
        if cfg.executor not in LOCAL_EXECUTORS:
            why = f"distributed executor `{cfg.executor}`"
        elif est is None:
            why = "not measured yet"
        elif est["estimate_cpu_s"] > max_hours * 3600:
            why = f"over {max_hours:g} CPU-h"
        else:
            why = "not measured yet"
        wall = "-" if est is None else _fmt_hours(est["estimate_wall_s"])
        cpu = "-" if est is None else f"{est['estimate_cpu_s'] / 3600:.1f} CPU-h"
        lines.append(
            f"| `{cfg.name}` | {cfg.algo} | {cfg.env_id} | {cfg.executor} | {cfg.budget:,} | {wall} | {cpu} | {why} |"
        )
    return "\n".join(lines) + "\n"


def write_table(
    configs: list[ZooConfig], results: dict, doc: Path, max_hours: float, results_path: Path | None = None
) -> None:
    """Write docs/zoo.md from the results (and the results file, which keeps the intervals, to ``results_path``)."""
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(render_table(configs, results, max_hours))
    if results_path is not None:
        save_results(results, results_path)


# ---------------------------------------------------------------------------------------------


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    """Run the zoo (or only rewrite the table)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configs", default="", help="comma-separated shipped config names (default: all)")
    p.add_argument("--seeds", type=_ints, default=[0], help="comma-separated seeds (default 0)")
    p.add_argument("--max-hours", type=float, default=1.0, help="list, do not run, configs estimated longer (CPU-h)")
    p.add_argument("--probe-steps", type=int, default=1000, help="env steps of the speed probe")
    p.add_argument("--distributed", action="store_true", help="also run configs of a distributed executor")
    p.add_argument("--rerun", action="store_true", help="measure again configs already in the results")
    p.add_argument("--table-only", action="store_true", help="only rewrite the doc from the results file")
    p.add_argument("--probe-only", action="store_true", help="only probe (estimates), run nothing")
    p.add_argument(
        "--merge",
        type=Path,
        default=None,
        help="add the runs and estimates of another results file (e.g. a parallel zoo's)",
    )
    p.add_argument("--list", action="store_true", help="print the configs and what would happen, run nothing")
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--doc", type=Path, default=DOC)
    p.add_argument("--runs-dir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "rlgraph-zoo")
    p.add_argument("--set", dest="sets", action="append", default=[], help="extra --set for every run")
    args = p.parse_args(argv)
    try:
        return _zoo(args)
    except RLGraphError as exc:  # e.g. five seeds measured and the stats extra missing: one paragraph
        print(f"zoo: {exc}", file=sys.stderr)
        return 2


def _zoo(args: argparse.Namespace) -> int:
    configs = discover([c for c in args.configs.split(",") if c] or None)
    everything = discover()
    results = load_results(args.results)
    if args.merge is not None:
        other = load_results(args.merge)
        for section in ("runs", "estimates"):
            for key, row in other.get(section, {}).items():
                results[section].setdefault(key, row)
        save_results(results, args.results)
    if args.table_only:
        write_table(everything, results, args.doc, args.max_hours, args.results)
        print(f"zoo: wrote {args.doc}")
        return 0
    for cfg in configs:
        runnable = cfg.executor in LOCAL_EXECUTORS or args.distributed
        done = [s for s in args.seeds if f"{cfg.name}/seed_{s}" in results["runs"]]
        if args.list:
            print(
                f"{cfg.name:28s} {cfg.algo:7s} {cfg.env_id:24s} {cfg.executor:10s} budget {cfg.budget:>10,} "
                f"{'run' if runnable else 'listed (distributed)'}; measured seeds {done}"
            )
            continue
        if not runnable:
            continue
        if cfg.name not in results["estimates"] or args.rerun:
            try:
                est = probe(cfg, args.probe_steps)
            except Exception as exc:  # a config that cannot run here (a missing extra): say so, go on
                print(f"zoo: probe {cfg.name} failed: {type(exc).__name__}: {exc}", flush=True)
                continue
            results["estimates"][cfg.name] = est
            save_results(results, args.results)
            print(
                f"zoo: probe {cfg.name}: {est['probe_steps']} steps in {est['probe_cpu_s']} CPU-s "
                f"({est['probe_wall_s']} s) -> budget {cfg.budget:,} in about {_fmt_hours(est['estimate_cpu_s'])} of CPU",
                flush=True,
            )
        if args.probe_only:
            continue
        if results["estimates"][cfg.name]["estimate_cpu_s"] > args.max_hours * 3600:
            print(f"zoo: {cfg.name}: listed, not run (over {args.max_hours:g} CPU-h)", flush=True)
            write_table(everything, results, args.doc, args.max_hours, args.results)
            continue
        for seed in args.seeds:
            key = f"{cfg.name}/seed_{seed}"
            if key in results["runs"] and not args.rerun:
                continue
            row = run_one(cfg, seed, args.runs_dir, args.sets)
            print(f"zoo: {key}: {json.dumps(row)}", flush=True)
            if "error" in row:
                continue
            results["runs"][key] = row
            save_results(results, args.results)
            write_table(everything, results, args.doc, args.max_hours, args.results)
    if not args.list:
        write_table(everything, results, args.doc, args.max_hours, args.results)
        print(f"zoo: wrote {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
