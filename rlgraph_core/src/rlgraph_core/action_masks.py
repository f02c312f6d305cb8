"""Where an environment's legal-action mask comes from: ``env.action_mask`` in a config.

Agents read a mask from the observation key ``action_mask``
(:data:`~rlgraph_core.components.masks.MASK_KEY`). Envs bring masks in one of two conventions:

* a Dict observation key (PettingZoo classic: ``{"observation": ..., "action_mask": ...}``):
  used as it is; under another name it is renamed to ``action_mask``;
* an ``action_masks()`` method (sb3-contrib's MaskablePPO convention): :class:`ActionMasksObservation`
  calls it after every reset and step and puts its answer beside the observation,
  ``{"observation": obs, "action_mask": mask}`` (a Dict observation gets the key added).

``env.action_mask`` names the source: a key, or ``"action_masks()"`` (any method name with ``()``);
unset (null), it is detected: an ``action_mask`` key, or else an ``action_masks`` method (an env
with both is read from its key, as it is). The mask then travels with the observation through the vector envs
(each copy is wrapped, so a finished episode's final observation has its own mask), the env runner,
replay and rollouts, evaluation and export.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from rlgraph_core.components.masks import MASK_KEY
from rlgraph_core.errors import ConfigError

__all__ = ["ActionMasksObservation", "RenamedMaskKey", "mask_wrapper", "with_action_mask"]

#: The key of the env's own observation when :class:`ActionMasksObservation` wraps a non-Dict one.
OBSERVATION_KEY = "observation"


def _mask_size(action_space: gym.Space) -> int:
    if isinstance(action_space, gym.spaces.Discrete):
        return int(action_space.n)
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        return int(np.sum(action_space.nvec))
    raise ConfigError(
        f"env.action_mask: the env has a legal-action mask, but its action space {str(action_space)[:80]} is "
        f"not Discrete or MultiDiscrete: masks apply to discrete actions only."
    )


class ActionMasksObservation(gym.ObservationWrapper):
    """Adds the env's ``action_masks()`` (or another method's) answer to every observation, under
    ``action_mask``, as int8 flags: sb3-contrib's convention turned into PettingZoo's.

    Args:
        env: the env (the method is found through its wrappers, ``env.get_wrapper_attr``).
        method: the method's name.
    """

    def __init__(self, env: gym.Env, method: str = "action_masks"):
        super().__init__(env)
        self._method = env.get_wrapper_attr(method)
        self._name = method
        self._size = size = _mask_size(env.action_space)
        self._episode_step = 0
        mask_space = gym.spaces.Box(0, 1, (size,), np.int8)
        inner = env.observation_space
        if isinstance(inner, gym.spaces.Dict):
            if MASK_KEY in inner.spaces:
                raise ConfigError(
                    f"env.action_mask: the observation already has a key '{MASK_KEY}' besides the env's "
                    f"{method}() method; name the one that holds the mask (env.action_mask: {MASK_KEY})."
                )
            self.observation_space = gym.spaces.Dict({**inner.spaces, MASK_KEY: mask_space})
        else:
            self.observation_space = gym.spaces.Dict({OBSERVATION_KEY: inner, MASK_KEY: mask_space})

    def reset(self, **kwargs):
        """Reset, counting the episode's steps from 0 (for the error of a bad mask)."""
        self._episode_step = 0
        return super().reset(**kwargs)

    def step(self, action):
        """Step, counting the episode's steps."""
        self._episode_step += 1
        return super().step(action)

    def observation(self, observation):
        """The observation with the env's current mask beside it."""
        mask = np.asarray(self._method(), dtype=np.int8).reshape(-1)
        if mask.size != self._size:
            when = "after reset" if self._episode_step == 0 else f"at step {self._episode_step} of the episode"
            raise ValueError(
                f"The env's {self._name}() returned {mask.size} flags {when}, but its action space "
                f"{str(self.env.action_space)[:80]} needs {self._size} (one per action; for MultiDiscrete the "
                f"flags of every sub-action, concatenated). Make {self._name}() match the action space."
            )
        if isinstance(observation, dict):
            return {**observation, MASK_KEY: mask}
        return {OBSERVATION_KEY: observation, MASK_KEY: mask}


class RenamedMaskKey(gym.ObservationWrapper):
    """Moves the mask from the Dict observation key ``key`` to ``action_mask``."""

    def __init__(self, env: gym.Env, key: str):
        super().__init__(env)
        self._key = key
        spaces = dict(env.observation_space.spaces)
        spaces[MASK_KEY] = spaces.pop(key)
        self.observation_space = gym.spaces.Dict(spaces)

    def observation(self, observation):
        """The observation with the mask under ``action_mask``."""
        out = dict(observation)
        out[MASK_KEY] = out.pop(self._key)
        return out


def _has_method(env: gym.Env, name: str) -> bool:
    try:
        return callable(env.get_wrapper_attr(name))
    except AttributeError:
        return False


def with_action_mask(env: gym.Env, source: str | None = None) -> gym.Env:
    """``env`` whose observations carry its legal-action mask under ``action_mask`` (``env`` itself
    when they already do, or when nothing is detected and ``source`` is None).

    Raises:
        ConfigError: ``source`` names a key the observation lacks or a method the env lacks.
    """
    space = env.observation_space
    keys = list(space.spaces) if isinstance(space, gym.spaces.Dict) else []
    if source is None:
        if MASK_KEY in keys:  # already where agents read it (an action_masks() method too is then unused)
            return env
        return ActionMasksObservation(env) if _has_method(env, "action_masks") else env
    if source.endswith("()"):
        method = source[:-2]
        if not method.isidentifier() or not _has_method(env, method):
            raise ConfigError(
                f"env.action_mask = '{source}': the env ({type(env.unwrapped).__name__}) has no method "
                f"'{method}' to call for its legal-action mask; name a method it has (sb3-contrib's is "
                f"'action_masks()') or a key of its Dict observation."
            )
        return ActionMasksObservation(env, method)
    if source not in keys:
        has = f"its keys are {keys}" if keys else f"it is a {type(space).__name__}, not a Dict"
        raise ConfigError(
            f"env.action_mask = '{source}' is not a key of the env's observation ({has}); name the key that "
            f"holds the legal-action mask (PettingZoo's is '{MASK_KEY}'), or 'action_masks()' for an env method."
        )
    return env if source == MASK_KEY else RenamedMaskKey(env, source)


def mask_wrapper(env_cfg: Any) -> Callable[[gym.Env], gym.Env]:
    """``env -> env`` for ``env_cfg.action_mask`` (a picklable callable, for async vector envs)."""
    return functools.partial(with_action_mask, source=getattr(env_cfg, "action_mask", None))
