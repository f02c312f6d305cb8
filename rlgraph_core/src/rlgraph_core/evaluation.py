"""Deterministic policy evaluation on a separate environment."""

from __future__ import annotations

from typing import Callable

import numpy as np

from rlgraph_core.memories.obs import map_obs


def evaluate_policy(
    policy: Callable[[np.ndarray], np.ndarray],
    env,
    episodes: int = 10,
    seed: int | None = None,
    render_frames: list | None = None,
) -> dict[str, float]:
    """Play ``episodes`` full episodes with ``policy`` (batch in, batch out) on a single env
    (a Dict observation becomes a dict of batches of one).

    Episode ``i`` is reset with seed ``seed + i`` when a seed is given, so an evaluation is
    reproducible. Frames are appended to ``render_frames`` when given (env must render rgb).
    """
    returns, lengths = [], []
    for i in range(episodes):
        obs, _ = env.reset(seed=None if seed is None else seed + i)
        done, total, length = False, 0.0, 0
        while not done:
            if render_frames is not None:
                render_frames.append(env.render())
            action = policy(map_obs(lambda x: np.asarray(x)[None], obs))[0]
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            length += 1
            done = terminated or truncated
        returns.append(total)
        lengths.append(length)
    return {
        "eval_return_mean": float(np.mean(returns)),
        "eval_return_std": float(np.std(returns)),
        "eval_length_mean": float(np.mean(lengths)),
        "eval_episodes": episodes,
    }
