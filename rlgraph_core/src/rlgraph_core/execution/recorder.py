"""What every executor writes, in one reusable piece: metrics, evaluations, checkpoints, summary.

An executor owns *how* experience is gathered (one process, Ray actors ...); the
:class:`RunRecorder` owns what a run leaves behind, so every executor behaves the same towards
the user:

* metric rows every ``train.log_interval`` env steps to the configured loggers and the
  ``rlgraph_on_iteration`` hook (``timesteps``, ``wall_time``, ``episode_return_mean``,
  ``env_steps_per_s``, ``updates_per_s``, the agent's metrics, plus what the executor adds);
* greedy evaluation on a separate env with fixed seeds every ``train.eval_interval`` env steps
  and once more when the run ends by its budget or a callback (unless the last one was at that
  very step; ``train.eval_episodes: 0`` switches evaluation off), a new best saved to
  ``checkpoint_best``, and ``train.target_return`` as a stop condition; the eval env is the
  assembly's, without the training-only wrappers, so these are the task's own returns;
* periodic checkpoints every ``train.checkpoint_interval`` env steps (default: every evaluation),
  the newest ``train.keep_checkpoints`` kept, with the executor's attachments if it sets
  :attr:`RunRecorder.checkpoint_attachments` (e.g. ``ray_apex``'s replay shards);
* if an executor sets :attr:`RunRecorder.snapshot_path` (a path outside the run folder, e.g. on
  a RAM disk), a complete checkpoint of the agent there, refreshed at most once a second, for a
  watchdog to move into the run folder should the process be ended without running any code;
* every ``train.video_interval`` env steps, one greedy episode streamed to
  ``videos/step_<env steps>.mp4`` (:class:`~rlgraph_core.integrations.video.TrainingVideos`),
  by the process that owns the output folder only;
* however the run ends (budget, target, Ctrl-C/SIGTERM through
  :class:`~rlgraph_core.execution.stopping.StopRequest`, or an exception): the final checkpoint,
  ``summary.json`` (``ended_by``, exit code, traceback of an error), the learning-curve plot and
  the ``rlgraph_on_train_end`` hook; an error is then re-raised as
  :class:`~rlgraph_core.execution.stopping.RunFailed`.

Without an output folder (``out_dir=None``, the Python facade's default) nothing is written:
loggers that write files are skipped, and no checkpoint, summary or plot is saved; evaluations,
hooks, callbacks and the summary dict are as usual.

Callbacks (:mod:`rlgraph_core.callbacks`) are called at each of these points and may stop the
run (``ended_by: callback``); ``wall_time`` is carried across a resume, and a resumed run whose
checkpoint ended by reaching ``train.target_return`` trains on to its (raised) budget.

The recorder follows one agent, the one whose weights the run produces (the local agent, or a
distributed executor's learner), and owns the run's env-step counter
(:class:`~rlgraph_core.execution.counters.StepCounter`): an executor counts the env steps of all
its workers with :meth:`RunRecorder.add_env_steps` (which keeps ``agent.timesteps``, read by the
agent's schedules and checkpoints, at that total) and hands finished episodes over with
:meth:`RunRecorder.add_episodes`; it never writes ``agent.timesteps`` itself. Experience is
gathered by :class:`~rlgraph_core.execution.env_runner.EnvRunner`, the one env loop.

The recorder decides *when* each of these happens; what it hands over lives beside it: the state a
checkpoint carries (:mod:`~rlgraph_core.execution.run_state`), the loggers as one
(:mod:`~rlgraph_core.execution.run_loggers`) and the end-of-run files
(:mod:`~rlgraph_core.execution.summary`).
"""

from __future__ import annotations

import math
import time
import traceback
import warnings
from collections import deque
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from rlgraph_core.evaluation import agent_policy
from rlgraph_core.checkpoint import Attachments, latest_checkpoint, save_checkpoint, save_periodic
from rlgraph_core.errors import DiskFullError, NonFiniteError
from rlgraph_core.callbacks import callback_name
from rlgraph_core.execution.counters import StepCounter
from rlgraph_core.execution.first_update import FirstUpdateClock
from rlgraph_core.execution.run_loggers import RunLoggers
from rlgraph_core.execution.run_state import RunState
from rlgraph_core.execution.summary import write_summary
from rlgraph_core.execution.stopping import EXIT_CODES, RunFailed, StopRequest


#: The keys every evaluation has; the row takes mean and std of the return, and any other key.
_EVAL_BASICS = frozenset({"eval_return_mean", "eval_return_std", "eval_length_mean", "eval_episodes"})


def _next_multiple(steps: int, interval: int) -> int:
    """The first multiple of ``interval`` after ``steps`` (``steps`` itself for an interval of 0)."""
    return steps if interval <= 0 else (steps // interval + 1) * interval


class RunRecorder:
    """Records one run of ``agent``: the loggers, hooks, evaluations, checkpoints and summary.

    Typical use by an executor::

        recorder = RunRecorder(config, out_dir, assembly=assembly, agent=learner, resume_dir=resume_dir)
        return recorder.run(loop)  # loop(recorder, stop) trains until recorder.done(stop)

    where the loop, after each batch of env steps, calls :meth:`add_env_steps` (before the
    learner learns from them: its schedules read the count), :meth:`add_episodes` for finished
    episodes, and :meth:`step`.

    Args:
        config: the validated run config.
        out_dir: the run's output folder.
        assembly: the run's :class:`~rlgraph_core.assemble.Assembly` (loggers, hooks, eval env).
        agent: the agent whose weights the run produces (evaluated and checkpointed).
        resume_dir: a checkpoint to load into ``agent`` first (counters, replay and the best
            evaluation carry on), or None.
        eval_env: the evaluation env (default: ``assembly.make_eval_env()``); closed at the end.
        state: the run state to carry on (the facade's repeated ``learn``); default: a new one, or
            the resumed checkpoint's.
        callbacks: callback objects of this run, after those of ``assembly.callbacks``.
    """

    def __init__(
        self,
        config,
        out_dir: str | Path,
        *,
        assembly,
        agent,
        resume_dir: str | Path | None = None,
        eval_env=None,
        state: RunState | None = None,
        callbacks: Iterable[Any] = (),
    ):
        self.config = config
        self.out_dir = None if out_dir is None else Path(out_dir)
        self.assembly = assembly
        self.agent = agent
        self.resume_dir = None if resume_dir is None else Path(resume_dir)
        if self.out_dir is not None:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        self.eval_env = eval_env if eval_env is not None else assembly.make_eval_env()
        self.state = state if state is not None else RunState()
        if self.resume_dir is not None:
            self.state = RunState.from_meta(agent.load(self.resume_dir))
        self.state.ended_by = self.state.stopped_by = self.state.error = self.state.traceback = None
        self.state.cause = None
        self.state.target_reached = False
        #: the run's env-step counter (all workers together); the agent's ``timesteps`` follows it
        self.counter = StepCounter(agent)
        #: training episodes finished in this session
        self.episodes = 0
        #: the run's callbacks: the config's (``assembly.callbacks``), then the caller's
        self.callbacks: list = [*getattr(assembly, "callbacks", ()), *callbacks]
        #: the latest metrics row logged (None before the first)
        self.last_row: dict | None = None
        self._callback_updates = agent.updates
        #: extra fields of ``summary.json``: a dict, or a function returning one, called when the
        #: run ends (a distributed executor reports its totals, e.g. worker restarts, this way).
        self.summary_extra: dict[str, Any] | Callable[[], dict[str, Any]] = {}
        #: True where the step counter counts gradient updates, not env steps (the offline
        #: executor): rows and the summary then report ``env_steps_per_s`` as None
        self.steps_are_updates = False
        #: arrays stored beside the agent's in every periodic and the final checkpoint: a function
        #: returning ``{name: (arrays, info)}`` (a distributed executor's replay shards), or None.
        #: If it raises, the checkpoint is written without them (with a warning).
        self.checkpoint_attachments: Callable[[], Attachments] | None = None
        #: a checkpoint path outside the run folder that :meth:`step` keeps refreshed (without the
        #: attachments), at most once per :attr:`snapshot_interval_s` and only after the agent
        #: changed; for an executor whose driver can be ended without running any code (a cluster
        #: runtime's ``_exit``), so that a watchdog can move it into the run folder. None: off.
        self.snapshot_path: Path | None = None
        #: the least wall time between two snapshots (seconds)
        self.snapshot_interval_s = 1.0
        self._snapshot_key: tuple[int, int] | None = None
        self._snapshot_at = -math.inf
        #: the latest training episodes' returns and lengths (the run state's: carried across resumes)
        self.recent_returns: deque[float] = self.state.recent_returns
        self.recent_lengths: deque[int] = self.state.recent_lengths
        #: the run's loggers (started by :meth:`run`)
        self.loggers: RunLoggers | None = None
        self._bar = None
        #: static mode's first update (it compiles): on the bar while pending, then timed (set by run())
        self.first_update = FirstUpdateClock(False, 0)
        tc = config.train
        self._interval = tc.checkpoint_interval or tc.eval_interval
        # On the grid of multiples of each interval, as an uninterrupted run's: a run resumed at a
        # step between two evaluations evaluates (logs, checkpoints) where it would have.
        self._next_log = _next_multiple(self.timesteps, tc.log_interval)
        self._next_eval = _next_multiple(self.timesteps, tc.eval_interval)
        self._next_checkpoint = _next_multiple(self.timesteps, self._interval)
        self._next_video = _next_multiple(self.timesteps, tc.video_interval or 0)
        #: the env-step count of this session's latest evaluation (None before the first)
        self._evaluated_at: int | None = None
        #: The executor's ``extra_metrics`` of the last logged row, so the final evaluation's row carries them too.
        self._extra_metrics: Callable[[], dict] | None = None
        #: periodic training videos (``train.video_interval``), made when the run starts
        self.videos = None
        #: the stop request of the running loop (None outside :meth:`run`)
        self._stop: StopRequest | None = None
        self._start = (self.timesteps, agent.updates, time.perf_counter())
        self._last = self._start
        self._checked_updates = agent.updates

    # ------------------------------------------------------------------ what callbacks read
    @property
    def timesteps(self) -> int:
        """Env steps taken so far (all workers, earlier sessions of a resumed run included)."""
        return self.counter.timesteps

    @property
    def updates(self) -> int:
        """Gradient updates made so far."""
        return self.agent.updates

    @property
    def last_eval_return(self) -> float | None:
        """The mean return of the latest evaluation (None before the first)."""
        return self.state.last_eval_return

    @property
    def best_eval_return(self) -> float | None:
        """The best mean evaluation return so far (carried across resumes)."""
        return self.state.best_eval_return

    def wall_time(self) -> float:
        """Seconds of training so far, earlier sessions of a resumed run included."""
        return self.state.wall_time + (time.perf_counter() - self._start[2])

    def save_checkpoint(self, path: str | Path) -> Path:
        """Write a checkpoint of the agent (with the config and run state) to ``path``; return it.

        Callbacks' ``on_checkpoint`` are called, as for the run's own periodic checkpoints.
        """
        path = Path(path)
        self.agent.save(path, self.checkpoint_extra())
        self._notify("on_checkpoint", path)
        return path

    def _notify(self, method: str, *args) -> None:
        """Call ``method`` on every callback; one returning False requests the run to stop."""
        for cb in self.callbacks:
            fn = getattr(cb, method, None)
            if fn is not None and fn(self, *args) is False and self.state.stopped_by is None:
                self.state.stopped_by = callback_name(cb)

    # ------------------------------------------------------------------ the run
    def run(self, loop: Callable[["RunRecorder", StopRequest], None], run_info: dict | None = None) -> dict:
        """Start the loggers and hooks, run ``loop(self, stop)`` under a stop request, and finish.

        Whatever ends the loop (its own return, a signal, an exception) the final checkpoint,
        ``summary.json``, the plot and the train-end hook are written; the summary is returned,
        or raised inside :class:`RunFailed` when the loop raised.
        """
        cfg, tc = self.config, self.config.train
        try:
            loggers = self.loggers = RunLoggers(self.assembly, self.out_dir, tc.histogram_interval)
        except BaseException:
            self.eval_env.close()
            raise
        info = {
            "config": cfg.to_dict(),
            "out_dir": None if self.out_dir is None else str(self.out_dir),
            "build_seconds": self.agent.build_report.build_seconds,
            "resumed_from": None if self.resume_dir is None else str(self.resume_dir),
            **(run_info or {}),
        }
        try:  # a callback that cannot run (e.g. nowhere to write) is a mistake: nothing has run yet
            self._notify("on_training_start")
            if tc.video_interval and self.out_dir is not None:
                self.videos = self.assembly.make_training_videos(self.out_dir)
        except BaseException:
            self.eval_env.close()
            loggers.close_quietly()
            raise
        self.assembly.hook.rlgraph_on_train_start(run_info=info)
        self.counter.sync_from_agent()
        self.first_update = FirstUpdateClock(tc.mode == "static", self.agent.updates)
        self._start = self._last = (self.timesteps, self.agent.updates, time.perf_counter())
        self._callback_updates = self._checked_updates = self.agent.updates
        with StopRequest() as stop:
            self._stop = stop
            try:
                if tc.progress_bar:
                    from tqdm import tqdm

                    self._bar = tqdm(total=tc.total_timesteps, initial=self.timesteps, unit="step", dynamic_ncols=True)
                    self.first_update.show_pending(self._bar)
                try:
                    loop(self, stop)
                    self.state.ended_by = stop.reason or (
                        "target_return"
                        if self.state.target_reached
                        else "callback"
                        if self.state.stopped_by is not None
                        else "total_timesteps"
                    )
                    if stop.reason is None:
                        self.final_evaluation()
                except Exception as exc:  # the env, the agent, a worker or a plugin raised: keep the work done
                    self.fail(exc)
                finally:
                    if self._bar is not None:
                        self._bar.close()
                        self._bar = None
            finally:
                self._stop = None
                stop.hold()  # the final phase: further signals are ignored until everything is written
                self.eval_env.close()
                if self.videos is not None:
                    self.videos.close()
                loggers.close()
            try:
                summary = self.finish()
            finally:
                self.counter.release()  # the agent counts what it observes after the run again
            self._notify_end(summary)
        if self.state.ended_by == "error":
            raise RunFailed(summary) from self.state.cause
        return summary

    def _notify_end(self, summary: dict) -> None:
        """``on_training_end`` of every callback (a callback's error is warned about, never raised:
        the run's work is already saved and its summary is what the caller gets)."""
        for cb in self.callbacks:
            fn = getattr(cb, "on_training_end", None)
            if fn is None:
                continue
            try:
                fn(self, summary)
            except Exception as exc:
                warnings.warn(
                    f"rlgraph: callback {callback_name(cb)}.on_training_end raised {type(exc).__name__}: {exc}",
                    RuntimeWarning,
                    stacklevel=2,
                )

    def fail(self, exc: BaseException) -> None:
        """Record that the run ends because ``exc`` was raised (call from inside ``except``)."""
        self.state.ended_by = "error"
        self.state.error = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, NonFiniteError) and exc.what is not None:
            # A train step refused a non-finite update (the weights are the last finite ones): say when.
            self.state.error += f" (after update {self.agent.updates}, env step {self.timesteps})"
        self.state.traceback = traceback.format_exc()
        self.state.cause = exc

    def done(self, stop: StopRequest | None = None) -> bool:
        """Whether the run should end: budget used up, target reached, or a stop requested."""
        return (
            self.timesteps >= self.config.train.total_timesteps
            or self.state.target_reached
            or self.state.stopped_by is not None
            or (stop is not None and stop.reason is not None)
        )

    # ------------------------------------------------------------------ during the run
    def add_env_steps(self, n: int) -> int:
        """Count ``n`` more env steps (of all workers together) into the run; the new total.

        The agent's ``timesteps`` follows (its schedules read it): call this before the learner
        learns from those steps.
        """
        if self._bar is not None and n:
            self._bar.update(int(n))
        self.first_update.before_update()
        return self.counter.add_env_steps(n)

    def add_episodes(self, returns: Iterable[float], lengths: Iterable[int] | None = None) -> None:
        """Training episodes that just ended: their returns and (where known) lengths, for
        ``episode_return_mean`` and ``episode_length_mean``. Takes an
        :class:`~rlgraph_core.execution.env_runner.Episodes` too (``add_episodes(runner.take_episodes())``)."""
        if lengths is None and hasattr(returns, "lengths"):
            returns, lengths = returns.returns, returns.lengths  # type: ignore[attr-defined]
        returns = [float(r) for r in returns]
        self.episodes += len(returns)
        self.recent_returns.extend(returns)
        if lengths is not None:
            self.recent_lengths.extend(int(n) for n in lengths)

    def add_episode_returns(self, returns: Iterable[float]) -> None:
        """Returns of training episodes that just ended (see :meth:`add_episodes`)."""
        self.add_episodes(returns)

    def step(self, new_steps: int = 0, extra_metrics: Callable[[], dict] | None = None) -> dict | None:
        """Evaluate, checkpoint and log where due, after ``new_steps`` more env steps.

        ``new_steps`` are steps not yet counted with :meth:`add_env_steps` (they are counted now;
        0 when the executor counted them already, before learning). ``extra_metrics`` is called
        only when a row is logged and its dict is added to the row. Returns the row logged, or None.
        """
        agent, tc = self.agent, self.config.train
        self.first_update.after_step(agent.updates, self._bar)  # before counting: that restarts its clock
        if new_steps:
            self.add_env_steps(new_steps)
        now_steps = self.timesteps
        if agent.updates != self._checked_updates:
            self._checked_updates = agent.updates
            self.check_loss()
        if self.callbacks:
            self._notify("on_step")
            if agent.updates != self._callback_updates:
                self._callback_updates = agent.updates
                self._notify("on_update")
        evaluation = None
        if tc.eval_episodes and now_steps >= self._next_eval:
            while self._next_eval <= now_steps:
                self._next_eval += tc.eval_interval
            evaluation = self.evaluate()
        if now_steps >= self._next_checkpoint:
            while self._next_checkpoint <= now_steps:
                self._next_checkpoint += self._interval
            if self.out_dir is not None:
                path = save_periodic(
                    agent,
                    self.out_dir,
                    now_steps,
                    self.checkpoint_extra(),
                    keep=tc.keep_checkpoints,
                    attachments=self._attachments(),
                )
                self._notify("on_checkpoint", Path(path))
        self.refresh_snapshot()
        if self.videos is not None and now_steps >= self._next_video:
            while self._next_video <= now_steps:
                self._next_video += tc.video_interval
            self.videos.record(agent_policy(agent), now_steps)
        log_now = now_steps >= self._next_log
        while self._next_log <= now_steps:
            self._next_log += tc.log_interval
        if not (log_now or evaluation is not None):
            return None
        self._extra_metrics = extra_metrics
        return self.log_row(evaluation, extra_metrics() if extra_metrics is not None else None)

    def refresh_snapshot(self) -> None:
        """Rewrite :attr:`snapshot_path` (atomically, with :func:`save_checkpoint`) if it is due.

        :meth:`step` calls it; an executor whose learner also learns between env-step batches (a
        throttled ``ray_apex`` learner catching up) calls it after such learning too. A no-op
        without a snapshot path, within :attr:`snapshot_interval_s` of the last refresh, or when
        neither the env steps nor the updates moved since.

        Measured for ``configs/apex_cartpole.yaml`` (torch, CPU) on ``/dev/shm``: 1.1 MB (weights,
        target network, Adam slots, counters; the learner holds no replay), 7 ms a refresh (median;
        p90 8 ms) on a 2-core machine at load 4.4, where one learner update took 3.4 ms and one
        round of 128 updates ~440 ms. At most one refresh a second is thus at most ~0.7 % of the
        learner's time. A failed write (the RAM disk full) warns once and turns the snapshot off;
        the run goes on.
        """
        if self.snapshot_path is None:
            return
        key = (self.timesteps, self.agent.updates)
        now = time.monotonic()
        if key == self._snapshot_key or now - self._snapshot_at < self.snapshot_interval_s:
            return
        self._snapshot_key, self._snapshot_at = key, now
        try:
            save_checkpoint(self.agent, self.snapshot_path, self.checkpoint_extra())
        except (OSError, DiskFullError) as exc:
            warnings.warn(
                f"rlgraph: the in-memory snapshot '{self.snapshot_path}' could not be written ({type(exc).__name__}: "
                f"{exc}); it is turned off for this run, so a run ended without running any code loses the work "
                f"since its last periodic checkpoint (train.checkpoint_interval).",
                RuntimeWarning,
                stacklevel=2,
            )
            self.snapshot_path = None

    def check_loss(self) -> None:
        """Raise :class:`~rlgraph_core.errors.NonFiniteError` if the agent's last loss is NaN or infinite.

        Called after every batch of env steps in which the agent updated. The backends' train
        steps already refuse a non-finite loss or gradient before the update is applied (raising
        NonFiniteError from the update itself); this is the second line of defence, for a loss
        that reaches the metrics some other way. A NaN spreads into every weight with the next
        update, so the run stops here; checkpoints are never written with non-finite weights (the
        newest finite one stays the newest).
        """
        loss = self.agent.last_loss()
        if loss is None or math.isfinite(loss):
            return
        raise NonFiniteError(
            f"The loss became {float(loss)} at update {self.agent.updates} (env step {self.agent.timesteps}); "
            f"the run stops here and no checkpoint is written from non-finite weights (the newest finite one "
            f"stays the newest). Common causes: a learning rate that is "
            f"too high, huge rewards or observations (normalise them), or no gradient clipping (set "
            f"optimizer.max_grad_norm)."
        )

    def final_evaluation(self) -> dict | None:
        """The evaluation a run ends with (budget used up, or stopped by a callback), logged as a
        row unless a row was logged at this step already (the summary carries it then); None when evaluation is off (``train.eval_episodes: 0``) or the latest one was at
        this very step. A signal or an error ends a run without it."""
        if not self.config.train.eval_episodes or self._evaluated_at == self.timesteps:
            return None
        evaluation = self.evaluate()
        if evaluation is None or self._last[0] == self.timesteps:
            # A row was logged at this very step: a second one would repeat its step with zero rates;
            # the summary and the closing line carry this evaluation (state.last_eval_return).
            return None
        return self.log_row(evaluation, self._extra_metrics() if self._extra_metrics is not None else None)

    def evaluate(self) -> dict | None:
        """Evaluate the greedy policy now (``train.eval_episodes`` on the eval env, fixed seeds);
        save a new best to ``checkpoint_best``; return the metrics for the row. A stop request
        (Ctrl-C, SIGTERM) ends the evaluation at the next env step and it counts for nothing
        (None): stopping never waits for an episode to end."""
        tc, state = self.config.train, self.state
        self._evaluated_at = self.timesteps
        stop = self._stop
        ev = self.agent.evaluate(
            self.eval_env, tc.eval_episodes, seed=10_000 + tc.seed, stop=None if stop is None else stop.requested
        )
        if ev is None:
            return None
        state.last_eval_return = ev["eval_return_mean"]
        if state.best_eval_return is None or state.last_eval_return > state.best_eval_return:
            state.best_eval_return = state.last_eval_return
            if self.out_dir is not None:
                self.agent.save(self.out_dir / "checkpoint_best", self.checkpoint_extra(eval=ev))
        state.target_reached = (
            tc.target_return is not None and not state.target_passed and state.last_eval_return >= tc.target_return
        )
        result = {"eval_return_mean": state.last_eval_return, "eval_return_std": ev["eval_return_std"]}
        # what an evaluation reports beyond the return (multi-agent: per policy, win/draw/loss rates)
        result.update({k: v for k, v in ev.items() if k not in _EVAL_BASICS})
        self._notify("on_evaluation", dict(result))
        return result

    def log_row(self, evaluation: dict | None = None, extra: dict | None = None) -> dict:
        """Log one metrics row to every logger and the ``rlgraph_on_iteration`` hook; return it."""
        agent = self.agent
        now = time.perf_counter()
        last_steps, last_updates, last_t = self._last
        row = {
            "timesteps": self.timesteps,
            "wall_time": self.state.wall_time + now - self._start[2],
            "episode_return_mean": float(np.mean(self.recent_returns)) if self.recent_returns else None,
            "episode_length_mean": float(np.mean(self.recent_lengths)) if self.recent_lengths else None,
            "eval_return_mean": None,
            "env_steps_per_s": None
            if self.steps_are_updates
            else (self.timesteps - last_steps) / max(now - last_t, 1e-9),
            "updates_per_s": (agent.updates - last_updates) / max(now - last_t, 1e-9),
        }
        row.update(agent.metrics())
        row.update(self.first_update.row_metrics())
        row.update(extra or {})
        row.update(evaluation or {})
        self._last = (self.timesteps, agent.updates, now)
        self.last_row = row
        if self.loggers is not None:
            self.loggers.log(row, agent.get_weights, self.timesteps)
        self.assembly.hook.rlgraph_on_iteration(metrics=row)
        return row

    def _attachments(self) -> Attachments | None:
        """What :attr:`checkpoint_attachments` returns now (None when it is unset or raised)."""
        if self.checkpoint_attachments is None:
            return None
        try:
            return self.checkpoint_attachments()
        except Exception as exc:  # e.g. a replay shard died: the agent's checkpoint still gets written
            warnings.warn(
                f"rlgraph: checkpoint written without its attachments ({type(exc).__name__}: {exc})",
                RuntimeWarning,
                stacklevel=2,
            )
            return None

    def checkpoint_extra(self, wall_time: float | None = None, **more) -> dict:
        """The ``extra`` of every checkpoint: the config and the run state (best evaluation), with
        ``wall_time`` (default: :meth:`wall_time` now) as the run's seconds so far."""
        wall_time = self.wall_time() if wall_time is None else wall_time
        return {"config": self.config.to_dict(), "run_state": self.state.to_json(wall_time), **more}

    # ------------------------------------------------------------------ the end
    def finish(self) -> dict:
        """Final checkpoint, summary.json, plot and the train-end hook, however the run ended."""
        cfg, tc, agent, state = self.config, self.config.train, self.agent, self.state
        checkpoint_dir = None if self.out_dir is None else self.out_dir / "checkpoint"
        start_steps, start_updates, t0 = self._start
        # One clock reading for the session's end: the final checkpoint and summary.json agree on it.
        elapsed = time.perf_counter() - t0
        extra = self.checkpoint_extra(
            state.wall_time + elapsed, eval_return_mean=state.last_eval_return, ended_by=state.ended_by
        )
        saved: Path | None = checkpoint_dir
        refused = None
        if checkpoint_dir is not None:
            attachments = self._attachments()
            try:
                if attachments:
                    save_checkpoint(agent, checkpoint_dir, extra, attachments)
                else:
                    agent.save(checkpoint_dir, extra)
            except (NonFiniteError, DiskFullError) as exc:
                # Poisoned weights, or no room: the newest complete checkpoint stays the newest one.
                if state.ended_by != "error":
                    state.ended_by, state.error = "error", f"{type(exc).__name__}: {exc}"
                    state.traceback = None
                saved = latest_checkpoint(self.out_dir)
                refused = str(exc)
        summary = {
            "ended_by": state.ended_by,
            "exit_code": EXIT_CODES.get(state.ended_by or "", 1),
            "timesteps": self.timesteps,
            "updates": agent.updates,
            "episodes": self.episodes,
            "wall_time": state.wall_time + elapsed,
            "session_wall_time": elapsed,
            "env_steps_per_s": None if self.steps_are_updates else (self.timesteps - start_steps) / max(elapsed, 1e-9),
            "updates_per_s": (agent.updates - start_updates) / max(elapsed, 1e-9),
            "eval_return_mean": state.last_eval_return,
            "best_eval_return": state.best_eval_return,
            "target_reached": state.target_reached,
            "checkpoint": None if saved is None else str(saved),
            "target_return": tc.target_return,
            "build_seconds": agent.build_report.build_seconds,
            **(self.summary_extra() if callable(self.summary_extra) else self.summary_extra),
        }
        if self.first_update.seconds is not None:
            summary["first_update_seconds"] = self.first_update.seconds
        if refused is not None:
            summary["checkpoint_refused"] = refused
        if state.stopped_by is not None:
            summary["stopped_by"] = state.stopped_by
        if state.error is not None:
            summary["error"] = state.error
            summary["traceback"] = state.traceback
        state.wall_time += elapsed
        self._start = (self.timesteps, agent.updates, time.perf_counter())  # wall_time() counts on from here
        if self.out_dir is not None:
            write_summary(self.out_dir, summary, cfg)
        self.assembly.hook.rlgraph_on_train_end(summary=summary)
        return summary
