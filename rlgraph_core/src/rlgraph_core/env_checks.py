"""Checks at the door: every observation and reward an environment returns is a finite number.

A NaN or an infinity that reaches an agent spreads through every weight in one update and
ruins every later checkpoint, silently. :class:`CheckedEnv` wraps each environment rlgraph
makes (training and evaluation) and raises :class:`~rlgraph_core.errors.EnvDataError` at the
first bad value, naming the environment, the step and the field: a reward that is not a real
number (``None``, the string ``"1.0"``: gymnasium's vector envs would silently turn these into
NaN or 1.0), a non-finite reward, a non-numeric observation, or a NaN/inf in an observation.

Some environments legitimately leave unused observation dimensions at ``inf``;
``env.allow_nonfinite_obs: true`` turns the observation check off for them (rewards are always
checked: a non-finite reward is never meaningful).

Hand-written rather than gymnasium's ``PassiveEnvChecker``: that one only warns, and only on the
first step.
"""

from __future__ import annotations

import math
import numbers
from copy import deepcopy
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import concatenate, iterate

from rlgraph_core.errors import EnvDataError

__all__ = [
    "CheckedEnv",
    "CheckedSyncVectorEnv",
    "batch_ok",
    "dict_step_ok",
    "observation_problem",
    "reward_problem",
    "step_ok",
]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:50] + "..."


#: reward types that are real numbers as they are (``bool`` is not among them): checked by
#: ``math.isfinite`` alone, the common case of every env step
_FLOAT_TYPES = frozenset({float, np.float64, np.float32, np.float16})
_INT_TYPES = frozenset({int, np.int64, np.int32})
_REAL_TYPES = _FLOAT_TYPES | _INT_TYPES


def reward_problem(reward: Any) -> str | None:
    """Why ``reward`` is not a finite real number, or None."""
    kind = type(reward)
    if kind in _INT_TYPES or (kind in _FLOAT_TYPES and math.isfinite(reward)):  # every step's case: ~0.1 us
        return None
    if isinstance(reward, np.ndarray) and reward.shape == ():
        reward = reward[()]
    if isinstance(reward, (bool, np.bool_)) or not isinstance(reward, (numbers.Real, np.integer, np.floating)):
        return f"is {_short(reward)} of type {type(reward).__name__}, not a number"
    if not np.isfinite(reward):
        return f"is {float(reward)}"
    return None


def step_ok(obs: Any, reward: Any, float_shape: tuple | None) -> bool:
    """Whether a step's ``obs`` and ``reward`` pass every check of :class:`CheckedEnv` in its
    every-step case, in one expression: ``obs`` a float array of the declared ``float_shape``
    (None: no such case) whose values are finite, ``reward`` a finite real number. False means
    only "take the full checks" (which name the problem, if there is one)."""
    kind = type(reward)
    return (
        type(obs) is np.ndarray
        and obs.shape == float_shape
        and obs.dtype.kind == "f"
        and (kind in _INT_TYPES or (kind in _FLOAT_TYPES and math.isfinite(reward)))
        and math.isfinite(np.vdot(obs, obs))
    )


def dict_step_ok(obs: Any, reward: Any, layout: tuple | None) -> bool:
    """:func:`step_ok` for a Dict observation of Boxes (a masked env's ``{"observation",
    "action_mask"}``): ``layout`` holds ``(key, declared shape, declared float)`` per key (None: no
    such case). True when ``obs`` is a dict of exactly those keys, each an array of its declared
    shape, the float ones finite and the integer ones of an integer or bool dtype, and ``reward`` a
    finite real number; False means only "take the full checks"."""
    if layout is None or type(obs) is not dict or len(obs) != len(layout):
        return False
    kind = type(reward)
    if not (kind in _INT_TYPES or (kind in _FLOAT_TYPES and math.isfinite(reward))):
        return False
    for key, shape, is_float in layout:
        value = obs.get(key)
        if type(value) is not np.ndarray or value.shape != shape:
            return False
        if is_float:
            if value.dtype.kind != "f" or not math.isfinite(np.vdot(value, value)):
                return False
        elif value.dtype.kind not in "biu":
            return False
    return True


def observation_problem(obs: Any, allow_nonfinite: bool = False, path: str = "observation") -> str | None:
    """Why ``obs`` (an array, or a dict/tuple of them) is not numeric and finite, or None."""
    if isinstance(obs, dict):
        for key, value in obs.items():
            problem = observation_problem(value, allow_nonfinite, f"{path}[{key!r}]")
            if problem:
                return problem
        return None
    if isinstance(obs, tuple):
        for i, value in enumerate(obs):
            problem = observation_problem(value, allow_nonfinite, f"{path}[{i}]")
            if problem:
                return problem
        return None
    array = obs if isinstance(obs, np.ndarray) else np.asarray(obs)
    kind = array.dtype.kind
    if kind == "f" and not allow_nonfinite and math.isfinite(np.vdot(array, array)):
        # The every-step case in one BLAS call (about 3x cheaper than isfinite + all): a sum of
        # squares is finite only if every value is. One that is not (a NaN or inf, or finite
        # values so large their squares overflow) goes through the exact check below.
        return None
    if kind not in "biuf":
        return f"field '{path}' is {_short(obs)} (dtype {array.dtype}), not numeric"
    if array.dtype.kind == "f" and not allow_nonfinite:
        bad = ~np.isfinite(array)
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            return (
                f"field '{path}' holds {array[where]} at index {where} "
                f"({int(bad.sum())} of {array.size} values are NaN or infinite)"
            )
    return None


class CheckedEnv(gym.Wrapper):
    """Raise :class:`EnvDataError` when the wrapped env returns a bad observation or reward.

    Args:
        env: the environment.
        env_id: the config's ``env.id`` (named in errors).
        allow_nonfinite_obs: accept NaN/inf in observations (``env.allow_nonfinite_obs``).
    """

    def __init__(self, env: gym.Env, env_id: str, allow_nonfinite_obs: bool = False):
        super().__init__(env)
        self._env_id = env_id
        self._allow = allow_nonfinite_obs
        self._steps = 0
        self._episode_steps = 0
        #: the current episode's start, noted at each reset: ``{"seed": int}`` or ``{"rng": bit-generator state}``
        self.episode_start: dict | None = None
        #: (field, key or None, declared shape, declared dtype) of each Box the observation space declares
        self._boxes = _declared_boxes(getattr(env, "observation_space", None))
        #: the declared shape of a float Box observation that is checked for finiteness, which
        #: :meth:`step` passes in one expression when it is met as declared (else None)
        self._float_shape = None
        if len(self._boxes) == 1 and self._boxes[0][1] is None and self._boxes[0][3].kind == "f" and not self._allow:
            self._float_shape = self._boxes[0][2]
        #: the (key, shape, float) of each Box of a Dict observation space made of Boxes only, which
        #: :meth:`step` passes in one loop when every key is met as declared (else None)
        self._layout = None
        space = getattr(env, "observation_space", None)
        if isinstance(space, gym.spaces.Dict) and len(self._boxes) == len(space.spaces) and not self._allow:
            self._layout = tuple((key, shape, dtype.kind == "f") for _, key, shape, dtype in self._boxes)

    def _shape_problem(self, obs: Any) -> str | None:
        """Why ``obs`` does not have the shape (or, for integer images, the dtype kind) its space
        declares, or None: a few attribute comparisons per step (a changed shape would reach the
        vector env's batch as a traceback, a float image would be cast to uint8 silently)."""
        for field, key, shape, dtype in self._boxes:
            value = obs if key is None else obs.get(key) if isinstance(obs, dict) else None
            if not isinstance(value, np.ndarray):
                continue  # non-arrays are converted and checked by observation_problem
            if value.shape != shape:
                return f"field '{field}' has shape {value.shape}, but the env's observation_space declares {shape}"
            if dtype.kind in "biu" and value.dtype.kind == "f":
                return (
                    f"field '{field}' is {value.dtype}, but the env's observation_space declares {dtype} (its values "
                    f"would be cut to {dtype} silently)"
                )
        return None

    def _fail(self, what: str, problem: str, hint: str | None = None) -> EnvDataError:
        hint = hint or "Fix the environment (or a wrapper) so that it returns finite numbers" + (
            "; if it legitimately emits inf in observation dimensions the agent does not use, set "
            "env.allow_nonfinite_obs: true (rewards are checked regardless)."
            if what == "observation" and not self._allow
            else "."
        )
        return EnvDataError(
            f"Environment '{self._env_id}' returned a bad {what} at env step {self._steps} (step "
            f"{self._episode_steps} of its episode): {problem}. Nothing of it reached the agent, so no "
            f"weight or checkpoint holds it. {hint}"
        )

    def reset(self, **kwargs):
        seed = kwargs.get("seed")
        # Where this episode's randomness starts (its reset seed, or the generator before the reset
        # draws): a resumed run replays the episode in progress from it (execution.env_resume).
        self.episode_start = {"seed": int(seed)} if seed is not None else {"rng": self.np_random.bit_generator.state}
        obs, info = self.env.reset(**kwargs)
        self._episode_steps = 0
        problem = observation_problem(obs, self._allow)
        if problem:
            raise self._fail("observation", f"the reset observation's {problem}")
        problem = self._shape_problem(obs)
        if problem:
            raise self._fail("observation", f"the reset observation's {problem}", _SPACE_HINT)
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._steps += 1
        self._episode_steps += 1
        if not (step_ok(obs, reward, self._float_shape) or dict_step_ok(obs, reward, self._layout)):
            self.check_step(obs, reward, self._steps, self._episode_steps)
        return obs, reward, terminated, truncated, info

    def check_step(self, obs: Any, reward: Any, steps: int, episode_steps: int) -> None:
        """Raise :class:`EnvDataError` if the wrapped env's step returned a bad ``obs`` or ``reward``;
        ``steps`` and ``episode_steps`` count that step (since this wrapper was made, and in its
        episode) and become this wrapper's counters. :class:`CheckedSyncVectorEnv` calls it for
        the steps it does not pass itself, having stepped the wrapped env directly."""
        self._steps, self._episode_steps = steps, episode_steps
        if step_ok(obs, reward, self._float_shape) or dict_step_ok(obs, reward, self._layout):
            return
        problem = reward_problem(reward)
        if problem:
            raise self._fail("reward", f"the reward {problem}")
        problem = observation_problem(obs, self._allow)
        if problem:
            raise self._fail("observation", problem)
        problem = self._shape_problem(obs)
        if problem:
            raise self._fail("observation", problem, _SPACE_HINT)


_SPACE_HINT = (
    "Fix the environment (or a wrapper) so that every observation has the shape and dtype its "
    "observation_space declares, or declare the space it really returns."
)


def batch_ok(obs: np.ndarray, rewards: np.ndarray) -> bool:
    """Whether a whole batch of float observations and the float64 rewards are finite, in two BLAS
    calls (a sum of squares is finite only if every value is; False means only "check each env")."""
    return math.isfinite(np.vdot(obs, obs)) and math.isfinite(np.vdot(rewards, rewards))


class CheckedSyncVectorEnv(gym.vector.SyncVectorEnv):
    """gymnasium's sync vector env (same-step autoreset) that runs :class:`CheckedEnv`'s checks itself.

    Every sub-env's outermost wrapper is a :class:`CheckedEnv` (its reset checks the reset
    observation and notes the episode start, as ever). A step calls the env beneath each
    CheckedEnv directly, so the check costs no Python frame per sub-env: where the observation
    space is one float Box, each sub-env's reward type and observation type and shape are
    compared inline and the finiteness of the whole batch (observations and rewards) is one
    :func:`batch_ok`; an ended episode's final observation and reward, and every step of any
    other space, go through :meth:`CheckedEnv.check_step` per sub-env. Anything the shortcut does
    not pass goes through that full check too, which names the env, the step and the field, so
    what is refused, and how, is what a CheckedEnv's own step refuses. The step is gymnasium's
    ``SAME_STEP`` loop otherwise unchanged (infos, final observations, copies), with empty info
    dicts skipped.

    Args: as :class:`gymnasium.vector.SyncVectorEnv`; ``autoreset_mode`` must be ``SAME_STEP``.
    """

    def __init__(self, env_fns, **kwargs):
        super().__init__(env_fns, **kwargs)
        if self.autoreset_mode != gym.vector.AutoresetMode.SAME_STEP:
            raise ValueError(f"CheckedSyncVectorEnv steps with SAME_STEP autoreset only, not {self.autoreset_mode}")
        unchecked = [i for i, env in enumerate(self.envs) if not isinstance(env, CheckedEnv)]
        if unchecked:
            raise TypeError(f"CheckedSyncVectorEnv needs a CheckedEnv outermost on every sub-env; not on {unchecked}")
        self._checked: list[CheckedEnv] = list(self.envs)  # type: ignore[arg-type]
        self._inner = [env.env for env in self._checked]
        shapes = {env._float_shape for env in self._checked}
        #: the float Box shape every sub-env declares, checked by the shortcut (None: per-env checks)
        self._fast_shape = shapes.pop() if len(shapes) == 1 else None
        self._plain_actions = isinstance(
            self.action_space, (gym.spaces.Box, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
        )
        self._steps = 0
        #: per sub-env, ``_steps`` when its episode began (its steps in the episode, for messages)
        self._began = [0] * self.num_envs

    def reset(self, *, seed=None, options=None):
        result = super().reset(seed=seed, options=options)
        self._began = [self._steps] * self.num_envs
        return result

    def step(self, actions):
        self._steps = steps = self._steps + 1
        began, checked, env_obs, fast = self._began, self._checked, self._env_obs, self._fast_shape
        rewards, terminations, truncations = [], [], []
        infos: dict[str, Any] = {}
        if self._plain_actions and type(actions) is np.ndarray:
            actions_iter = iter(actions)  # what gymnasium's iterate gives for a Box / MultiDiscrete / MultiBinary
        else:
            actions_iter = iterate(self.action_space, actions)
        for i, (action, env) in enumerate(zip(actions_iter, self._inner, strict=True)):
            obs, reward, terminated, truncated, info = env.step(action)
            done = terminated or truncated
            if (
                fast is None
                or done
                or type(reward) not in _REAL_TYPES
                or type(obs) is not np.ndarray
                or obs.shape != fast
                or obs.dtype.kind != "f"
            ):
                checked[i].check_step(obs, reward, steps, steps - began[i])
            env_obs[i] = obs
            rewards.append(reward)
            terminations.append(terminated)
            truncations.append(truncated)
            if done:
                infos = self._add_info(infos, {"final_obs": obs, "final_info": info}, i)
                env_obs[i], info = checked[i].reset()
                began[i] = steps
            if info:
                infos = self._add_info(infos, info, i)
        # Fresh arrays each step (gymnasium writes into kept ones, then returns copies of them).
        self._rewards = np.array(rewards, np.float64)
        self._terminations = np.array(terminations, np.bool_)
        self._truncations = np.array(truncations, np.bool_)
        self._observations = concatenate(self.single_observation_space, env_obs, self._observations)
        if fast is not None and not batch_ok(self._observations, self._rewards):
            for i, env in enumerate(checked):  # ended episodes' rows were checked above (reset rows by the reset)
                if steps - began[i]:
                    env.check_step(env_obs[i], rewards[i], steps, steps - began[i])
        self._autoreset_envs = self._terminations | self._truncations
        obs_out = self._observations
        if self.copy:
            obs_out = obs_out.copy() if type(obs_out) is np.ndarray else deepcopy(obs_out)
        return obs_out, self._rewards, self._terminations, self._truncations, infos


def _declared_boxes(space) -> list[tuple[str, Any, tuple, np.dtype]]:
    """(field, Dict key or None, shape, dtype) of each Box leaf of ``space`` (a Box, or a Dict of them)."""
    if isinstance(space, gym.spaces.Box):
        return [("observation", None, tuple(space.shape), np.dtype(space.dtype))]
    if isinstance(space, gym.spaces.Dict):
        return [
            (f"observation[{key!r}]", key, tuple(sub.shape), np.dtype(sub.dtype))
            for key, sub in space.spaces.items()
            if isinstance(sub, gym.spaces.Box)
        ]
    return []
