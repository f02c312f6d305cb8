"""Deterministic policy evaluation on a separate environment."""

from __future__ import annotations

from typing import Callable, Union

import numpy as np

from rlgraph_core.memories.obs import batch_len, map_obs


class StatefulPolicy:
    """A stateful agent's ``act`` as a policy ``obs -> actions`` that carries the state between
    calls; :meth:`start_episode` makes the next call start fresh episodes (the state reset)."""

    def __init__(self, agent, explore: bool = False):
        self.agent = agent
        self.explore = explore
        self.state = None

    def start_episode(self) -> None:
        """The next call acts at the start of an episode in every env."""
        self.state = None

    def __call__(self, obs):
        n = batch_len(obs)
        starts = np.zeros(n, bool)
        if self.state is None:
            self.state, starts = self.agent.initial_state(n), np.ones(n, bool)
        actions, self.state = self.agent.act(obs, self.explore, state=self.state, episode_start=starts)
        return actions


def agent_policy(agent, explore: bool = False) -> Callable:
    """``agent``'s policy as :func:`evaluate_policy` takes it: ``act(obs, explore)`` for a
    feed-forward agent, a :class:`StatefulPolicy` for one whose ``initial_state`` is not None."""
    initial = getattr(agent, "initial_state", None)
    if initial is not None and initial(1) is not None:
        return StatefulPolicy(agent, explore)
    return lambda obs: agent.act(obs, explore=explore)


def evaluate_policy(
    policy: Callable[[np.ndarray], np.ndarray],
    env,
    episodes: int = 10,
    seed: int | None = None,
    render_frames: Union[list, Callable[[np.ndarray], None], None] = None,
    stop: Callable[[], bool] | None = None,
) -> dict[str, float] | None:
    """Play ``episodes`` full episodes with ``policy`` (batch in, batch out) on a single env
    (a Dict observation becomes a dict of batches of one). A policy with a ``start_episode``
    method (:class:`StatefulPolicy`: a recurrent agent's) is told where each episode starts.

    Episode ``i`` is reset with seed ``seed + i`` when a seed is given, so an evaluation is
    reproducible. With ``render_frames`` (the env must render ``rgb_array``) every frame, the
    first of each episode and the one after each step, is passed to it when it is a function
    (e.g. :meth:`rlgraph_core.integrations.video.VideoWriter.add`, which streams it to a file)
    or appended to it when it is a list.

    ``stop`` (e.g. "a SIGTERM arrived") is asked after every env step; once it answers True the
    evaluation ends there and None is returned: an episode can be arbitrarily long, and a run
    asked to stop must not wait for it.
    """
    if isinstance(render_frames, list):
        render_frames = render_frames.append
    returns, lengths = [], []
    for i in range(episodes):
        obs, _ = env.reset(seed=None if seed is None else seed + i)
        if hasattr(policy, "start_episode"):
            policy.start_episode()
        done, total, length = False, 0.0, 0
        if render_frames is not None:
            render_frames(env.render())
        while not done:
            action = policy(map_obs(lambda x: np.asarray(x)[None], obs))[0]
            obs, reward, terminated, truncated, _ = env.step(action)
            if render_frames is not None:
                render_frames(env.render())
            total += float(reward)
            length += 1
            done = terminated or truncated
            if stop is not None and stop():
                return None
        returns.append(total)
        lengths.append(length)
    return {
        "eval_return_mean": float(np.mean(returns)),
        "eval_return_std": float(np.std(returns)),
        "eval_length_mean": float(np.mean(lengths)),
        "eval_episodes": episodes,
    }
