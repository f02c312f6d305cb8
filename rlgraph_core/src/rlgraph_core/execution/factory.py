"""Make environments, backends and agents from a run config."""

from __future__ import annotations

import gymnasium as gym

from rlgraph_core.backend import make_backend
from rlgraph_core.spaces import from_gym


def make_vector_env(env_cfg, seed: int):
    """A gymnasium vector env that returns the final observation of finished episodes at once.

    Same-step autoreset means ``obs`` after a step already holds the reset observation of a
    finished env, and ``info["final_obs"]`` the true last observation, which replay needs.
    """
    mode = gym.VectorizeMode.ASYNC if env_cfg.vectorization == "async" else gym.VectorizeMode.SYNC
    envs = gym.make_vec(env_cfg.id, num_envs=env_cfg.num_envs, vectorization_mode=mode,
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
                        **env_cfg.kwargs)
    envs.action_space.seed(seed)
    return envs


def make_eval_env(env_cfg, render_mode: str | None = None):
    """A single environment for evaluation."""
    kwargs = dict(env_cfg.kwargs)
    if render_mode:
        kwargs["render_mode"] = render_mode
    return gym.make(env_cfg.id, **kwargs)


def make_agent(config, observation_space, action_space, num_envs: int = 1, plugin_manager=None):
    """Build the configured agent on the configured backend, from gymnasium spaces."""
    from rlgraph_core.plugins import get_plugin_manager

    pm = plugin_manager or get_plugin_manager()
    agent_cls, _ = pm.get("agents", config.agent.type, field="agent.type")
    backend = make_backend(config.train.backend, config.train.mode, config.train.device,
                           config.train.seed, plugin_manager=pm)
    if config.train.num_threads is not None:
        backend.set_num_threads(config.train.num_threads)
    return agent_cls(config.agent, from_gym(observation_space), from_gym(action_space), backend,
                     seed=config.train.seed, num_envs=num_envs)
