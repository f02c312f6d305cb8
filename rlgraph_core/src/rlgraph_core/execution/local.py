"""The local executor: one process, gymnasium vector envs, periodic evaluation, checkpoints."""

from __future__ import annotations

import json
import time
import traceback
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from rlgraph_core.checkpoint import save_periodic
from rlgraph_core.execution.base import Executor
from rlgraph_core.execution.plotting import plot_learning_curve
from rlgraph_core.execution.stopping import EXIT_CODES, RunFailed, StopRequest


def true_next_obs(next_obs: np.ndarray, infos: dict) -> np.ndarray:
    """Replace the reset observation of finished envs by their final observation."""
    mask = infos.get("_final_obs")
    if mask is None or not np.any(mask):
        return next_obs
    out = np.array(next_obs, copy=True)
    for i in np.flatnonzero(mask):
        out[i] = infos["final_obs"][i]
    return out


@dataclass
class RunState:
    """What a run carries across checkpoints besides the agent: evaluations and how it ended."""

    best_eval_return: float | None = None
    last_eval_return: float | None = None
    target_reached: bool = False
    ended_by: str | None = None
    error: str | None = None
    traceback: str | None = None
    cause: BaseException | None = field(default=None, repr=False)

    def to_json(self) -> dict:
        """The JSON stored in every checkpoint's meta (``run_state``)."""
        return {"best_eval_return": self.best_eval_return, "last_eval_return": self.last_eval_return}

    @classmethod
    def from_meta(cls, meta: dict) -> "RunState":
        """The run state a checkpoint's meta recorded (empty for checkpoints without one)."""
        stored = meta.get("run_state") or {}
        return cls(best_eval_return=stored.get("best_eval_return"), last_eval_return=stored.get("last_eval_return"))


class LocalExecutor(Executor):
    """Single-process training loop that never loses more than one checkpoint interval of work.

    Each vector step: ``agent.act`` → ``envs.step`` → ``agent.observe`` (with the true final
    observation at episode ends, and ``terminated`` kept apart from ``truncated``) →
    ``agent.update`` (the agent's own schedule decides whether to learn). Every
    ``train.eval_interval`` env steps the greedy policy is evaluated on a separate env with
    fixed seeds (a new best is saved to ``checkpoint_best``); every ``train.checkpoint_interval``
    env steps a periodic checkpoint is written (the newest ``train.keep_checkpoints`` are kept).

    The run ends at ``train.total_timesteps``, once the mean evaluation return reaches
    ``train.target_return``, on Ctrl-C or SIGTERM (at the end of the current step), or when the
    environment, the agent or a plugin raises. Whatever ended it, the final checkpoint,
    ``summary.json`` (with ``ended_by``) and the plot are written; an error is then re-raised as
    :class:`~rlgraph_core.execution.stopping.RunFailed`. A resumed run carries on the counters,
    the replay memory and the best evaluation of its checkpoint.
    """

    def run(self) -> dict:
        cfg = self.config
        tc = cfg.train
        self.out_dir.mkdir(parents=True, exist_ok=True)
        parts = self.assembly
        envs = parts.make_vector_env(tc.seed)
        eval_env = parts.make_eval_env()
        agent = parts.make_agent(envs.single_observation_space, envs.single_action_space, num_envs=cfg.env.num_envs)
        state = RunState()
        if self.resume_dir is not None:
            state = RunState.from_meta(agent.load(self.resume_dir))
        loggers = parts.make_loggers(self.out_dir)
        run_info = {
            "config": cfg.to_dict(),
            "out_dir": str(self.out_dir),
            "build_seconds": agent.build_report.build_seconds,
            "resumed_from": None if self.resume_dir is None else str(self.resume_dir),
        }
        parts.hook.rlgraph_on_train_start(run_info=run_info)
        start = (agent.timesteps, agent.updates, time.perf_counter())
        try:
            with StopRequest() as stop:
                self._loop(agent, envs, eval_env, loggers, state, stop)
        finally:
            envs.close()
            eval_env.close()
            for lg in loggers:
                lg.close()
        summary = self._finish(agent, state, start)
        if state.ended_by == "error":
            raise RunFailed(summary) from state.cause
        return summary

    def _extra(self, state: RunState, **more) -> dict:
        return {"config": self.config.to_dict(), "run_state": state.to_json(), **more}

    def _finish(self, agent, state: RunState, start: tuple[int, int, float]) -> dict:
        """Final checkpoint, summary.json, plot and the train-end hook, however the run ended."""
        cfg, tc = self.config, self.config.train
        checkpoint_dir = self.out_dir / "checkpoint"
        agent.save(checkpoint_dir, self._extra(state, eval_return_mean=state.last_eval_return, ended_by=state.ended_by))
        start_steps, start_updates, t0 = start
        elapsed = time.perf_counter() - t0
        summary = {
            "ended_by": state.ended_by,
            "exit_code": EXIT_CODES[state.ended_by],
            "timesteps": agent.timesteps,
            "updates": agent.updates,
            "wall_time": elapsed,
            "env_steps_per_s": (agent.timesteps - start_steps) / max(elapsed, 1e-9),
            "updates_per_s": (agent.updates - start_updates) / max(elapsed, 1e-9),
            "eval_return_mean": state.last_eval_return,
            "best_eval_return": state.best_eval_return,
            "target_reached": state.target_reached,
            "checkpoint": str(checkpoint_dir),
            "build_seconds": agent.build_report.build_seconds,
        }
        if state.error is not None:
            summary["error"] = state.error
            summary["traceback"] = state.traceback
        (self.out_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        metrics = self.out_dir / "metrics.jsonl"
        if metrics.is_file():
            plot_learning_curve(
                metrics,
                self.out_dir / "learning_curve.png",
                f"{cfg.agent.type} on {cfg.env.id} ({tc.backend}, {tc.mode})",
            )
        self.assembly.hook.rlgraph_on_train_end(summary=summary)
        return summary

    def _loop(self, agent, envs, eval_env, loggers, state: RunState, stop: StopRequest) -> None:
        """Train until a stop condition; record in ``state`` why it ended (errors included)."""
        try:
            self._steps(agent, envs, eval_env, loggers, state, stop)
        except Exception as exc:  # the env, the agent or a plugin raised: keep the work done so far
            state.ended_by = "error"
            state.error = f"{type(exc).__name__}: {exc}"
            state.traceback = traceback.format_exc()
            state.cause = exc
            return
        state.ended_by = stop.reason or ("target_return" if state.target_reached else "total_timesteps")

    def _steps(self, agent, envs, eval_env, loggers, state: RunState, stop: StopRequest) -> None:
        cfg = self.config
        tc = cfg.train
        n = cfg.env.num_envs
        obs, _ = envs.reset(seed=tc.seed + agent.timesteps)
        ep_returns = np.zeros(n)
        ep_lengths = np.zeros(n, dtype=np.int64)
        recent = deque(maxlen=20)
        t0 = last_t = time.perf_counter()
        last_steps, last_updates = agent.timesteps, agent.updates
        next_log = agent.timesteps + tc.log_interval
        next_eval = agent.timesteps + tc.eval_interval
        interval = tc.checkpoint_interval or tc.eval_interval
        next_checkpoint = agent.timesteps + interval
        bar = None
        if tc.progress_bar:
            from tqdm import tqdm

            bar = tqdm(total=tc.total_timesteps, initial=agent.timesteps, unit="step", dynamic_ncols=True)
        try:
            while agent.timesteps < tc.total_timesteps and not state.target_reached and stop.reason is None:
                actions = agent.act(obs)
                next_obs, rewards, terminated, truncated, infos = envs.step(actions)
                agent.observe(obs, actions, rewards, true_next_obs(next_obs, infos), terminated, truncated)
                agent.update()
                ep_returns += rewards
                ep_lengths += 1
                done = np.logical_or(terminated, truncated)
                if done.any():
                    recent.extend(ep_returns[done].tolist())
                    ep_returns[done] = 0.0
                    ep_lengths[done] = 0
                obs = next_obs
                if bar is not None:
                    bar.update(n)
                metrics = None
                if agent.timesteps >= next_eval:
                    next_eval += tc.eval_interval
                    ev = agent.evaluate(eval_env, tc.eval_episodes, seed=10_000 + tc.seed)
                    state.last_eval_return = ev["eval_return_mean"]
                    if state.best_eval_return is None or state.last_eval_return > state.best_eval_return:
                        state.best_eval_return = state.last_eval_return
                        agent.save(self.out_dir / "checkpoint_best", self._extra(state, eval=ev))
                    state.target_reached = tc.target_return is not None and state.last_eval_return >= tc.target_return
                    metrics = {"eval_return_mean": state.last_eval_return, "eval_return_std": ev["eval_return_std"]}
                if agent.timesteps >= next_checkpoint:
                    while next_checkpoint <= agent.timesteps:
                        next_checkpoint += interval
                    save_periodic(agent, self.out_dir, agent.timesteps, self._extra(state), keep=tc.keep_checkpoints)
                log_now = agent.timesteps >= next_log
                while next_log <= agent.timesteps:
                    next_log += tc.log_interval
                if log_now or metrics is not None:
                    now = time.perf_counter()
                    row = {
                        "timesteps": agent.timesteps,
                        "wall_time": now - t0,
                        "episode_return_mean": float(np.mean(recent)) if recent else None,
                        "eval_return_mean": None,
                        "env_steps_per_s": (agent.timesteps - last_steps) / max(now - last_t, 1e-9),
                        "updates_per_s": (agent.updates - last_updates) / max(now - last_t, 1e-9),
                    }
                    row.update(agent.metrics())
                    row.update(metrics or {})
                    last_t, last_steps, last_updates = now, agent.timesteps, agent.updates
                    for lg in loggers:
                        lg.log(row)
                    self.assembly.hook.rlgraph_on_iteration(metrics=row)
        finally:
            if bar is not None:
                bar.close()
