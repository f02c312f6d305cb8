"""Argument checks shared by the memory modules, so every one words its errors the same way."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np


def check_int(name: str, value: object, minimum: int) -> int:
    """Return ``value`` as a Python int, or raise ValueError if it is not an integer >= ``minimum``.

    Booleans are rejected even though they are ints in Python, because ``capacity=True`` is
    always a mistake.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r} of type {type(value).__name__}.")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}.")
    return int(value)


def check_float(name: str, value: object, low: float, high: float | None = None, low_inclusive: bool = True) -> float:
    """Return ``value`` as a float, or raise ValueError if it is not a real number in range.

    The range is ``[low, high]`` (``(low, high]`` when ``low_inclusive`` is false); ``high=None``
    means unbounded above.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r} of type {type(value).__name__}.")
    value = float(value)
    lower_ok = value >= low if low_inclusive else value > low
    upper_ok = high is None or value <= high
    if not (np.isfinite(value) and lower_ok and upper_ok):
        bracket = "[" if low_inclusive else "("
        upper = "inf)" if high is None else f"{high}]"
        raise ValueError(f"{name} must lie in {bracket}{low}, {upper}, got {value}.")
    return value


def as_index_array(name: str, indices: object, limit: int, limit_name: str) -> np.ndarray:
    """Return ``indices`` as a 1-d int64 array, raising ValueError unless all lie in ``[0, limit)``.

    Scalars are accepted and become a one-element array. ``limit_name`` says in the error what
    the bound means (for example "capacity" or "the number of stored records").
    """
    arr = np.asarray(indices)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must be an array of integers, got dtype {arr.dtype}.")
    if arr.ndim > 1:
        raise ValueError(f"{name} must be a scalar or a 1-d array, got shape {arr.shape}.")
    arr = np.atleast_1d(arr).astype(np.int64, copy=False)
    if arr.size and (arr.min() < 0 or arr.max() >= limit):
        bad = arr[(arr < 0) | (arr >= limit)][0]
        raise ValueError(f"{name} must lie in [0, {limit}) where {limit} is {limit_name}; found {bad}.")
    return arr


def state_scalar(d: Mapping[str, Any], key: str, kind: str) -> Any:
    """Return ``d[key]`` as a Python value, raising ValueError unless it is a 0-d array.

    ``kind`` lists the accepted numpy dtype kinds: "iu" for integers, "f" for floats.
    """
    arr = np.asarray(d[key])
    if arr.ndim != 0 or arr.dtype.kind not in kind:
        want = "an integer" if kind == "iu" else "a float"
        raise ValueError(
            f"state_dict[{key!r}] must be a 0-d array holding {want}, got shape {arr.shape} and dtype {arr.dtype}."
        )
    return arr.item()
