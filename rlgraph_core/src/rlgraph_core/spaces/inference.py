"""Infer a space from an example value (:func:`space_from_value`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .base import Space, SpaceError
from .box import BoolBox, FloatBox, IntBox
from .containers import Dict, Tuple

__all__ = ["space_from_value"]


def space_from_value(value: Any, has_batch_rank: bool = False) -> Space:
    """Infer the space of ``value``.

    * mappings -> :class:`Dict`, tuples -> :class:`Tuple` (recursively);
    * anything else is converted with ``np.asarray`` (so lists are arrays):
      floats -> unbounded :class:`FloatBox`, integers -> :class:`IntBox` spanning
      the full range of the value's integer dtype (int64 min/max for int64),
      bools -> :class:`BoolBox`; the value's dtype is kept.

    With ``has_batch_rank=True`` the leading axis of every leaf is taken to be
    the batch axis: it is removed from the shape and the flag is set.
    """
    if isinstance(value, Mapping):
        return Dict({k: space_from_value(v, has_batch_rank) for k, v in value.items()})
    if isinstance(value, tuple):
        return Tuple([space_from_value(v, has_batch_rank) for v in value])
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise SpaceError(
            f"Cannot infer a space from {type(value).__name__} value ({exc}): expected "
            f"a numpy-convertible array, a dict or a tuple."
        ) from None
    shape = arr.shape
    if has_batch_rank:
        if arr.ndim == 0:
            raise SpaceError(
                f"Cannot infer a batched space from a scalar value {value!r}: expected "
                f"an array with a leading batch axis."
            )
        shape = shape[1:]
    kind = arr.dtype.kind
    if kind == "f":
        space: Space = FloatBox(shape=shape, dtype=arr.dtype)
    elif kind in "iu":
        info = np.iinfo(arr.dtype)
        space = IntBox(int(info.min), int(info.max), shape=shape, dtype=arr.dtype)
    elif kind == "b":
        space = BoolBox(shape=shape)
    else:
        raise SpaceError(
            f"Cannot infer a space from a value of dtype {arr.dtype}: expected a float, "
            f"integer or bool array (or a dict/tuple of them)."
        )
    return space.with_batch_rank(True) if has_batch_rank else space
