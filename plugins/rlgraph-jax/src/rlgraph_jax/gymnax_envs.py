"""gymnax environments for rlgraph: a pure-function adapter and a gymnasium face over it.

gymnax (``pip install "rlgraph-jax[gymnax]"``) writes environments as pure JAX functions,
``reset(key, params)`` and ``step(key, state, action, params)``, so an env step can be traced into
the same program as acting and learning. Two views of one gymnax env:

* :class:`PureEnv`: the pure functions with the params bound, observations as float32 and the
  final observation of an ended episode returned beside gymnax's auto-reset one. The ``compiled``
  executor (:mod:`rlgraph_jax.compiled`) vmaps and scans these.
* :class:`GymnaxEnv`: a :class:`gymnasium.Env` over the same functions (one jitted call per step),
  so everything else in rlgraph -- config validation, evaluation, ``rlgraph evaluate`` on torch or
  tf, the local executor -- sees an ordinary gymnasium env. A config names it as
  ``env: {id: "rlgraph_jax.gymnax_envs:GymnaxEnv", kwargs: {name: CartPole-v1}}``.

gymnax and JAX are imported when an env is made, not when this module is imported.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["GymnaxEnv", "PureEnv", "pure_env_of"]


def _gymnasium_space(space, params) -> gym.Space:
    """A gymnax space as the gymnasium space rlgraph reads (Box observations as float32)."""
    from gymnax.environments import spaces

    if isinstance(space, spaces.Discrete):
        return gym.spaces.Discrete(int(space.n))
    if isinstance(space, spaces.Box):
        shape = tuple(int(d) for d in space.shape)
        low = np.broadcast_to(np.asarray(space.low, np.float32), shape)
        high = np.broadcast_to(np.asarray(space.high, np.float32), shape)
        return gym.spaces.Box(low, high, shape, np.float32)
    raise TypeError(
        f"gymnax space {space!r} has no gymnasium counterpart here; rlgraph_jax adapts gymnax Discrete and Box spaces."
    )


class PureEnv:
    """One gymnax env with its params bound: pure ``reset`` and ``step`` for one env (vmap them).

    Args:
        name: a gymnax env id (``gymnax.registered_envs``), e.g. ``CartPole-v1``, ``Breakout-MinAtar``.
        params: overrides of the env's default ``EnvParams`` fields (e.g. ``max_steps_in_episode``).

    Raises:
        ValueError: an unknown env name or param field (naming the known ones).
    """

    def __init__(self, name: str, params: dict[str, Any] | None = None):
        import gymnax

        if name not in gymnax.registered_envs:
            raise ValueError(f"'{name}' is not a gymnax environment; gymnax has: {', '.join(gymnax.registered_envs)}.")
        self.name = name
        self.env, defaults = gymnax.make(name)
        params = dict(params or {})
        unknown = sorted(set(params) - set(defaults.__dataclass_fields__))
        if unknown:
            raise ValueError(
                f"gymnax env '{name}' has no param(s) {unknown}; its params are "
                f"{sorted(defaults.__dataclass_fields__)}."
            )
        self.params = defaults.replace(**params) if params else defaults
        self.observation_space = _gymnasium_space(self.env.observation_space(self.params), self.params)
        self.action_space = _gymnasium_space(self.env.action_space(self.params), self.params)

    def reset(self, key):
        """``(obs, state)`` of a new episode (obs float32)."""
        import jax.numpy as jnp

        obs, state = self.env.reset(key, self.params)
        return jnp.asarray(obs, jnp.float32), state

    def step(self, key, state, action):
        """One step: ``(obs, state, reward, terminated, truncated, final_obs)``.

        gymnax resets an ended episode inside ``step``: ``obs`` and ``state`` are then the new
        episode's, and ``final_obs`` is the ended one's last observation (the true next observation
        a truncated episode bootstraps from); otherwise ``final_obs`` equals ``obs``.
        """
        import jax.numpy as jnp

        obs, state, reward, terminated, truncated, info = self.env.step(key, state, action, self.params)
        final = jnp.asarray(info["final_observation"], jnp.float32)
        return (
            jnp.asarray(obs, jnp.float32),
            state,
            jnp.asarray(reward, jnp.float32),
            jnp.asarray(terminated, bool),
            jnp.asarray(truncated, bool) & ~jnp.asarray(terminated, bool),
            final,
        )


class GymnaxEnv(gym.Env):
    """A gymnax env as a :class:`gymnasium.Env` (evaluation, other executors, other backends).

    Each ``step`` is one jitted call of :meth:`PureEnv.step`; an ended episode returns its final
    observation (gymnasium's contract) and the next ``step`` before a ``reset`` is refused as in
    any gymnasium env. The env's own randomness comes from a JAX key seeded by ``reset(seed=...)``.

    Args:
        name: the gymnax env id.
        params: overrides of its ``EnvParams`` (see :class:`PureEnv`).
        render_mode: only None (gymnax envs do not render through gymnasium).
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, name: str = "CartPole-v1", params: dict[str, Any] | None = None, render_mode: str | None = None):
        import jax

        if render_mode is not None:
            raise ValueError(f"GymnaxEnv does not render (render_mode={render_mode!r}); leave render_mode unset.")
        self.pure = PureEnv(name, params)
        self.observation_space = self.pure.observation_space
        self.action_space = self.pure.action_space
        self._jax = jax
        pure = self.pure

        def reset(key):
            key, sub = jax.random.split(key)
            return (key, *pure.reset(sub))

        def step(key, state, action):
            key, sub = jax.random.split(key)
            return (key, *pure.step(sub, state, action))

        # one dispatch per call: the key is split inside the program
        self._reset = jax.jit(reset)
        self._step = jax.jit(step)
        self._key = jax.random.PRNGKey(0)
        self._state = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start an episode (``seed`` reseeds the env's JAX key)."""
        super().reset(seed=seed)
        if seed is not None:
            self._key = self._jax.random.PRNGKey(seed)
        self._key, obs, self._state = self._reset(self._key)
        return np.array(obs), {}

    def step(self, action):
        """One step of the episode: ``(obs, reward, terminated, truncated, info)``."""
        if self._state is None:
            raise RuntimeError("GymnaxEnv.step called before reset (or after the episode ended); call reset first.")
        self._key, _, state, reward, terminated, truncated, final = self._step(
            self._key, self._state, np.asarray(action)
        )
        final, reward, terminated, truncated = self._jax.device_get((final, reward, terminated, truncated))
        terminated, truncated = bool(terminated), bool(truncated)
        self._state = None if terminated or truncated else state
        return np.array(final), float(reward), terminated, truncated, {}


def pure_env_of(env) -> PureEnv | None:
    """The :class:`PureEnv` behind a (wrapped) gymnasium env made from :class:`GymnaxEnv`, else None."""
    return (
        getattr(getattr(env, "unwrapped", env), "pure", None)
        if isinstance(getattr(env, "unwrapped", env), GymnaxEnv)
        else None
    )
