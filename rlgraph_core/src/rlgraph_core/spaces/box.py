"""Box spaces: :class:`FloatBox`, :class:`IntBox` (inclusive bounds) and :class:`BoolBox`."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlgraph_core.readonly import ReadOnly
from .base import SpaceError, decode_array, encode_array, format_bound
from .leaf import LeafSpace, normalize_shape

__all__ = ["BoundedSpace", "FloatBox", "IntBox", "BoolBox"]


def _readonly(arr: np.ndarray) -> np.ndarray:
    """Return a contiguous read-only copy of ``arr``."""
    out = np.array(arr, copy=True)
    out.setflags(write=False)
    return out


def _resolve_bound_shape(cls_name: str, low: np.ndarray, high: np.ndarray, shape: Any) -> tuple:
    """Infer (shape None) or validate the value shape from the bound arrays."""
    try:
        bound_shape = np.broadcast_shapes(low.shape, high.shape)
    except ValueError:
        raise SpaceError(
            f"{cls_name} bounds have incompatible shapes low{low.shape} and "
            f"high{high.shape}: expected scalars or arrays broadcastable to one shape."
        ) from None
    if shape is None:
        return bound_shape
    shape = normalize_shape(shape)
    try:
        ok = np.broadcast_shapes(bound_shape, shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise SpaceError(
            f"{cls_name} bounds of shape low{low.shape}/high{high.shape} do not fit "
            f"shape={shape}: expected scalar bounds or bounds broadcastable to {shape}."
        )
    return shape


class BoundedSpace(LeafSpace):
    """Leaf space with element-wise inclusive bounds ``low <= x <= high``.

    ``low`` and ``high`` are read-only arrays of the full value shape and dtype.
    """

    def _init_bounds(self, low: np.ndarray, high: np.ndarray) -> None:
        """Broadcast, cast and store the bounds; require ``low <= high``."""
        low = np.broadcast_to(low, self._shape).astype(self._dtype)
        high = np.broadcast_to(high, self._shape).astype(self._dtype)
        if np.any(low > high):
            raise SpaceError(
                f"{type(self).__name__} has low > high (low={format_bound(low)}, "
                f"high={format_bound(high)}): expected low <= high element-wise."
            )
        self._low = _readonly(low)
        self._high = _readonly(high)

    low = ReadOnly[np.ndarray]("_low", "Inclusive lower bound, a read-only array of shape ``self.shape``.")
    high = ReadOnly[np.ndarray]("_high", "Inclusive upper bound, a read-only array of shape ``self.shape``.")

    def _bounds_problem(self, arr: np.ndarray, path: str) -> str | None:
        """Describe the first element outside ``[low, high]`` (NaN counts as outside)."""
        with np.errstate(invalid="ignore"):
            bad = ~((arr >= self._low) & (arr <= self._high))
        if not np.any(bad):
            return None
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        lead = arr.ndim - self.rank
        lo = self._low[index[lead:]]
        hi = self._high[index[lead:]]
        return (
            f"{path} has {int(np.count_nonzero(bad))} of {arr.size} elements outside "
            f"the bounds of {self!r}: e.g. element {str(arr[index])} at index {index} "
            f"is not within the inclusive range [{str(lo)}, {str(hi)}]."
        )

    def _eq_key(self) -> tuple:
        """Shape, dtype, bounds and rank flags."""
        return (
            self._shape,
            self._dtype.str,
            _bound_key(self._low),
            _bound_key(self._high),
            self._rank_flags(),
        )

    def _repr_parts(self) -> list[str]:
        """Shape, bounds and (if not the default) dtype."""
        return [
            f"shape={self._shape}",
            f"low={format_bound(self._low)}",
            f"high={format_bound(self._high)}",
            *self._dtype_repr_parts(),
        ]

    def _dtype_repr_parts(self) -> list[str]:
        """``["dtype=..."]`` where the dtype is not the class's default, else nothing."""
        return [] if self._dtype == np.dtype(self._default_dtype) else [f"dtype={self._dtype.name}"]

    _default_dtype: str = ""

    def to_json(self) -> dict:
        """Type, shape, dtype, bounds (scalar if uniform, ``"inf"`` for infinities) and flags."""
        d = self._base_json()
        d["low"] = encode_array(self._low)
        d["high"] = encode_array(self._high)
        return d


def _bound_key(arr: np.ndarray) -> tuple:
    """Hashable summary of a bound array (equal arrays give equal keys)."""
    if arr.size > 0 and np.all(arr == arr.flat[0]):
        return ("uniform", arr.flat[0].item())
    return ("array", tuple(arr.ravel().tolist()))


class FloatBox(BoundedSpace):
    """Floating-point box with inclusive (possibly infinite) bounds.

    Args:
        low: Lower bound, scalar or array (default ``-inf``).
        high: Upper bound, scalar or array (default ``+inf``).
        shape: Value shape; if None it is inferred from the bounds' shapes
            (scalar bounds give shape ``()``).
        dtype: A numpy floating dtype (default ``"float32"``).

    Sampling is uniform where both bounds are finite, normal where both are
    infinite, and an exponential offset from the finite bound otherwise.
    """

    _json_registered = True
    _accepted_kinds = "f"
    _kind_description = "a floating-point"
    _default_dtype = "float32"

    def __init__(self, low: Any = -np.inf, high: Any = np.inf, shape: Any = None, dtype: Any = "float32") -> None:
        dtype = _checked_dtype("FloatBox", dtype, "f", "a floating-point dtype such as 'float32'")
        low_a = _float_bound(low, "low", dtype)
        high_a = _float_bound(high, "high", dtype)
        super().__init__(_resolve_bound_shape("FloatBox", low_a, high_a, shape), dtype)
        self._init_bounds(low_a, high_a)

    def _sample(self, full_shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """Uniform / exponential / normal sampling depending on boundedness."""
        lo = self._low.astype(np.float64)
        hi = self._high.astype(np.float64)
        below, above = np.isfinite(lo), np.isfinite(hi)
        out = np.zeros(full_shape, dtype=np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            both = np.broadcast_to(below & above, full_shape)
            if np.any(both):
                u = rng.random(full_shape)
                out = np.where(both, lo * (1.0 - u) + hi * u, out)
            low_only = np.broadcast_to(below & ~above, full_shape)
            high_only = np.broadcast_to(~below & above, full_shape)
            if np.any(low_only) or np.any(high_only):
                e = rng.exponential(size=full_shape)
                out = np.where(low_only, lo + e, out)
                out = np.where(high_only, hi - e, out)
            neither = np.broadcast_to(~below & ~above, full_shape)
            if np.any(neither):
                out = np.where(neither, rng.standard_normal(full_shape), out)
        return np.clip(out, lo, hi).astype(self._dtype)

    @classmethod
    def _from_json_fields(cls, d: dict) -> "FloatBox":
        """Rebuild from :meth:`to_json` output."""
        space = cls(
            low=np.asarray(decode_array(d["low"]), dtype=np.float64),
            high=np.asarray(decode_array(d["high"]), dtype=np.float64),
            shape=tuple(d["shape"]),
            dtype=d["dtype"],
        )
        return space._apply_json_flags(d)


class IntBox(BoundedSpace):
    """Integer box with INCLUSIVE bounds ``low <= x <= high`` (like gymnasium's Box).

    Args:
        low: Lower bound, scalar or array of integers.
        high: Upper bound, scalar or array of integers.
        shape: Value shape; if None it is inferred from the bounds' shapes.
        dtype: A numpy integer dtype (default ``"int64"``); bounds must fit it.
    """

    _json_registered = True
    _accepted_kinds = "iu"
    _kind_description = "an integer"
    _default_dtype = "int64"

    def __init__(self, low: Any, high: Any, shape: Any = None, dtype: Any = "int64") -> None:
        dtype = _checked_dtype(type(self).__name__, dtype, "iu", "an integer dtype such as 'int64'")
        low_a = _int_bound(low, "low", dtype, type(self).__name__)
        high_a = _int_bound(high, "high", dtype, type(self).__name__)
        super().__init__(_resolve_bound_shape(type(self).__name__, low_a, high_a, shape), dtype)
        self._init_bounds(low_a, high_a)

    def _sample(self, full_shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """Uniform integers in ``[low, high]`` (inclusive)."""
        return rng.integers(self._low, self._high, size=full_shape, dtype=self._dtype, endpoint=True)

    @classmethod
    def _from_json_fields(cls, d: dict) -> "IntBox":
        """Rebuild from :meth:`to_json` output."""
        space = cls(
            low=np.asarray(d["low"], dtype=d["dtype"]),
            high=np.asarray(d["high"], dtype=d["dtype"]),
            shape=tuple(d["shape"]),
            dtype=d["dtype"],
        )
        return space._apply_json_flags(d)


class BoolBox(LeafSpace):
    """Boolean array space (dtype ``bool``); any value of the right shape fits.

    Args:
        shape: Value shape (default ``()``, a single bool).
    """

    _json_registered = True
    _accepted_kinds = "b"
    _kind_description = "a bool"

    def __init__(self, shape: Any = ()) -> None:
        super().__init__(normalize_shape(shape), np.bool_)

    def _sample(self, full_shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """Fair coin flips."""
        return rng.random(full_shape) < 0.5

    def _eq_key(self) -> tuple:
        """Shape and rank flags."""
        return (self._shape, self._rank_flags())

    def to_json(self) -> dict:
        """Type, shape, dtype and rank flags."""
        return self._base_json()

    @classmethod
    def _from_json_fields(cls, d: dict) -> "BoolBox":
        """Rebuild from :meth:`to_json` output."""
        return cls(shape=tuple(d["shape"]))._apply_json_flags(d)


# ---------------------------------------------------------------- helpers
def _checked_dtype(cls_name: str, dtype: Any, kinds: str, expected: str) -> np.dtype:
    """Parse ``dtype`` and require its kind to be one of ``kinds``."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise SpaceError(f"{cls_name} got an invalid dtype {dtype!r}: expected {expected}.") from None
    if dt.kind not in kinds:
        raise SpaceError(f"{cls_name} got dtype {dt}: expected {expected}.")
    return dt


def _float_bound(x: Any, name: str, dtype: np.dtype) -> np.ndarray:
    """Validate a FloatBox bound: real numbers, no NaN, within the dtype's range."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu":
        raise SpaceError(f"FloatBox {name}={x!r} has dtype {arr.dtype}: expected real numbers (scalar or array).")
    arr = arr.astype(np.float64)
    if np.any(np.isnan(arr)):
        raise SpaceError(f"FloatBox {name} contains NaN: expected numbers or +/-inf.")
    finite = arr[np.isfinite(arr)]
    limit = float(np.finfo(dtype).max)
    if finite.size and np.max(np.abs(finite)) > limit:
        raise SpaceError(
            f"FloatBox {name} has finite values beyond the {dtype} range (|x| <= {limit}): "
            f"expected values representable in {dtype}, or +/-inf."
        )
    return arr


def _int_bound(x: Any, name: str, dtype: np.dtype, cls_name: str) -> np.ndarray:
    """Validate an integer bound: finite integral numbers within the dtype's range."""
    try:
        arr = np.asarray(x)
    except OverflowError:
        arr = np.asarray(x, dtype=object)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise SpaceError(
                f"{cls_name} {name}={x!r} is not integral: expected finite integers (bounds are inclusive)."
            )
    elif arr.dtype.kind not in "iuO":
        raise SpaceError(f"{cls_name} {name}={x!r} has dtype {arr.dtype}: expected integers.")
    if arr.size:
        try:
            lo, hi = int(arr.min()), int(arr.max())
        except (TypeError, ValueError):
            raise SpaceError(f"{cls_name} {name}={x!r}: expected integers.") from None
        info = np.iinfo(dtype)
        if lo < info.min or hi > info.max:
            raise SpaceError(
                f"{cls_name} {name}={x!r} is outside the {dtype} range "
                f"[{info.min}, {info.max}]: expected bounds representable in {dtype}."
            )
    return arr.astype(dtype)
