"""What the compiled programs of every algorithm share: the env carry and its fresh start."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from rlgraph_jax.gymnax_envs import PureEnv


class EnvCarry(NamedTuple):
    """What the program carries from one env step to the next, per env (``[N, ...]``)."""

    env_state: Any
    obs: Any
    key: Any
    episode_return: Any
    episode_length: Any


class ChunkOut(NamedTuple):
    """A chunk's outputs: the algorithm's loss outputs per iteration (PPO: means per rollout
    ``[I, 6]``; DQN: the last step's loss per env step ``[S]``, NaN where no round ran), and per
    env step whether an episode ended there with its return and length (``[..., N]``)."""

    losses: Any
    done: Any
    returns: Any
    lengths: Any


def init_env_carry(env: PureEnv, num_envs: int, seed) -> EnvCarry:
    """Fresh episodes in ``num_envs`` envs, keyed by ``seed`` (a pure function: vmap it over seeds)."""
    key = jax.random.PRNGKey(seed)
    key, reset_key = jax.random.split(key)
    obs, state = jax.vmap(env.reset)(jax.random.split(reset_key, num_envs))
    zeros = jnp.zeros((num_envs,), jnp.float32)
    return EnvCarry(state, obs, key, zeros, jnp.zeros((num_envs,), jnp.int32))


def env_step(env: PureEnv, carry: EnvCarry, key, actions):
    """One step of every env: ``(new carry without its key, (reward, terminated, truncated,
    final obs), (done, return, length) of the episodes as they stood)``."""
    obs, state, reward, terminated, truncated, final = jax.vmap(env.step)(
        jax.random.split(key, carry.obs.shape[0]), carry.env_state, actions
    )
    done = terminated | truncated
    ret = carry.episode_return + reward
    length = carry.episode_length + 1
    new = EnvCarry(state, obs, carry.key, jnp.where(done, 0.0, ret), jnp.where(done, 0, length))
    return new, (reward, terminated, truncated, final), (done, ret, length)
