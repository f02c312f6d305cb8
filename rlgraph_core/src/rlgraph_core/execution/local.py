"""The local executor: one process, gymnasium vector envs, periodic evaluation, checkpoints."""

from __future__ import annotations

import numpy as np

from rlgraph_core.execution.base import Executor
from rlgraph_core.execution.recorder import RunRecorder, RunState
from rlgraph_core.execution.stopping import StopRequest

__all__ = ["LocalExecutor", "RunState", "true_next_obs"]


def true_next_obs(next_obs, infos: dict):
    """Replace the reset observation of finished envs by their final observation (per key for a
    Dict observation, whose ``final_obs`` gymnasium gives as one dict per env)."""
    mask = infos.get("_final_obs")
    if mask is None or not np.any(mask):
        return next_obs
    done = np.flatnonzero(mask)
    if isinstance(next_obs, dict):
        return _replaced(next_obs, [infos["final_obs"][i] for i in done], done)
    out = np.array(next_obs, copy=True)
    for i in done:
        out[i] = infos["final_obs"][i]
    return out


def _replaced(obs: dict, finals: list, rows: np.ndarray) -> dict:
    """A copy of the Dict observation batch ``obs`` with ``rows`` set from the per-env ``finals``."""
    out = {}
    for key, value in obs.items():
        if isinstance(value, dict):
            out[key] = _replaced(value, [f[key] for f in finals], rows)
        else:
            out[key] = np.array(value, copy=True)
            for row, final in zip(rows, finals):
                out[key][row] = final[key]
    return out


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
    the replay memory and the best evaluation of its checkpoint. All of that recording is the
    :class:`~rlgraph_core.execution.recorder.RunRecorder`'s, which distributed executors share.
    """

    accepts_agent = True

    def __init__(self, config, out_dir, *, assembly, resume_dir=None, agent=None, run_state: RunState | None = None):
        super().__init__(config, out_dir, assembly=assembly, resume_dir=resume_dir)
        #: an agent built by the caller to train on (the facade's), or None to build one
        self.agent = agent
        #: the run state to carry on with ``agent`` (best evaluation, wall time), or None
        self.run_state = run_state

    def run(self) -> dict:
        cfg = self.config
        parts = self.assembly
        envs = parts.make_vector_env(cfg.train.seed)
        try:
            eval_env = parts.make_eval_env()
            agent = self.agent or parts.make_agent(
                envs.single_observation_space, envs.single_action_space, num_envs=cfg.env.num_envs
            )
            recorder = RunRecorder(
                cfg,
                self.out_dir,
                assembly=parts,
                agent=agent,
                resume_dir=self.resume_dir,
                eval_env=eval_env,
                state=self.run_state,
            )
            return recorder.run(lambda rec, stop: self._steps(agent, envs, rec, stop))
        finally:
            envs.close()

    def _steps(self, agent, envs, recorder: RunRecorder, stop: StopRequest) -> None:
        """Step the vector envs until the recorder says the run is done."""
        cfg = self.config
        n = cfg.env.num_envs
        obs, _ = envs.reset(seed=cfg.train.seed + agent.timesteps)
        ep_returns = np.zeros(n)
        while not recorder.done(stop):
            actions = agent.act(obs)
            next_obs, rewards, terminated, truncated, infos = envs.step(actions)
            agent.observe(obs, actions, rewards, true_next_obs(next_obs, infos), terminated, truncated)
            agent.update()
            ep_returns += rewards
            done = np.logical_or(terminated, truncated)
            if done.any():
                recorder.add_episode_returns(ep_returns[done].tolist())
                ep_returns[done] = 0.0
            obs = next_obs
            recorder.step(n)
