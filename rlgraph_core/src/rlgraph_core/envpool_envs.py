"""``env.vectorization: envpool``: Atari and MuJoCo envs stepped in C++ by EnvPool (Weng et al. 2022).

EnvPool (``pip install "rlgraph-core[envpool]"``) runs a batch of envs in C++ threads and
returns batched arrays, which is several times faster than gymnasium's vector envs for Atari.
:func:`make_envpool_env` makes an EnvPool batch for ``env.id`` and adapts it to what every
rlgraph loop expects from a gymnasium vector env:

* ids: ``ALE/Pong-v5`` is EnvPool's ``Pong-v5``; MuJoCo ids (``HalfCheetah-v5``) are the same;
* same-step autoreset: EnvPool resets a finished env on the *next* step; the adapter resets the
  finished envs at once (``reset(env_id=...)``) and returns their last observation in
  ``info["final_obs"]`` (mask ``info["_final_obs"]``), as gymnasium's ``SAME_STEP`` mode does;
* images channels-last ``[N, 84, 84, 4]`` uint8, as the ``frame_stack`` wrapper gives them
  (EnvPool stacks on the first axis), so networks, replay frame sharing and checkpoints see the
  same observations with either vectorization;
* Atari preprocessing is EnvPool's own (it is part of the C++ env): the ``atari_preprocessing``,
  ``frame_stack`` and ``clip_reward`` wrappers of a config are translated into EnvPool's
  arguments (``noop_max``, ``frame_skip``, ``img_height``/``img_width``, ``stack_num``,
  ``reward_clip``); any other wrapper is refused (EnvPool has no per-env Python hook).

EnvPool's Atari defaults follow the Atari preprocessing of Machado et al. (2018) with episodic
life and reward clipping *off* here unless the config asks: the translated settings decide.
Observations and rewards are checked for non-finite values as with gymnasium envs.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlgraph_core.errors import ConfigError

__all__ = ["make_envpool_env", "envpool_id", "envpool_kwargs"]

INSTALL = 'pip install "rlgraph-core[envpool]"'

#: The wrappers EnvPool's Atari env does itself, and the EnvPool arguments of their settings.
_TRANSLATED = ("atari_preprocessing", "frame_stack", "clip_reward")


def _envpool():
    try:
        import envpool
    except ImportError:
        raise ConfigError(
            f"'env.vectorization' = 'envpool' needs the envpool package, which is not installed: {INSTALL} "
            f"(EnvPool has wheels for Linux and macOS, CPython 3.8-3.12), or use env.vectorization: sync or async."
        ) from None
    return envpool


def envpool_id(env_id: str) -> str:
    """EnvPool's name of a gymnasium id: ``ALE/Pong-v5`` -> ``Pong-v5``; other ids are unchanged."""
    return env_id[len("ALE/") :] if env_id.startswith("ALE/") else env_id


def envpool_kwargs(env_cfg) -> dict[str, Any]:
    """EnvPool arguments from ``env.kwargs`` and the Atari wrappers of ``env.wrappers`` (module docstring)."""
    atari = env_cfg.id.startswith("ALE/")
    kwargs: dict[str, Any] = {}
    if atari:
        # Nothing unless the config asks: no stacking, no clipping, no episodic life, full ALE frames
        # are not offered by EnvPool (it always resizes), so a config without atari_preprocessing is refused.
        kwargs.update(stack_num=1, reward_clip=False, episodic_life=False)
    ale = {"repeat_action_probability": "repeat_action_probability", "full_action_space": "full_action_space"}
    for key, value in env_cfg.kwargs.items():
        if atari and key == "frameskip":
            if value != 1:
                raise ConfigError(
                    f"'env.kwargs.frameskip' = {value!r} with env.vectorization: envpool: EnvPool skips frames "
                    f"in its Atari preprocessing; set frameskip: 1 and atari_preprocessing's frame_skip."
                )
            continue
        kwargs[ale.get(key, key)] = value
    seen_preprocessing = False
    for wrapper in env_cfg.wrappers:
        name = wrapper.type
        if name not in _TRANSLATED or not atari:
            raise ConfigError(
                f"'env.wrappers' holds '{name}', which env.vectorization: envpool cannot apply: EnvPool steps "
                f"its envs in C++, with no per-env Python wrappers; it does the Atari ones itself "
                f"({', '.join(_TRANSLATED)}). Remove the wrapper or use env.vectorization: sync or async."
            )
        s = wrapper.model_dump()
        if name == "atari_preprocessing":
            seen_preprocessing = True
            size = s.get("screen_size", 84)
            h, w = (size, size) if isinstance(size, int) else tuple(size)
            kwargs.update(
                noop_max=int(s.get("noop_max", 30)),
                frame_skip=int(s.get("frame_skip", 4)),
                img_height=int(h),
                img_width=int(w),
                episodic_life=bool(s.get("terminal_on_life_loss", False)),
                use_fire_reset=s.get("fire_on_serve") is not False,  # EnvPool's own, for games with FIRE
                gray_scale=bool(s.get("grayscale_obs", True)),
            )
        elif name == "frame_stack":
            kwargs["stack_num"] = int(s.get("stack_size", 4))
        elif name == "clip_reward":
            if (s.get("min_reward"), s.get("max_reward")) != (-1.0, 1.0):
                raise ConfigError(
                    f"'env.wrappers' clip_reward to [{s.get('min_reward')}, {s.get('max_reward')}] with "
                    f"env.vectorization: envpool: EnvPool clips rewards to their sign only (min -1, max 1)."
                )
            kwargs["reward_clip"] = True
    if atari and not seen_preprocessing:
        raise ConfigError(
            f"'env.id' = '{env_cfg.id}' with env.vectorization: envpool needs the atari_preprocessing wrapper "
            f"in env.wrappers: EnvPool always resizes and skips frames, so say how (screen_size, frame_skip, "
            f"noop_max), e.g. wrappers: [{{type: atari_preprocessing}}, {{type: frame_stack, stack_size: 4}}]."
        )
    return kwargs


class EnvPoolVectorEnv(gym.vector.VectorEnv):
    """An EnvPool batch as a gymnasium vector env with same-step autoreset (module docstring).

    Args:
        pool: the EnvPool env (gymnasium API, synchronous: ``batch_size == num_envs``).
        env_id: ``env.id``, for messages.
        allow_nonfinite_obs: accept NaN/inf in float observations (rewards are always checked).
    """

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def __init__(self, pool, env_id: str, allow_nonfinite_obs: bool = False):
        self.pool = pool
        self.env_id = env_id
        self.allow_nonfinite_obs = allow_nonfinite_obs
        self.num_envs = int(pool.config["num_envs"])
        space = pool.observation_space
        self._channels_last = isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3
        if self._channels_last:
            space = gym.spaces.Box(0, 255, (*space.shape[1:], space.shape[0]), np.uint8)
        elif isinstance(space, gym.spaces.Box) and space.dtype == np.float64:
            space = gym.spaces.Box(space.low.astype(np.float32), space.high.astype(np.float32), dtype=np.float32)
        self.single_observation_space = space
        self.single_action_space = pool.action_space
        self.observation_space = gym.vector.utils.batch_space(space, self.num_envs)
        self.action_space = gym.vector.utils.batch_space(pool.action_space, self.num_envs)
        self._all = np.arange(self.num_envs, dtype=np.int32)
        self._steps = 0

    def _obs(self, obs: np.ndarray) -> np.ndarray:
        if self._channels_last:
            return np.ascontiguousarray(np.moveaxis(obs, 1, -1))
        return obs.astype(np.float32) if obs.dtype == np.float64 else obs

    def _check(self, obs: np.ndarray, rewards: np.ndarray) -> None:
        bad_obs = (not self.allow_nonfinite_obs) and obs.dtype.kind == "f" and not np.all(np.isfinite(obs))
        if bad_obs or not np.all(np.isfinite(rewards)):
            field = "observation" if bad_obs else "reward"
            raise ConfigError(
                f"'env.id' = '{self.env_id}' (envpool) returned a non-finite {field} at vector step {self._steps}; "
                f"nothing non-finite is trained on or saved (env.allow_nonfinite_obs: true accepts NaN/inf "
                f"observations of envs that leave unused dimensions at inf)."
            )

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Reset every env (EnvPool is seeded when made: ``seed`` is not used again)."""
        obs, info = self.pool.reset(self._all)
        obs = self._obs(obs)
        self._check(obs, np.zeros(1))
        return obs, dict(info)

    def step(self, actions):
        """Step every env; finished envs are reset at once (their last observation in ``info["final_obs"]``)."""
        obs, rewards, terminated, truncated, info = self.pool.step(np.asarray(actions), self._all)
        self._steps += 1
        obs = self._obs(obs)
        rewards = np.asarray(rewards, np.float32)
        self._check(obs, rewards)
        info = dict(info)
        done = np.logical_or(terminated, truncated)
        if done.any():
            ids = np.flatnonzero(done).astype(np.int32)
            final = obs.copy()
            fresh, _ = self.pool.reset(ids)
            obs = obs.copy()
            obs[ids] = self._obs(fresh)
            info["final_obs"], info["_final_obs"] = final, done
        return obs, rewards, np.asarray(terminated, bool), np.asarray(truncated, bool), info

    def close_extras(self, **kwargs):
        """EnvPool frees its threads when the pool is garbage collected; drop the reference."""
        self.pool = None


def make_envpool_env(env_cfg, seed: int) -> EnvPoolVectorEnv:
    """An :class:`EnvPoolVectorEnv` of ``env.num_envs`` copies of ``env.id`` seeded with ``seed``.

    Raises:
        ConfigError: envpool is not installed (naming the pip command), it has no such env, or
            ``env.wrappers``/``env.kwargs`` ask for what it cannot do.
    """
    envpool = _envpool()
    task = envpool_id(env_cfg.id)
    if task not in envpool.list_all_envs():
        raise ConfigError(
            f"'env.id' = '{env_cfg.id}' has no EnvPool counterpart ('{task}'); env.vectorization: envpool offers "
            f"Atari (ALE/<Game>-v5) and MuJoCo (e.g. HalfCheetah-v5) envs, among others (envpool.list_all_envs()); "
            f"use env.vectorization: sync or async for this env."
        )
    kwargs = envpool_kwargs(env_cfg)
    try:
        pool = envpool.make(task, env_type="gymnasium", num_envs=env_cfg.num_envs, seed=int(seed), **kwargs)
    except (TypeError, ValueError, KeyError) as exc:
        raise ConfigError(
            f"EnvPool could not make '{task}' with {kwargs}: {type(exc).__name__}: {str(exc)[:200]}. "
            f"env.kwargs are passed to envpool.make for env.vectorization: envpool."
        ) from None
    return EnvPoolVectorEnv(pool, env_cfg.id, bool(getattr(env_cfg, "allow_nonfinite_obs", False)))
