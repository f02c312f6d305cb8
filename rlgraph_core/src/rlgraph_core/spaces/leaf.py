"""Common machinery of leaf (non-container) spaces: shape, dtype and value checks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlgraph_core.readonly import ReadOnly
from .base import Space, SpaceError, normalize_size, resolve_rng

__all__ = ["LeafSpace", "normalize_shape", "format_shape"]


def normalize_shape(shape: Any, what: str = "shape") -> tuple[int, ...]:
    """Validate ``shape`` (int or sequence of non-negative ints) and return it as a tuple."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise SpaceError(f"Invalid {what} {shape!r}: expected a tuple of non-negative ints (or a single int).")
    for d in shape:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
            raise SpaceError(f"Invalid {what} {shape!r}: expected a tuple of non-negative ints (or a single int).")
    return tuple(int(d) for d in shape)


def format_shape(dims: tuple) -> str:
    """Format a shape that may contain symbolic entries such as ``"batch"``."""
    inner = ", ".join(str(d) for d in dims)
    return f"({inner},)" if len(dims) == 1 else f"({inner})"


class LeafSpace(Space):
    """Base class of spaces whose values are single numpy arrays.

    Subclasses provide ``_accepted_kinds`` (numpy dtype kinds a value may have),
    ``_kind_description`` (for error messages) and ``_sample``; bounded spaces
    also override ``_bounds_problem``.

    Values are numpy arrays (or scalars/lists convertible to one). Python
    tuples and mappings are rejected, since they denote container values.
    """

    _accepted_kinds: str = ""
    _kind_description: str = ""

    def __init__(self, shape: tuple[int, ...], dtype: Any) -> None:
        super().__init__()
        self._shape = normalize_shape(shape)
        self._dtype = np.dtype(dtype)

    # ----------------------------------------------------------- properties
    shape = ReadOnly[tuple[int, ...]]("_shape", "Shape of one value, without batch/time axes.")

    @property
    def rank(self) -> int:
        """Number of axes of one value, without batch/time axes."""
        return len(self._shape)

    dtype = ReadOnly[np.dtype]("_dtype", "Numpy dtype of values.")

    @property
    def flat_dim(self) -> int:
        """Number of scalars in one value (1 for a scalar space)."""
        return int(np.prod(self._shape, dtype=np.int64))

    def get_shape(self, batch_size: int | None = None, time_size: int | None = None) -> tuple:
        """Full shape including batch/time axes (None where the size is unknown)."""
        return self._leading_dims(batch_size, time_size) + self._shape

    # ------------------------------------------------------------- values
    def sample(self, size: int | tuple | None = None, rng: np.random.Generator | None = None) -> np.ndarray:
        """Draw a random array of shape ``size + self.shape`` (see :meth:`Space.sample`)."""
        full = normalize_size(size) + self._shape
        out = self._sample(full, resolve_rng(rng))
        return np.asarray(out, dtype=self._dtype)

    def _sample(self, full_shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """Draw an array of ``full_shape`` (leading dims followed by ``self.shape``)."""
        raise NotImplementedError

    def zeros(self, size: int | tuple | None = None) -> np.ndarray:
        """Return ``np.zeros(size + self.shape, self.dtype)`` (not clipped to bounds)."""
        return np.zeros(normalize_size(size) + self._shape, dtype=self._dtype)

    def _bounds_problem(self, arr: np.ndarray, path: str) -> str | None:
        """Describe an out-of-bounds value, or return None (no bounds by default)."""
        return None

    def _mismatch(self, value: Any, path: str) -> str | None:
        """Describe why ``value`` does not fit (dtype kind, shape, bounds), or None."""
        if isinstance(value, (Mapping, tuple)):
            return (
                f"{path} is a {type(value).__name__}, but {self!r} expects a single "
                f"array of {self._kind_description} dtype."
            )
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError) as exc:
            return (
                f"{path} could not be converted to a numpy array ({exc}); {self!r} "
                f"expects an array of {self._kind_description} dtype."
            )
        if arr.dtype.kind not in self._accepted_kinds:
            return (
                f"{path} has dtype {arr.dtype}, but {self!r} expects "
                f"{self._kind_description} dtype (such as {self._dtype})."
            )
        lead = self._leading_dims("batch", "time")
        if arr.ndim != len(lead) + self.rank or arr.shape[len(lead) :] != self._shape:
            note = ""
            if lead:
                note = " where " + " and ".join(f"'{d}' may be any size" for d in lead)
            return f"{path} has shape {arr.shape}, but {self!r} expects shape {format_shape(lead + self._shape)}{note}."
        return self._bounds_problem(arr, path)

    # ----------------------------------------------------------- flattening
    def _flatten_into(self, prefix: str, out: dict) -> None:
        """A leaf occupies exactly one flat key (``prefix``)."""
        out[prefix] = self

    def _flatten_value_into(self, value: Any, prefix: str, out: dict) -> None:
        """Store ``value`` as an array under ``prefix``."""
        if isinstance(value, (Mapping, tuple)):
            raise SpaceError(
                f"Cannot flatten {_where(prefix)}: got a {type(value).__name__}, but {self!r} expects a single array."
            )
        out[prefix] = np.asarray(value)

    def _unflatten_from(self, flat: Any, prefix: str) -> Any:
        """Fetch the array stored under ``prefix``."""
        if prefix not in flat:
            raise SpaceError(f"Cannot unflatten: flat key {prefix!r} for {self!r} is missing; got keys {list(flat)}.")
        return flat[prefix]

    # ------------------------------------------------------------ misc
    def _base_json(self) -> dict:
        """JSON fields common to all leaves (type, shape, dtype and rank flags)."""
        d = {"type": type(self).__name__, "shape": list(self._shape), "dtype": self._dtype.name}
        d.update(self._flags_json())
        return d

    def _repr_parts(self) -> list[str]:
        """Fragments between the parentheses of ``repr`` (before the flags)."""
        return [f"shape={self._shape}"]

    def __repr__(self) -> str:
        """E.g. ``FloatBox(shape=(4,), low=-inf, high=inf, +batch)``."""
        parts = self._repr_parts() + self._flags_repr()
        return f"{type(self).__name__}({', '.join(parts)})"


def _where(prefix: str) -> str:
    """Human-readable location of a flat key."""
    return f"the value at flat key {prefix!r}" if prefix else "the value"
