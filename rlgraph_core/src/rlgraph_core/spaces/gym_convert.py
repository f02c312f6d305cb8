"""Conversion between rlgraph spaces and ``gymnasium.spaces`` (gymnasium imported lazily).

Mapping (gymnasium -> rlgraph):

* ``Box`` with a float dtype -> :class:`FloatBox`; integer dtype -> :class:`IntBox`
  (both inclusive, per-element bounds kept); bool dtype with bounds 0/1 ->
  :class:`BoolBox`.
* ``Discrete(n, start)`` -> :class:`Discrete`; ``MultiDiscrete(nvec, start)`` ->
  :class:`MultiDiscrete` (dtypes kept).
* ``MultiBinary(n)`` -> :class:`MultiBinary` (an int8 0/1 :class:`IntBox`
  subclass, so it converts back to ``MultiBinary`` rather than ``Box``).
* ``Dict`` -> :class:`Dict` (string keys only); ``Tuple`` -> :class:`Tuple`.

``to_gym`` is the inverse; rank flags (batch/time) have no gymnasium
counterpart and are dropped.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import Space, SpaceError
from .box import BoolBox, FloatBox, IntBox
from .containers import Dict, Tuple
from .discrete import Discrete, MultiBinary, MultiDiscrete

__all__ = ["from_gym", "to_gym"]

_SUPPORTED_GYM = "Box (float, int or bool dtype), Discrete, MultiDiscrete, MultiBinary, Dict and Tuple"


def _gym_spaces() -> Any:
    """Import ``gymnasium.spaces`` on demand with a clear error if it is missing."""
    try:
        import gymnasium.spaces as gym_spaces
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "Converting to/from gymnasium spaces requires the 'gymnasium' package; "
            "install it with `pip install gymnasium`."
        ) from exc
    return gym_spaces


def from_gym(gym_space: Any) -> Space:
    """Convert a ``gymnasium.spaces.Space`` into the equivalent rlgraph space.

    Raises:
        SpaceError: for gymnasium space types without an rlgraph equivalent
            (e.g. Text, Graph, Sequence, OneOf) or non-string Dict keys.
    """
    gs = _gym_spaces()
    if isinstance(gym_space, gs.Discrete):
        return Discrete(int(gym_space.n), start=int(gym_space.start), dtype=gym_space.dtype)
    if isinstance(gym_space, gs.MultiDiscrete):
        return MultiDiscrete(gym_space.nvec, start=gym_space.start, dtype=gym_space.dtype)
    if isinstance(gym_space, gs.MultiBinary):
        return MultiBinary(gym_space.shape)
    if isinstance(gym_space, gs.Box):
        return _from_gym_box(gym_space)
    if isinstance(gym_space, gs.Dict):
        text = [k for k, v in gym_space.spaces.items() if _is_text(gs, v)]
        if text:
            raise SpaceError(
                f"Cannot convert the gymnasium Dict {_short(gym_space)}: its key(s) {text} hold text, which no "
                f"network encodes. For MiniGrid add the image wrapper (env.wrappers: [{{type: minigrid_image}}], "
                f"minigrid.wrappers.ImgObsWrapper) to keep only the image; otherwise drop the key with "
                f"gymnasium.wrappers.FilterObservation."
            )
        for key in gym_space.spaces:
            if not isinstance(key, str):
                raise SpaceError(
                    f"Cannot convert a gymnasium Dict with key {key!r} of type "
                    f"{type(key).__name__}: rlgraph Dict spaces require string keys."
                )
        return Dict({k: from_gym(v) for k, v in gym_space.spaces.items()})
    if isinstance(gym_space, gs.Tuple):
        return Tuple([from_gym(s) for s in gym_space.spaces])
    raise SpaceError(
        f"Cannot convert {type(gym_space).__module__}.{type(gym_space).__name__} "
        f"({gym_space!r}) to an rlgraph space: supported gymnasium spaces are "
        f"{_SUPPORTED_GYM}."
    )


def _is_text(gs: Any, space: Any) -> bool:
    """Whether ``space`` holds strings: gymnasium's ``Text`` or MiniGrid's ``MissionSpace``."""
    return isinstance(space, gs.Text) or type(space).__name__ == "MissionSpace"


def _short(space: Any, limit: int = 120) -> str:
    """``repr(space)``, cut to ``limit`` characters."""
    text = repr(space)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _from_gym_box(box: Any) -> Space:
    """Convert a gymnasium ``Box`` according to its dtype kind."""
    kind = box.dtype.kind
    if kind == "f":
        return FloatBox(low=box.low, high=box.high, shape=box.shape, dtype=box.dtype)
    if kind in "iu":
        return IntBox(low=box.low, high=box.high, shape=box.shape, dtype=box.dtype)
    if kind == "b":
        if np.all(box.low == 0) and np.all(box.high == 1):
            return BoolBox(shape=box.shape)
        raise SpaceError(
            f"Cannot convert the bool gymnasium Box {box!r}: only unconstrained bool "
            f"boxes (low=False, high=True) map to rlgraph's BoolBox."
        )
    raise SpaceError(  # pragma: no cover - gymnasium rejects other dtypes itself
        f"Cannot convert a gymnasium Box with dtype {box.dtype}: expected a float, integer or bool dtype."
    )


def to_gym(space: Space) -> Any:
    """Convert an rlgraph space into the equivalent ``gymnasium.spaces.Space``.

    Batch/time rank flags are dropped (gymnasium has no notion of them).

    Raises:
        SpaceError: if ``space`` is not an rlgraph space.
    """
    gs = _gym_spaces()
    # Subclasses of IntBox first.
    if isinstance(space, Discrete):
        return gs.Discrete(space.n, start=space.start, dtype=space.dtype)
    if isinstance(space, MultiDiscrete):
        return gs.MultiDiscrete(np.array(space.nvec), dtype=space.dtype, start=np.array(space.start))
    if isinstance(space, MultiBinary):
        shape = space.shape
        return gs.MultiBinary(shape[0] if len(shape) == 1 else shape)
    if isinstance(space, (FloatBox, IntBox)):
        return gs.Box(low=np.array(space.low), high=np.array(space.high), shape=space.shape, dtype=space.dtype)
    if isinstance(space, BoolBox):
        return gs.Box(low=0, high=1, shape=space.shape, dtype=np.bool_)
    if isinstance(space, Dict):
        return gs.Dict({k: to_gym(v) for k, v in space.items()})
    if isinstance(space, Tuple):
        return gs.Tuple([to_gym(s) for s in space])
    raise SpaceError(
        f"Cannot convert {space!r} of type {type(space).__name__} to gymnasium: "
        f"expected one of FloatBox, IntBox, BoolBox, Discrete, MultiDiscrete, "
        f"MultiBinary, Dict or Tuple."
    )
