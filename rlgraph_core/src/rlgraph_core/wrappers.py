"""Environment wrappers by registry name: the config's ``env.wrappers`` list.

``env.wrappers`` is an ordered list of ``{type: NAME, ...settings}``; each entry is validated by
the settings model registered for ``NAME`` (the ``rlgraph_wrappers`` hook, so plugins add
wrappers the way they add every other part; :mod:`rlgraph_core.config.wrappers` validates and
resolves them) and applied in order, innermost first, to every
environment a run makes (each copy of the vector env, and the evaluation env).

The built-ins are thin adapters of the field's own wrappers, never re-implementations:
gymnasium's ``AtariPreprocessing``, ``FrameStackObservation``, ``ResizeObservation``,
``GrayscaleObservation``, ``MaxAndSkipObservation``, ``ClipReward``, ``FlattenObservation``,
``FilterObservation``, ``TimeLimit``, ``TransformObservation`` (``select_observation``),
``RescaleObservation``, and MiniGrid's ``ImgObsWrapper`` / ``FullyObsWrapper``.
A wrapper that needs an optional package names it (``requires``); a missing one is reported
with the pip command of the rlgraph-core extra that brings it, when the config is validated.

Evaluation measures the task itself, not the shaped task the agent trains on: a wrapper's
settings say what of it evaluation keeps (:meth:`WrapperSettings.for_evaluation`). A
training-only wrapper (``training_only = True``: ``clip_reward``) is left out of evaluation
envs, and ``atari_preprocessing`` evaluates whole games (``terminal_on_life_loss`` off), so
evaluation returns, the best checkpoint and ``train.target_return`` are game scores, as the
Atari papers and RL-Zoo report them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rlgraph_core.errors import ConfigError
from rlgraph_core.registration import entry_problem
from rlgraph_core.install_hints import extra_install_command

__all__ = [
    "EXTRAS",
    "WrapperSettings",
    "apply_wrappers",
    "missing_extra_message",
    "wrapper_entry_problem",
]

#: Optional packages of environment families -> the rlgraph-core extra that installs them.
EXTRAS = {
    "ale_py": "atari",
    "cv2": "atari",
    "minigrid": "minigrid",
    "popgym": "popgym",
    "mujoco": "mujoco",
    "Box2D": "box2d",
}


def missing_extra_message(module: str, what: str) -> str:
    """One paragraph: ``what`` needs the optional package ``module``, and the pip command for it."""
    extra = EXTRAS.get(module)
    cmd = extra_install_command(extra) if extra else f"pip install {module}"
    if module == "cv2":
        module = "cv2 (opencv-python-headless)"
    return f"{what} needs the optional package '{module}', which is not installed; install it with {cmd}."


def require_module(module: str, what: str):
    """Import the optional package ``module`` or raise a ConfigError naming the pip command."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.split(".")[0] != exc.name.split(".")[0]:
            raise
        raise ConfigError(missing_extra_message(module.split(".")[0], what)) from None


class WrapperSettings(BaseModel):
    """Base of every wrapper's settings: the registry ``type`` plus the wrapper's own fields.

    A wrapper is registered as ``{name: (factory, settings_model)}``; ``factory(env, settings)``
    returns the wrapped env. ``requires`` names an optional package the wrapper imports (checked
    when the config is validated). Unknown fields are errors.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False, frozen=False)

    #: Optional packages (import names) the wrapper needs; empty: gymnasium only.
    requires: ClassVar[tuple[str, ...]] = ()
    #: Whether the wrapper changes observations (False: it acts on actions, rewards or time only).
    changes_observation: ClassVar[bool] = True
    #: Whether the wrapper reads the screen from the emulator itself instead of the observation of
    #: the wrapper inside it (``atari_preprocessing``): observation wrappers placed before it
    #: would be bypassed, so validation refuses them there.
    reads_raw_screen: ClassVar[bool] = False
    #: The observation the wrapper takes (checked against the env before it is applied):
    #: "any", "array" (a Box), "image" (a Box of rank 2, or rank 3 with 1, 3 or 4 channels),
    #: "rgb" (an H x W x 3 Box) or "dict" (a Dict space).
    takes: ClassVar[str] = "any"
    #: True: the wrapper shapes training only (e.g. reward clipping) and evaluation envs leave it out.
    training_only: ClassVar[bool] = False

    type: str = Field(description="registry name of the wrapper, e.g. frame_stack")

    def for_evaluation(self) -> "WrapperSettings | None":
        """These settings as evaluation envs apply them: None leaves the wrapper out (the default
        for a ``training_only`` wrapper); a subclass returns a copy without its training-only parts."""
        return None if self.training_only else self

    def observation_problem(self, space: Any) -> str | None:
        """Why this wrapper cannot take the gymnasium observation ``space`` (by :attr:`takes`), or None."""
        return observation_kind_problem(self.takes, space)


def _describe_space(space: Any) -> str:
    """A short description of a gymnasium space (a Dict's keys with their kinds)."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Dict):
        keys = ", ".join(
            f"{k} ({'text' if isinstance(v, gym.spaces.Text) else type(v).__name__})" for k, v in space.spaces.items()
        )
        return f"a Dict observation ({keys})"
    if isinstance(space, gym.spaces.Box):
        return f"a Box of shape {tuple(space.shape)} ({space.dtype})"
    return f"a {type(space).__name__} observation"


#: What each kind of :attr:`WrapperSettings.takes` means, in words.
_TAKES = {
    "array": "an array observation (a Box)",
    "image": "an image (a Box of shape H x W or H x W x C)",
    "rgb": "an RGB image (a Box of shape H x W x 3)",
    "dict": "a Dict observation",
}


def observation_kind_problem(takes: str, space: Any) -> str | None:
    """Why ``space`` is not the kind of observation ``takes`` names (see :attr:`WrapperSettings.takes`), or None."""
    import gymnasium as gym

    if takes == "any":
        return None
    box = isinstance(space, gym.spaces.Box)
    fits = {
        "array": box,
        "image": box and (len(space.shape) == 2 or (len(space.shape) == 3 and space.shape[-1] in (1, 3, 4))),
        "rgb": box and len(space.shape) == 3 and space.shape[-1] == 3,
        "dict": isinstance(space, gym.spaces.Dict),
    }.get(takes, True)
    return None if fits else f"it takes {_TAKES[takes]}, but gets {_describe_space(space)}"


# ---------------------------------------------------------------------------- built-in settings


class AtariPreprocessingSettings(WrapperSettings):
    """gymnasium's ``AtariPreprocessing`` (Machado et al. 2018): no-op starts, frame skip with
    max-pooling, resize, grayscale. The base env must not skip frames itself: make Atari envs
    with ``env.kwargs: {frameskip: 1}`` when ``frame_skip`` > 1.

    ``terminal_on_life_loss`` ends the training episode at a lost life while the game goes on
    (:class:`~rlgraph_core.atari_wrappers.EpisodicLife`, Stable-Baselines3's ``EpisodicLifeEnv``),
    not gymnasium's option of the same name, which lets the next reset restart the whole game.
    ``fire_on_serve`` presses FIRE at a reset and after a lost life
    (:class:`~rlgraph_core.atari_wrappers.FireOnServe`); null: where the game has a FIRE action."""

    requires: ClassVar[tuple[str, ...]] = ("cv2",)
    reads_raw_screen: ClassVar[bool] = True
    type: Literal["atari_preprocessing"] = "atari_preprocessing"
    noop_max: int = Field(30, ge=0)
    frame_skip: int = Field(4, ge=1)
    screen_size: int = Field(84, gt=0)
    terminal_on_life_loss: bool = False
    grayscale_obs: bool = True
    grayscale_newaxis: bool = False
    scale_obs: bool = Field(False, description="False keeps uint8 frames (scaled inside the graph)")
    fire_on_serve: Optional[bool] = Field(
        None, description="press FIRE at a reset and after a lost life; null: where the game has a FIRE action"
    )

    def for_evaluation(self) -> "AtariPreprocessingSettings":
        """Evaluation plays whole games: a lost life ends a training episode only."""
        return self.model_copy(update={"terminal_on_life_loss": False})


class FrameStackSettings(WrapperSettings):
    """gymnasium's ``FrameStackObservation``; with ``channels_last`` the stack axis is moved last,
    so that 84x84 frames become one 84x84x4 image (NHWC, what the ``cnn`` network reads)."""

    takes: ClassVar[str] = "array"
    type: Literal["frame_stack"] = "frame_stack"
    stack_size: int = Field(4, ge=1)
    padding_type: Literal["reset", "zero"] = "reset"
    channels_last: bool = True


class ResizeSettings(WrapperSettings):
    """gymnasium's ``ResizeObservation`` (needs opencv-python, as gymnasium says when missing)."""

    requires: ClassVar[tuple[str, ...]] = ("cv2",)
    takes: ClassVar[str] = "image"
    type: Literal["resize"] = "resize"
    shape: tuple[int, int] = (84, 84)


class GrayscaleSettings(WrapperSettings):
    """gymnasium's ``GrayscaleObservation`` of an RGB image."""

    takes: ClassVar[str] = "rgb"
    type: Literal["grayscale"] = "grayscale"
    keep_dim: bool = False


class MaxAndSkipSettings(WrapperSettings):
    """gymnasium's ``MaxAndSkipObservation``: repeat each action ``skip`` times, max of the last two frames."""

    type: Literal["max_and_skip"] = "max_and_skip"
    skip: int = Field(4, ge=1)


class ClipRewardSettings(WrapperSettings):
    """gymnasium's ``ClipReward`` (Atari agents clip rewards to [-1, 1]); training only: evaluation
    envs leave it out, so evaluation returns are the unclipped score."""

    changes_observation: ClassVar[bool] = False
    training_only: ClassVar[bool] = True
    type: Literal["clip_reward"] = "clip_reward"
    min_reward: float = -1.0
    max_reward: float = 1.0


class FlattenSettings(WrapperSettings):
    """gymnasium's ``FlattenObservation``: any observation to a rank-1 vector (a Discrete one
    one-hot), its dtype kept, or cast by gymnasium's ``DtypeObservation`` with ``dtype: float32``
    (what the ``mlp``, ``lstm`` and ``gru`` networks take)."""

    type: Literal["flatten"] = "flatten"
    dtype: Optional[Literal["float32"]] = Field(None, description="cast the flat vector (default: dtype kept)")


class FilterObservationSettings(WrapperSettings):
    """gymnasium's ``FilterObservation``: keep only ``keys`` of a Dict observation."""

    takes: ClassVar[str] = "dict"
    type: Literal["filter_observation"] = "filter_observation"
    keys: list[str] = Field(min_length=1)


class SelectObservationSettings(WrapperSettings):
    """Keep only the entries ``indices`` of a rank-1 Box observation (gymnasium's
    ``TransformObservation`` with the Box's bounds cut alike): a partially observed task, e.g.
    CartPole without its velocities (``indices: [0, 2]``: cart position and pole angle)."""

    takes: ClassVar[str] = "array"
    type: Literal["select_observation"] = "select_observation"
    indices: list[int] = Field(min_length=1, description="entries of the observation vector to keep, in order")

    def observation_problem(self, space: Any) -> str | None:
        """A rank-1 Box whose length every index fits."""
        problem = super().observation_problem(space)
        if problem is not None:
            return problem
        if len(space.shape) != 1:
            return f"it takes a vector (a Box of rank 1), but gets {_describe_space(space)}"
        size = int(space.shape[0])
        bad = [i for i in self.indices if not -size <= i < size]
        if bad:
            return f"indices {bad[:5]} are outside the observation's {size} entries (0..{size - 1})"
        return None


class RescaleObservationSettings(WrapperSettings):
    """gymnasium's ``RescaleObservation``: map a Box observation's bounds affinely onto
    ``[min_obs, max_obs]`` (every bound must be finite): entries of very different scales to one
    range, e.g. CartPole's cart position (+-4.8) and pole angle (+-0.42 rad) to [-1, 1] after
    ``select_observation`` has dropped the unbounded velocities."""

    takes: ClassVar[str] = "array"
    type: Literal["rescale_observation"] = "rescale_observation"
    min_obs: float = Field(-1.0, description="where each entry's lower bound goes")
    max_obs: float = Field(1.0, description="where each entry's upper bound goes")

    @model_validator(mode="after")
    def _ordered(self) -> "RescaleObservationSettings":
        if not self.min_obs < self.max_obs:
            raise ValueError(f"min_obs ({self.min_obs}) must be below max_obs ({self.max_obs})")
        return self

    def observation_problem(self, space: Any) -> str | None:
        """A Box whose bounds are all finite."""
        import numpy as np

        problem = super().observation_problem(space)
        if problem is not None:
            return problem
        unbounded = np.flatnonzero(~(np.isfinite(space.low) & np.isfinite(space.high)).reshape(-1))
        if unbounded.size:
            return (
                f"its entries {unbounded[:5].tolist()} have infinite bounds ({_describe_space(space)}), which no "
                f"affine map takes to [{self.min_obs}, {self.max_obs}]; keep only the bounded entries first "
                f"(select_observation) or leave this wrapper out"
            )
        return None


class TimeLimitSettings(WrapperSettings):
    """gymnasium's ``TimeLimit``: truncate episodes after ``max_episode_steps``."""

    changes_observation: ClassVar[bool] = False
    type: Literal["time_limit"] = "time_limit"
    max_episode_steps: int = Field(gt=0)


class MiniGridImageSettings(WrapperSettings):
    """MiniGrid's ``ImgObsWrapper``: the partial-view image only (drops the text ``mission``)."""

    requires: ClassVar[tuple[str, ...]] = ("minigrid",)
    takes: ClassVar[str] = "dict"
    type: Literal["minigrid_image"] = "minigrid_image"


class MiniGridFullyObservableSettings(WrapperSettings):
    """MiniGrid's ``FullyObsWrapper``: the whole grid instead of the agent's view (put before
    ``minigrid_image``)."""

    requires: ClassVar[tuple[str, ...]] = ("minigrid",)
    takes: ClassVar[str] = "dict"
    type: Literal["minigrid_fully_observable"] = "minigrid_fully_observable"


# ---------------------------------------------------------------------------- built-in factories


def _atari_preprocessing(env, s: AtariPreprocessingSettings):
    from gymnasium.wrappers import AtariPreprocessing

    # subclasses of gymnasium.Wrapper: gymnasium is imported where a wrapper is applied, as above
    from rlgraph_core.atari_wrappers import EpisodicLife, FireOnServe, has_fire_action

    settings = s.model_dump(exclude={"type", "terminal_on_life_loss", "fire_on_serve"})
    env = AtariPreprocessing(env, terminal_on_life_loss=False, **settings)
    if s.fire_on_serve or (s.fire_on_serve is None and has_fire_action(env)):
        env = FireOnServe(env)
    if s.terminal_on_life_loss:
        env = EpisodicLife(env)
    return env


def _move_stack_axis_last(obs):
    import numpy as np

    return np.moveaxis(obs, 0, -1)


def _frame_stack(env, s: FrameStackSettings):
    import gymnasium as gym
    import numpy as np
    from gymnasium.wrappers import FrameStackObservation, TransformObservation

    env = FrameStackObservation(env, s.stack_size, padding_type=s.padding_type)
    space = env.observation_space
    if not s.channels_last or not isinstance(space, gym.spaces.Box):
        return env
    # gymnasium stacks on a new first axis; a transpose puts it where NHWC convolutions read channels
    moved = gym.spaces.Box(np.moveaxis(space.low, 0, -1), np.moveaxis(space.high, 0, -1), dtype=space.dtype)
    return TransformObservation(env, _move_stack_axis_last, moved)


def _resize(env, s: ResizeSettings):
    from gymnasium.wrappers import ResizeObservation

    return ResizeObservation(env, tuple(s.shape))


def _grayscale(env, s: GrayscaleSettings):
    from gymnasium.wrappers import GrayscaleObservation

    return GrayscaleObservation(env, keep_dim=s.keep_dim)


def _max_and_skip(env, s: MaxAndSkipSettings):
    from gymnasium.wrappers import MaxAndSkipObservation

    return MaxAndSkipObservation(env, skip=s.skip)


def _clip_reward(env, s: ClipRewardSettings):
    from gymnasium.wrappers import ClipReward

    return ClipReward(env, s.min_reward, s.max_reward)


def _flatten(env, s: FlattenSettings):
    from gymnasium.wrappers import DtypeObservation, FlattenObservation

    flat = FlattenObservation(env)
    return flat if s.dtype is None else DtypeObservation(flat, s.dtype)


def _filter_observation(env, s: FilterObservationSettings):
    from gymnasium.wrappers import FilterObservation

    return FilterObservation(env, list(s.keys))


def _select_observation(env, s: SelectObservationSettings):
    import gymnasium as gym
    import numpy as np
    from gymnasium.wrappers import TransformObservation

    space = env.observation_space
    idx = np.asarray(s.indices, np.int64)
    kept = gym.spaces.Box(space.low[idx], space.high[idx], dtype=space.dtype)
    return TransformObservation(env, lambda obs: np.asarray(obs)[idx], kept)


def _rescale_observation(env, s: RescaleObservationSettings):
    import numpy as np
    from gymnasium.wrappers import RescaleObservation

    return RescaleObservation(env, np.float32(s.min_obs), np.float32(s.max_obs))


def _time_limit(env, s: TimeLimitSettings):
    from gymnasium.wrappers import TimeLimit

    return TimeLimit(env, s.max_episode_steps)


def _minigrid_image(env, s: MiniGridImageSettings):
    wrappers = require_module("minigrid.wrappers", "The 'minigrid_image' wrapper")
    return wrappers.ImgObsWrapper(env)


def _minigrid_fully_observable(env, s: MiniGridFullyObservableSettings):
    wrappers = require_module("minigrid.wrappers", "The 'minigrid_fully_observable' wrapper")
    return wrappers.FullyObsWrapper(env)


#: The built-in wrappers: ``{name: (factory, settings_model)}`` (registered by rlgraph_core.builtins).
BUILTIN_WRAPPERS: dict[str, tuple[Callable, type[WrapperSettings]]] = {
    "atari_preprocessing": (_atari_preprocessing, AtariPreprocessingSettings),
    "frame_stack": (_frame_stack, FrameStackSettings),
    "resize": (_resize, ResizeSettings),
    "grayscale": (_grayscale, GrayscaleSettings),
    "max_and_skip": (_max_and_skip, MaxAndSkipSettings),
    "clip_reward": (_clip_reward, ClipRewardSettings),
    "flatten": (_flatten, FlattenSettings),
    "filter_observation": (_filter_observation, FilterObservationSettings),
    "select_observation": (_select_observation, SelectObservationSettings),
    "rescale_observation": (_rescale_observation, RescaleObservationSettings),
    "time_limit": (_time_limit, TimeLimitSettings),
    "minigrid_image": (_minigrid_image, MiniGridImageSettings),
    "minigrid_fully_observable": (_minigrid_fully_observable, MiniGridFullyObservableSettings),
}


# ---------------------------------------------------------------------------- registry


def wrapper_entry_problem(obj: Any) -> str | None:
    """Why a registered wrapper entry is not a ``(factory, settings_model)`` pair (None: it is)."""
    return entry_problem(obj, kind="wrapper", base=WrapperSettings, made_by="factory", plain=False)


def apply_wrappers(env, wrappers: Sequence[Callable]):
    """``env`` wrapped by each of ``wrappers`` in order (the first is innermost)."""
    for wrap in wrappers:
        env = wrap(env)
    return env
