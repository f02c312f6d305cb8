"""The local executor: one process, gymnasium vector envs, periodic evaluation, checkpoints."""

from __future__ import annotations

import time
from collections import deque

import numpy as np

from rlgraph_core.execution.base import Executor
from rlgraph_core.execution.plotting import plot_learning_curve


def true_next_obs(next_obs: np.ndarray, infos: dict) -> np.ndarray:
    """Replace the reset observation of finished envs by their final observation."""
    mask = infos.get("_final_obs")
    if mask is None or not np.any(mask):
        return next_obs
    out = np.array(next_obs, copy=True)
    for i in np.flatnonzero(mask):
        out[i] = infos["final_obs"][i]
    return out


class LocalExecutor(Executor):
    """Single-process training loop.

    Each vector step: ``agent.act`` → ``envs.step`` → ``agent.observe`` (with the true final
    observation at episode ends, and ``terminated`` kept apart from ``truncated``) →
    ``agent.update`` (the agent's own schedule decides whether to learn). Every
    ``train.eval_interval`` env steps the greedy policy is evaluated on a separate env with
    fixed seeds; the run stops at ``train.total_timesteps`` or once the mean evaluation return
    reaches ``train.target_return``.
    """

    def run(self) -> dict:
        cfg = self.config
        tc = cfg.train
        self.out_dir.mkdir(parents=True, exist_ok=True)
        parts = self.assembly
        envs = parts.make_vector_env(tc.seed)
        eval_env = parts.make_eval_env()
        agent = parts.make_agent(envs.single_observation_space, envs.single_action_space, num_envs=cfg.env.num_envs)
        if self.resume_dir is not None:
            agent.load(self.resume_dir)
        loggers = parts.make_loggers(self.out_dir)
        run_info = {
            "config": cfg.to_dict(),
            "out_dir": str(self.out_dir),
            "build_seconds": agent.build_report.build_seconds,
        }
        parts.hook.rlgraph_on_train_start(run_info=run_info)
        try:
            summary = self._loop(agent, envs, eval_env, loggers)
        finally:
            envs.close()
            eval_env.close()
            for lg in loggers:
                lg.close()
        if (self.out_dir / "metrics.jsonl").is_file():
            plot_learning_curve(
                self.out_dir / "metrics.jsonl",
                self.out_dir / "learning_curve.png",
                f"{cfg.agent.type} on {cfg.env.id} ({tc.backend}, {tc.mode})",
            )
        parts.hook.rlgraph_on_train_end(summary=summary)
        return summary

    def _loop(self, agent, envs, eval_env, loggers) -> dict:
        cfg = self.config
        tc = cfg.train
        n = cfg.env.num_envs
        obs, _ = envs.reset(seed=tc.seed + agent.timesteps)
        ep_returns = np.zeros(n)
        ep_lengths = np.zeros(n, dtype=np.int64)
        recent = deque(maxlen=20)
        start_steps, start_updates = agent.timesteps, agent.updates
        t0 = last_t = time.perf_counter()
        last_steps, last_updates = agent.timesteps, agent.updates
        next_log = agent.timesteps + tc.log_interval
        next_eval = agent.timesteps + tc.eval_interval
        best_eval, last_eval, reached = -np.inf, None, False
        checkpoint_dir = self.out_dir / "checkpoint"
        bar = None
        if tc.progress_bar:
            from tqdm import tqdm

            bar = tqdm(total=tc.total_timesteps, initial=agent.timesteps, unit="step", dynamic_ncols=True)
        while agent.timesteps < tc.total_timesteps and not reached:
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
                last_eval = ev["eval_return_mean"]
                if last_eval > best_eval:
                    best_eval = last_eval
                    agent.save(self.out_dir / "checkpoint_best", {"config": cfg.to_dict(), "eval": ev})
                reached = tc.target_return is not None and last_eval >= tc.target_return
                metrics = {"eval_return_mean": last_eval, "eval_return_std": ev["eval_return_std"]}
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
        if bar is not None:
            bar.close()
        elapsed = time.perf_counter() - t0
        agent.save(checkpoint_dir, {"config": cfg.to_dict(), "eval_return_mean": last_eval})
        return {
            "timesteps": agent.timesteps,
            "updates": agent.updates,
            "wall_time": elapsed,
            "env_steps_per_s": (agent.timesteps - start_steps) / max(elapsed, 1e-9),
            "updates_per_s": (agent.updates - start_updates) / max(elapsed, 1e-9),
            "eval_return_mean": last_eval,
            "best_eval_return": None if best_eval == -np.inf else best_eval,
            "target_reached": reached,
            "checkpoint": str(checkpoint_dir),
            "build_seconds": agent.build_report.build_seconds,
        }
