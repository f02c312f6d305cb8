"""Environment factories: gymnasium vector envs for training and single envs for evaluation."""

from __future__ import annotations

import gymnasium as gym


def make_vector_env(env_cfg, seed: int):
    """A gymnasium vector env that returns the final observation of finished episodes at once.

    Same-step autoreset means ``obs`` after a step already holds the reset observation of a
    finished env, and ``info["final_obs"]`` the true last observation, which replay needs.
    """
    mode = gym.VectorizeMode.ASYNC if env_cfg.vectorization == "async" else gym.VectorizeMode.SYNC
    envs = gym.make_vec(
        env_cfg.id,
        num_envs=env_cfg.num_envs,
        vectorization_mode=mode,
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
        **env_cfg.kwargs,
    )
    envs.action_space.seed(seed)
    return envs


def make_eval_env(env_cfg, render_mode: str | None = None):
    """A single environment for evaluation."""
    kwargs = dict(env_cfg.kwargs)
    if render_mode:
        kwargs["render_mode"] = render_mode
    return gym.make(env_cfg.id, **kwargs)
