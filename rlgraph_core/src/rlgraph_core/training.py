"""The one training path under ``rlgraph train`` and the Python facade's ``learn``.

:func:`run_training` runs a validated config's executor and owns what makes a run's output folder
safe, whoever starts the run: the folder check (:func:`~rlgraph_core.execution.out_dir.check_out_dir`),
the lock and the refusal to mix two runs in one folder
(:func:`~rlgraph_core.execution.run_dir.claim_run_dir`), and, when a run continues in its own
folder, trimming the metrics rows logged after the checkpoint it resumes from. ``wall_time`` and
the best evaluation are carried across a resume by the run recorder (they live in every
checkpoint). :func:`end_line` is the last line a run prints: how far it got and why it stopped.

Without an output folder nothing is written or locked (the facade's default).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rlgraph_core.assemble import assemble
from rlgraph_core.checkpoint import read_meta
from rlgraph_core.errors import ConfigError
from rlgraph_core.execution.out_dir import check_out_dir
from rlgraph_core.execution.run_dir import (
    CLI_TERMS,
    claim_run_dir,
    folder_before,
    remove_unused_claim,
    resume_checkpoint,
    run_dir_of,
    trim_metrics,
)
from rlgraph_core.execution.stopping import EXIT_CODES, RunFailed
from rlgraph_core.plugins import get_plugin_manager

__all__ = ["default_out_dir", "end_line", "resolve_resume", "run_training", "start_line"]


def resolve_resume(path: str | Path) -> Path:
    """The checkpoint ``--resume PATH`` means: PATH itself, or the newest checkpoint of run folder PATH.

    A run folder holds its final ``checkpoint`` and periodic ``checkpoints/``; after a crash the
    periodic one may be newer, so the one with the most env steps is taken. What an interrupted
    save left is recovered as loading recovers it (see
    :func:`rlgraph_core.execution.run_dir.resume_checkpoint`).
    """

    return resume_checkpoint(path)


def default_out_dir(config) -> Path:
    """``runs/<agent>_<env>_<backend>_<mode>``: where ``rlgraph train`` writes without ``--out``.

    One folder under ``runs/`` whatever the env id: every character that is not a letter, digit,
    ``.``, ``_`` or ``-`` (the ``/`` of ``ALE/Pong-v5``, the ``:`` of ``my_env:Corridor``, which
    Windows refuses) becomes ``-``: ``runs/dqn_ALE-Pong-v5_torch_eager``.
    """
    name = f"{config.agent.type}_{config.env.id}_{config.train.backend}_{config.train.mode}"
    return Path("runs") / _SAFE_NAME.sub("-", name)[:200]


_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def start_line(config, out: Path | None, resume: Path | None = None, resumed_steps: Any = None) -> str:
    """The line a run prints when it starts (what runs, on what, where its output goes)."""
    what = f"resuming {resume} ({resumed_steps if resumed_steps is not None else '?'} steps)" if resume else "training"
    return (
        f"rlgraph: {what}: {config.agent.type} on {config.env.id} with backend {config.train.backend} "
        f"({config.train.mode}), executor {config.train.executor}; output in {out if out is not None else '(none)'}"
    )


def _why(summary: dict) -> str:
    """Why a run ended, in words."""
    ended = summary.get("ended_by")
    if ended == "total_timesteps":
        return "the budget of train.total_timesteps was used up"
    if ended == "target_return":
        ev = summary.get("eval_return_mean")
        return (
            f"the evaluation return {ev:.1f} reached train.target_return {summary.get('target_return')}"
            if isinstance(ev, (int, float))
            else "the evaluation return reached train.target_return"
        )
    if ended == "callback":
        return f"callback {summary.get('stopped_by', '?')} stopped it"
    if ended == "sigint":
        return "Ctrl-C"
    if ended == "sigterm":
        return "SIGTERM"
    if ended == "error":
        return f"an error: {summary.get('error', '?')}"
    return str(ended)


def _first_update(summary: dict) -> str:
    """``", first update 43.2 s (static mode compiles there)"`` where the summary has it."""
    seconds = summary.get("first_update_seconds")
    return "" if seconds is None else f", first update {seconds:.1f} s (static mode compiles there)"


def end_line(summary: dict) -> str:
    """The last line of a run: done or stopped, why, steps, speed, last evaluation, checkpoint."""

    ended = summary.get("ended_by", "total_timesteps")
    head = "done" if EXIT_CODES.get(ended, 0) == 0 else f"stopped ({ended})"
    ev = summary.get("eval_return_mean")
    env_rate = summary.get("env_steps_per_s")  # None: an offline run, whose steps are updates
    speed = "" if env_rate is None else f"{env_rate:.0f} env steps/s, "
    return (
        f"{head}: {summary['timesteps']} {'updates' if env_rate is None else 'steps'} in "
        f"{summary['wall_time']:.1f}s ({speed}"
        f"{summary['updates_per_s']:.0f} updates/s), last eval return {ev if ev is None else round(ev, 1)}, "
        f"build {summary['build_seconds'] * 1000:.0f} ms{_first_update(summary)}; checkpoint: {summary['checkpoint']}; "
        f"ended because {_why(summary)}"
    )


def run_training(
    config,
    out: str | Path | None = None,
    *,
    resume: str | Path | None = None,
    overwrite: bool = False,
    continuing: bool | None = None,
    assembly=None,
    plugin_manager=None,
    executor_kwargs: dict | None = None,
    announce=None,
    terms=None,
) -> dict:
    """Run ``config``'s executor into ``out`` (nothing written when None) and return the summary.

    Args:
        config: a validated run config.
        out: the output folder. It is checked, then locked for the run: a folder in use by a live
            run is refused (naming its pid), and one that holds another run is refused unless
            ``overwrite`` (its run files are removed) or the run continues it.
        resume: a checkpoint to load first (counters, replay, best evaluation and wall time carry on),
            or a run folder: its newest checkpoint (:func:`resolve_resume`), chosen again once the
            folder's lock is held, so that a run that held the folder until then is never rewound.
        overwrite: replace a previous run in ``out``.
        continuing: this run continues the run already in ``out`` (its files are kept and metric
            rows after the resumed step are trimmed). Default: ``resume`` lies in ``out``.
        assembly: the config's :class:`~rlgraph_core.assemble.Assembly` (default: assembled here).
        plugin_manager: used to assemble (default: the process's).
        executor_kwargs: extra keyword arguments of the executor (the facade passes its agent to
            executors that accept one).
        announce: called with :func:`start_line`'s text once the folder is claimed (the CLI prints it).
        terms: how refusals name the caller's options
            (:class:`~rlgraph_core.execution.run_dir.CallerTerms`; default: the CLI's flags).

    Raises:
        RunDirError: the folder is locked or holds another run.
        RunFailed: the environment, the agent or a plugin raised (after the final checkpoint).
    """

    terms = terms or CLI_TERMS
    asked = resume
    resume = None if resume is None else resolve_resume(resume)
    try:
        out = None if out is None else check_out_dir(out, terms.out)
    except ConfigError as exc:
        if resume is None:
            raise
        run = run_dir_of(resume) or resume
        raise ConfigError(
            f"{exc} The run folder cannot be written, so the resumed run cannot continue there: read the "
            f"checkpoint from it and write the new run to another folder: {terms.resume_elsewhere.format(run=run)}."
        ) from None
    if continuing is None:
        resumed_run = run_dir_of(resume) if resume is not None else None
        continuing = resumed_run is not None and out is not None and resumed_run.resolve() == out.resolve()
    if assembly is None:
        assembly = assemble(config, plugin_manager or get_plugin_manager())
    executor_class = assembly.executor_class

    def execute() -> dict:
        return executor_class(config, out, assembly=assembly, resume_dir=resume, **(executor_kwargs or {})).run()

    owns_out_dir = getattr(executor_class, "owns_out_dir", None)  # Executor subclasses have it
    if out is None or (owns_out_dir is not None and not owns_out_dir()):
        # No folder; or one of several processes a launcher started (e.g. a Horovod rank other
        # than 0): another process owns, writes and reports the run; this one only takes part.
        return execute()
    resumed_steps = None
    assembly.check_loggers_out_dir(out)  # a logger that cannot write there refuses before anything is made
    before = folder_before(out)
    with claim_run_dir(out, resume=continuing, overwrite=overwrite, terms=terms):
        try:
            if asked is not None:
                # Chosen again under the lock: the run that held the folder until now may have written
                # a newer checkpoint; resuming the one chosen before would rewind it.
                resume = resolve_resume(asked)
                resumed_steps = read_meta(resume)[0].get("counters", {}).get("timesteps", 0)
            if continuing and resumed_steps is not None:
                # Rows logged after the checkpoint would be logged again by the resumed run.
                trim_metrics(out / "metrics.jsonl", int(resumed_steps))
            if announce is not None:
                announce(start_line(config, out, resume, resumed_steps))
            return execute()
        except RunFailed:
            raise  # it trained: its final checkpoint and summary are in the folder
        except BaseException:
            # Refused (or interrupted) before training: leave no half-made run folder behind.
            remove_unused_claim(out, before)
            raise
