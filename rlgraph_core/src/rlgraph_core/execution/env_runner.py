"""The one env loop: a vector env stepped with an agent's actor side.

Every executor gathers experience through :class:`EnvRunner` (the local executor, each Ray
worker, each Horovod rank); nothing else steps a training environment. One :meth:`EnvRunner.step`
is ``agent.act`` → ``envs.step`` → (optionally) ``agent.observe`` with the true next observation,
plus the episode bookkeeping; :meth:`EnvRunner.trajectory` collects a time-major fragment for an
actor's ``postprocess``.

Policy state (recurrent policies): the runner asks the agent for ``initial_state(num_envs)``
once. A feed-forward agent answers None and is called as ``act(obs)``, nothing more (the only
cost is one ``is None`` test per step). A stateful agent gets the state and the episode-start
mask and returns its next state, ``act(obs, state=state, episode_start=starts) -> (actions,
state)``; the runner keeps that state per env and marks the envs whose episode just ended (the
vector env autoreset them) as starting an episode at the next step, where the agent resets their
state (:meth:`EnvRunner.step`). :meth:`EnvRunner.trajectory` then also carries ``episode_starts``
``[T, N]`` and the state each step acted from, ``states`` (``{key: [T, N, ...]}``).

The vector envs autoreset in the same step (gymnasium's ``SAME_STEP`` mode, see
:mod:`rlgraph_core.envs`): where an episode ended, the returned observation already belongs to the
next episode, and the last observation of the ended one is in ``infos["final_obs"]``.
:func:`true_next_obs` puts it back, so a transition's ``next_obs`` is always the observation its
action led to (a bootstrapped value of a truncated episode needs exactly that).

The run's global counters (env steps of all workers together, updates) are the run recorder's
(:class:`~rlgraph_core.execution.counters.StepCounter`); a runner counts only its own env steps
and episodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

__all__ = ["EnvRunner", "Step", "true_next_obs"]

#: The fields of a :class:`Step`, in order (also the keys of :meth:`EnvRunner.trajectory`).
STEP_FIELDS = ("obs", "actions", "rewards", "next_obs", "terminated", "truncated")
#: the action log is trimmed once it holds this many batches (or twice the longest episode in progress)
_ACTION_LOG_MIN = 1024


def true_next_obs(next_obs, infos: dict):
    """Replace the reset observation of finished envs by their final observation (per key for a
    Dict observation, whose ``final_obs`` gymnasium gives as one dict per env)."""
    mask = infos.get("_final_obs")
    if mask is None or not mask.any():
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
    out: dict[str, Any] = {}
    for key, value in obs.items():
        if isinstance(value, dict):
            out[key] = _replaced(value, [f[key] for f in finals], rows)
        else:
            out[key] = np.array(value, copy=True)
            for row, final in zip(rows, finals):
                out[key][row] = final[key]
    return out


def _stack(steps: list):
    """``np.stack`` of a list of per-step arrays, or per key of per-step dicts (Dict observations)."""
    if steps and isinstance(steps[0], dict):
        return {k: _stack([step[k] for step in steps]) for k in steps[0]}
    return np.stack([np.asarray(step) for step in steps])


class Step(NamedTuple):
    """One vector step: what the agent saw and did, and what followed (``[N, ...]`` each).

    ``next_obs`` is the true next observation (the final one where an episode ended). A named
    tuple, not a dataclass: one is made every env step, and a tuple is made ~4x faster.
    """

    obs: Any
    actions: Any
    rewards: np.ndarray
    next_obs: Any
    terminated: np.ndarray
    truncated: np.ndarray

    def fields(self) -> tuple:
        """The six fields in :data:`STEP_FIELDS` order (``agent.observe``'s arguments)."""
        return tuple(self)


@dataclass
class Episodes:
    """Training episodes that ended since the last :meth:`EnvRunner.take_episodes`."""

    returns: list[float]
    lengths: list[int]

    def __len__(self) -> int:
        return len(self.returns)


class EnvRunner:
    """Steps ``envs`` (a gymnasium vector env) with ``agent``'s exploring policy.

    Args:
        agent: the agent whose ``act`` (and, with ``observe=True`` steps, ``observe``) is used.
        envs: the vector env; it is reset here with ``seed`` (and closed by its owner, not here). A
            turn-based game's (:class:`~rlgraph_core.multi_agent.TurnBasedVectorEnv`) opponents
            are the agent's ``opponents`` (self-play), bound here before the reset.
        seed: the reset seed (executors derive it from ``train.seed``, the worker or rank, and
            the steps already taken, so a resumed run does not replay its first episodes).

    Attributes:
        num_envs: envs in the vector env.
        env_steps: env steps this runner took (``num_envs`` per vector step).
        episodes: training episodes that ended in this runner.
        obs: the observation batch the next step acts on.
        state: the agent's policy state per env for the next step (None: a feed-forward agent).
        episode_starts: ``[N]`` bool, which envs start an episode at the next step (None: a
            feed-forward agent).
    """

    def __init__(self, agent, envs, seed: int):
        self.agent = agent
        self.envs = envs
        self.num_envs = int(envs.num_envs)
        bind = getattr(envs, "bind_opponents", None)
        if bind is not None:  # a turn-based game: the agent's opponents play the other seats
            bind(getattr(agent, "opponents", None))
        self.obs, _ = envs.reset(seed=int(seed))
        self.env_steps = 0
        self.episodes = 0
        self._returns = np.zeros(self.num_envs)
        self._lengths = np.zeros(self.num_envs, np.int64)
        self._finished = Episodes([], [])
        #: the action batches since the start of the longest episode in progress (trimmed lazily)
        self._action_log: list = []
        self._log_cap = _ACTION_LOG_MIN
        initial = getattr(agent, "initial_state", None)
        self.state = initial(self.num_envs) if initial is not None else None
        self.episode_starts = None if self.state is None else np.ones(self.num_envs, bool)

    def step(self, observe: bool = True) -> Step:
        """One vector step: act, step the envs, ``agent.observe`` the transition (unless
        ``observe`` is False: an actor that ``postprocess``es fragments), count it."""
        obs = self.obs
        if self.state is None:
            actions = self.agent.act(obs)
        else:
            actions, self.state = self.agent.act(obs, state=self.state, episode_start=self.episode_starts)
        next_obs, rewards, terminated, truncated, infos = self.envs.step(actions)
        step = Step(obs, actions, rewards, true_next_obs(next_obs, infos), terminated, truncated)
        if observe:
            self.agent.observe(*step)
        self._count(rewards, terminated, truncated)
        self.obs = next_obs
        log = self._action_log
        log.append(actions)
        if len(log) > self._log_cap:
            self._trim_action_log()
        return step

    def _trim_action_log(self) -> None:
        """Forget the actions of ended episodes (kept: those of the longest episode in progress);
        called once the log doubled, so the per-step cost is one append and one comparison."""
        keep = int(self._lengths.max())
        del self._action_log[: len(self._action_log) - keep]
        self._log_cap = max(_ACTION_LOG_MIN, 2 * keep)

    def action_log(self) -> list:
        """The action batches since the start of the longest episode in progress, oldest first (for
        :func:`~rlgraph_core.execution.env_resume.snapshot`: env ``i``'s are the last ``lengths[i]``)."""
        self._trim_action_log()
        return list(self._action_log)

    def set_action_log(self, actions: list) -> None:
        """Carry on with ``actions`` (a resumed run's replayed episodes) as the action log."""
        self._action_log = list(actions)
        self._log_cap = max(_ACTION_LOG_MIN, 2 * len(self._action_log))

    def trajectory(self, length: int) -> dict[str, Any]:
        """``length`` vector steps (not observed) as a time-major ``[T, N, ...]`` trajectory with the
        keys of :data:`STEP_FIELDS`, dtypes kept (uint8 frames stay uint8; Dict observations per key)."""
        if self.state is None:
            steps = [self.step(observe=False).fields() for _ in range(int(length))]
            return {k: _stack([s[i] for s in steps]) for i, k in enumerate(STEP_FIELDS)}
        steps, states, starts = [], [], []
        for _ in range(int(length)):
            assert self.episode_starts is not None  # set together with the state (__init__)
            states.append(self.state)
            starts.append(self.episode_starts)
            steps.append(self.step(observe=False).fields())
        out = {k: _stack([s[i] for s in steps]) for i, k in enumerate(STEP_FIELDS)}
        out["episode_starts"] = np.stack(starts)
        out["states"] = _stack(states)
        return out

    def _count(self, rewards, terminated, truncated) -> None:
        self.env_steps += self.num_envs
        self._returns += rewards
        self._lengths += 1
        done = np.logical_or(terminated, truncated)
        if self.episode_starts is not None:
            self.episode_starts = done  # the vector env autoreset these: their next step starts an episode
        if done.any():
            self._finished.returns.extend(self._returns[done].tolist())
            self._finished.lengths.extend(int(n) for n in self._lengths[done])
            self.episodes += int(done.sum())
            self._returns[done] = 0.0
            self._lengths[done] = 0

    @property
    def has_episodes(self) -> bool:
        """Whether an episode ended since the last :meth:`take_episodes` (a check without allocating)."""
        return bool(self._finished.returns)

    def take_episodes(self) -> Episodes:
        """The episodes that ended since the last call (their returns and lengths), then forget them."""
        finished, self._finished = self._finished, Episodes([], [])
        return finished
