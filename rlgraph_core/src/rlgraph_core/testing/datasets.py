"""Small datasets for offline-RL tests, made on the spot (nothing is ever downloaded).

:func:`cartpole_expert` is a hand-written CartPole-v1 controller (a linear feedback on cart and
pole that keeps every seeded episode up for the full 500 steps); :func:`record_policy` records
episodes of any policy, optionally taking the other action with some probability, into a Minari
dataset through :class:`~rlgraph_core.datasets.DatasetWriter` (the writer ``train.record_dataset``
uses). Not imported by ``rlgraph_core.testing`` itself (it needs Minari).

Example::

    expert = record_policy(tmp_path / "expert", cartpole_expert, episodes=4)     # returns ~500
    poor = record_policy(tmp_path / "poor", cartpole_expert, episodes=100, p_other=0.7)
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from rlgraph_core.datasets import DatasetWriter
from rlgraph_core.execution.env_runner import Step, true_next_obs

__all__ = ["cartpole_expert", "record_policy"]


def cartpole_expert(obs: np.ndarray) -> np.ndarray:
    """Actions ``[B]`` of a linear CartPole controller for observations ``[B, 4]``: push right
    when ``0.1 x + 0.5 x' + 10 theta + 2 theta'`` is positive (the pole and the cart drift both
    corrected); returns 500 on CartPole-v1."""
    obs = np.asarray(obs, np.float64)
    x, x_dot, theta, theta_dot = obs[:, 0], obs[:, 1], obs[:, 2], obs[:, 3]
    return ((0.1 * x + 0.5 * x_dot + 10.0 * theta + 2.0 * theta_dot) > 0).astype(np.int64)


def record_policy(
    path: str | Path,
    policy: Callable[[np.ndarray], np.ndarray],
    *,
    episodes: int,
    env_id: str = "CartPole-v1",
    p_other: float = 0.0,
    num_envs: int = 4,
    seed: int = 0,
) -> float:
    """Record ``episodes`` episodes of ``policy`` on ``env_id`` into a Minari dataset at ``path``.

    With ``p_other`` the recorded behaviour takes the other of two discrete actions (``1 - a``)
    with that probability at every step. Returns the mean return of the recorded episodes.
    """
    import gymnasium as gym

    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.make(env_id)] * num_envs, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    writer = DatasetWriter(
        path,
        envs.single_observation_space,
        envs.single_action_space,
        env_section={"id": env_id, "kwargs": {}, "wrappers": []},
        algorithm="scripted",
    )
    rng = np.random.default_rng(seed)
    obs, _ = envs.reset(seed=seed)
    returns: list[float] = []
    running = np.zeros(num_envs)
    try:
        while len(returns) < episodes:
            actions = np.asarray(policy(obs))
            if p_other:
                actions = np.where(rng.random(num_envs) < p_other, 1 - actions, actions)
            next_obs, rewards, terminated, truncated, infos = envs.step(actions)
            writer.add(Step(obs, actions, rewards, true_next_obs(next_obs, infos), terminated, truncated))
            running += rewards
            done = terminated | truncated
            returns.extend(running[done].tolist())
            running[done] = 0.0
            obs = next_obs
    finally:
        envs.close()
    writer.close()  # the episodes still running are written as truncated; they do not count here
    return float(np.mean(returns[:episodes]))
