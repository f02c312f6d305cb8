"""``rlgraph tune``: hyperparameter search on Ray Tune, each trial an ordinary rlgraph run.

The search space is a YAML mapping from config paths to distributions::

    agent.optimizer.learning_rate: {loguniform: [1.0e-4, 1.0e-2]}
    agent.batch_size: {choice: [32, 64, 128]}
    agent.gamma: {uniform: [0.95, 0.999]}
    agent.n_step: {randint: [1, 5]}        # low inclusive, high exclusive (as Tune's)

Each trial applies its sample as ``--set`` overrides to the config, validates it, and trains it
with :func:`rlgraph_core.assemble.train` into ``OUT/trials/<trial>/run`` (any backend and
executor), reporting every metrics row that has an evaluation to Tune (metric
``eval_return_mean``, time ``timesteps``), so ASHA stops poor trials at evaluation points. At
the end ``OUT`` holds ``trials.csv`` (one row per trial: its parameters, last and best
evaluation, env steps, run folder), ``best_config.yaml`` (the full config of the best trial, which
``rlgraph train`` accepts) and Tune's own experiment folder (``OUT/tune``, for ``--resume``).
"""

from __future__ import annotations

import contextlib
import csv
import json
import logging
import os
import sys
from pathlib import Path

import yaml

from rlgraph_core.checkpoint import latest_checkpoint
from rlgraph_core.config.run import apply_overrides, resolve_config, validate_config
from rlgraph_core.errors import RLGraphError
from rlgraph_core.execution.stopping import RunFailed
from rlgraph_core.plugins import hookimpl
from rlgraph_core.plugins.manager import PluginManager
from rlgraph_core.training import run_training

#: Distribution names of a search space and their Tune functions' arity.
DISTRIBUTIONS = ("loguniform", "uniform", "quniform", "randint", "choice", "grid")
METRIC = "eval_return_mean"


def load_space(path: str | Path) -> dict[str, tuple[str, list]]:
    """``{config path: (distribution, arguments)}`` from a YAML file (an RLGraphError names a bad entry)."""
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise RLGraphError(f"--space '{path}' could not be read: {exc}") from None
    if not isinstance(raw, dict) or not raw:
        raise RLGraphError(f"--space '{path}' must be a YAML mapping of config paths to distributions.")
    space = {}
    for key, spec in raw.items():
        if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in DISTRIBUTIONS:
            raise RLGraphError(
                f"--space '{path}': '{key}' must map to one distribution, e.g. {{loguniform: [1e-4, 1e-2]}}; "
                f"got {str(spec)[:60]!r}. Distributions: {', '.join(DISTRIBUTIONS)}."
            )
        ((kind, argv),) = spec.items()
        if not isinstance(argv, list) or not argv:
            raise RLGraphError(f"--space '{path}': '{key}': {kind} takes a list, e.g. [{'1e-4, 1e-2'}].")
        space[str(key)] = (kind, argv)
    return space


def _tune_space(space):
    from ray import tune  # deferred: Ray Tune (the optional tune extra: pandas, pyarrow) costs seconds to import

    fns = {
        "loguniform": tune.loguniform,
        "uniform": tune.uniform,
        "quniform": tune.quniform,
        "randint": tune.randint,
        "choice": lambda *v: tune.choice(list(v)),
        "grid": lambda *v: tune.grid_search(list(v)),
    }
    return {key: fns[kind](*argv) for key, (kind, argv) in space.items()}


def _overrides(params: dict) -> list[str]:
    return [f"{key}={json.dumps(value)}" for key, value in params.items()]


class _Reporter:
    """A plugin object relaying each metrics row with an evaluation to Tune, except the budget's last.

    A row at or past ``budget`` env steps is not reported: the trainable reports the run's final
    evaluation once :func:`~rlgraph_core.training.run_training` has returned, so that the last
    report Tune sees comes after the final checkpoint, summary and plot are written. Tune stops a
    trial inside a report (its scheduler's decision, e.g. ASHA at ``max_t``), and a trial stopped
    while its final phase runs would lose them.
    """

    def __init__(self, report, budget: int):
        self._report = report
        self._budget = budget

    @hookimpl
    def rlgraph_on_iteration(self, metrics):
        """Report ``eval_return_mean`` and ``timesteps`` whenever the row has an evaluation, before the budget."""
        if metrics.get(METRIC) is not None and int(metrics["timesteps"]) < self._budget:
            self._report({METRIC: float(metrics[METRIC]), "timesteps": int(metrics["timesteps"])})


def _short_name(trial) -> str:
    """``trial_<id>``: short trial and folder names (Tune's default repeats every parameter)."""
    return f"trial_{trial.trial_id}"


def _make_trainable(raw_config: dict, trials_dir: str):
    def trainable(params):
        from ray import tune  # deferred: Ray Tune (the optional tune extra: pandas, pyarrow) costs seconds to import

        pm = PluginManager()
        config = validate_config(apply_overrides(raw_config, _overrides(params)), pm)
        pm.register(_Reporter(tune.report, config.train.total_timesteps), "rlgraph-ray", name="tune-reporter")
        config.train.progress_bar = False
        if "console" in config.train.loggers:
            config.train.loggers = [n for n in config.train.loggers if n != "console"]
        out = Path(trials_dir) / tune.get_context().get_trial_name() / "run"
        # A trial the search was interrupted in continues from its newest checkpoint (rlgraph's own
        # resume: counters, replay, best evaluation), so a resumed search redoes no finished work;
        # a trial interrupted before its first checkpoint starts over in its folder.
        resume = latest_checkpoint(out) if out.is_dir() else None
        summary = run_training(config, out, resume=resume, overwrite=resume is None, plugin_manager=pm)
        # The run's final evaluation, reported after its final checkpoint, summary and plot are
        # written (see _Reporter): a scheduler that stops the trial here (ASHA at max_t) loses nothing.
        if summary.get("eval_return_mean") is not None:
            tune.report(
                {METRIC: float(summary["eval_return_mean"]), "timesteps": int(summary["timesteps"]), "done": True}
            )

    return trainable


def run_tune(args) -> int:
    """Run (or resume) a search; write ``trials.csv`` and ``best_config.yaml``; print the table."""
    space = load_space(args.space)
    if args.samples < 1:
        raise RLGraphError(f"--samples must be at least 1, got {args.samples}.")
    # the config resolution of rlgraph train; validates the config and --set before any trial runs
    base = resolve_config(args.config, args.set or [])
    raw = base.to_dict()

    for key, (kind, argv) in space.items():  # every path must exist: check with the first value
        probe = argv[0] if kind in ("choice", "grid") else argv[0]
        try:
            validate_config(apply_overrides(raw, _overrides({key: probe})))
        except RLGraphError as exc:
            raise RLGraphError(f"--space: '{key}' is not a valid config path or value: {exc}") from None

    from rlgraph_ray.cluster import ray_session  # deferred: imports ray (seconds); a bad --space fails before

    out = Path(args.out or f"runs/tune_{Path(str(args.config)).stem}").resolve()
    experiment = out / "tune"
    if args.resume and not _can_restore(experiment):  # before Ray starts
        raise RLGraphError(f"--resume: no search to continue in '{experiment}' (pass the --out of an earlier search).")
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    # The same Ray set-up as the Ray executors: a private local Ray without --address; with it,
    # the cluster there (a closed port fails at once, naming --address).
    with ray_session(
        args.address,
        connect_timeout_s=args.connect_timeout_s,
        setting="--address",
        timeout_setting="--connect-timeout-s",
    ):
        return _search(args, base, raw, space, out)


def _error_text(error: BaseException | None) -> str:
    """A failed trial's cause in one line: the run's own error (e.g. ``NonFiniteError: ...``) where
    the trial raised :class:`~rlgraph_core.execution.stopping.RunFailed`, else the error's type."""
    if error is None:
        return ""
    cause = error
    while cause is not None and not isinstance(cause, RunFailed):
        cause = getattr(cause, "cause", None)  # Ray wraps a task's exception (RayTaskError.cause)
    if cause is not None:
        return str(cause.summary.get("error") or cause)[:300]
    return type(error).__name__


def _finished(result) -> bool:
    """Whether a trial of the result grid ran to its end: it failed (``Result.error``), or Tune
    marked its last result ``done`` (its function returned, or a scheduler or stopper stopped it).

    The trial status cannot tell: after Ctrl-C, Tune's final cleanup sets every trial that was
    still running to TERMINATED, like a finished one (its saved experiment state keeps it RUNNING,
    which is what ``--resume`` continues); its last result is an intermediate report, not done."""
    return result.error is not None or bool((result.metrics or {}).get("done"))


def _can_restore(experiment: Path) -> bool:
    from ray import tune  # deferred: Ray Tune (the optional tune extra: pandas, pyarrow) costs seconds to import

    return experiment.is_dir() and tune.Tuner.can_restore(str(experiment))


class _NoRayResumeHint(logging.Filter):
    """Drops Tune's "Resume experiment with: Tuner.restore(...)" warning after Ctrl-C: a search is
    resumed with ``rlgraph tune ... --resume`` (printed by :func:`_write_results`), which also
    continues each interrupted trial from its own checkpoint; Ray's Python call would not."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Tuner.restore" not in record.getMessage()


@contextlib.contextmanager
def _without_ray_resume_hint():
    """Within the block, Tune's logger (``ray.tune.tune``) drops its ``Tuner.restore`` hint."""
    tune_logger, hint_filter = logging.getLogger("ray.tune.tune"), _NoRayResumeHint()
    tune_logger.addFilter(hint_filter)
    try:
        yield
    finally:
        tune_logger.removeFilter(hint_filter)


def _search(args, base, raw: dict, space: dict, out: Path) -> int:
    """Run or resume the search on the connected Ray; write the trial table and the best config."""
    from ray import tune  # deferred: Ray Tune (the optional tune extra: pandas, pyarrow) costs seconds to import

    trials_dir = str(out / "trials")
    trainable = tune.with_resources(_make_trainable(raw, trials_dir), {"cpu": args.cpus_per_trial})
    tc = base.train
    scheduler = None
    if args.scheduler == "asha":
        from ray.tune.schedulers import ASHAScheduler  # deferred: as ray.tune above

        # max_t is the budget: the trial's report at the budget is its last, made after its final
        # checkpoint, summary and plot are written (see _Reporter), so stopping it there loses
        # nothing; the grace period fits a budget below the evaluation interval.
        scheduler = ASHAScheduler(
            time_attr="timesteps",
            max_t=tc.total_timesteps,
            grace_period=min(tc.eval_interval, tc.total_timesteps),
            reduction_factor=2,
        )
    searcher = None
    if args.searcher == "optuna":
        try:
            from ray.tune.search.optuna import OptunaSearch  # deferred: Optuna is optional (--searcher optuna)
        except ImportError as exc:
            raise RLGraphError(f"--searcher optuna needs Optuna: pip install optuna ({exc}).") from None
        searcher = OptunaSearch()
    experiment = out / "tune"
    if args.resume:
        # Tune's own restore: finished trials keep their results, unfinished ones run again (and
        # continue from their run folder's checkpoint, see the trainable), errored ones too.
        tuner = tune.Tuner.restore(str(experiment), trainable, resume_unfinished=True, resume_errored=True)
    else:
        tuner = tune.Tuner(
            trainable,
            param_space=_tune_space(space),
            tune_config=tune.TuneConfig(
                metric=METRIC,
                mode="max",
                num_samples=args.samples,
                scheduler=scheduler,
                search_alg=searcher,
                max_concurrent_trials=args.max_concurrent,
                trial_name_creator=_short_name,
                trial_dirname_creator=_short_name,
            ),
            run_config=tune.RunConfig(name="tune", storage_path=str(out), verbose=0),
        )
    with _without_ray_resume_hint():
        grid = tuner.fit()
    return _write_results(args, grid, raw, out)


def _write_results(args, grid, raw: dict, out: Path) -> int:
    """``trials.csv`` from Tune's result grid; for a completed search ``best_config.yaml`` and the
    table (exit 0); for one interrupted by Ctrl-C the command that continues it (exit 130)."""
    trials_dir = str(out / "trials")
    rows = []
    for result in grid:
        params = {k: v for k, v in (result.config or {}).items()}
        df = result.metrics_dataframe
        best = float(df[METRIC].max()) if df is not None and METRIC in df else None
        rows.append(
            {
                "trial": Path(result.path).name,
                "run_dir": str(Path(trials_dir) / Path(result.path).name / "run"),
                **params,
                "last_eval_return": (result.metrics or {}).get(METRIC),
                "best_eval_return": best,
                "timesteps": (result.metrics or {}).get("timesteps"),
                "error": _error_text(result.error),
            }
        )
    keys = list(dict.fromkeys(k for row in rows for k in row))
    with open(out / "trials.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, keys)
        writer.writeheader()
        writer.writerows(rows)
    unfinished = sum(1 for result in grid if not _finished(result))
    if unfinished > 0:  # Ctrl-C: Tune stops the trials and returns, but the search is not complete
        print(
            f"rlgraph: the search was interrupted before {unfinished} of {len(grid)} trials finished; the trials "
            f"so far are in {out / 'trials.csv'} and each trial's run folder keeps its checkpoints. Continue it "
            f"(finished trials are kept, interrupted ones resume from their newest checkpoint) with: "
            f"rlgraph tune {args.config} --space {args.space} --out {out} --resume",
            file=sys.stderr,
        )
        return 130
    try:
        best = grid.get_best_result(metric=METRIC, mode="max", scope="all")
    except RuntimeError:
        best = None
    if best is None or best.config is None:
        raise RLGraphError(f"No trial reported an evaluation; see {out / 'tune'} for the trials' errors.")
    best_config = validate_config(apply_overrides(raw, _overrides(best.config)))
    (out / "best_config.yaml").write_text(yaml.safe_dump(best_config.to_dict(), sort_keys=False))
    for row in sorted(rows, key=lambda r: -(r["best_eval_return"] or float("-inf"))):
        print("  ".join(f"{k}={row[k]}" for k in keys if row.get(k) not in (None, "")))
    print(f"best: {dict(best.config)} -> {out / 'best_config.yaml'} (rlgraph train {out / 'best_config.yaml'})")
    return 0
