"""Categorical spaces: :class:`Discrete`, :class:`MultiDiscrete` and :class:`MultiBinary`.

All three are :class:`IntBox` subclasses (so integer-handling code can treat
them uniformly) but compare unequal to a plain IntBox with the same bounds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlgraph_core.readonly import ReadOnly
from .base import SpaceError, encode_array
from .box import IntBox, _readonly
from .leaf import normalize_shape

__all__ = ["Discrete", "MultiDiscrete", "MultiBinary"]


def _positive_int(x: Any, what: str) -> int:
    """Return ``x`` as a positive int or raise SpaceError."""
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x <= 0:
        raise SpaceError(f"Invalid {what} {x!r}: expected a positive integer.")
    return int(x)


class Discrete(IntBox):
    """A scalar integer in ``[start, start + n)``.

    Args:
        n: Number of categories (positive).
        start: Smallest value (default 0).
        dtype: Integer dtype of values (default ``"int64"``; kept configurable so
            gymnasium ``Discrete`` spaces with other dtypes round-trip).

    ``flat_dim`` is 1 (values are indices, not one-hot vectors).
    """

    _json_registered = True

    def __init__(self, n: int, start: int = 0, dtype: Any = "int64") -> None:
        n = _positive_int(n, "Discrete n")
        if isinstance(start, bool) or not isinstance(start, (int, np.integer)):
            raise SpaceError(f"Invalid Discrete start {start!r}: expected an integer.")
        super().__init__(low=int(start), high=int(start) + n - 1, shape=(), dtype=dtype)
        self._n = n
        self._start = int(start)

    n = ReadOnly[int]("_n", "Number of categories.")
    start = ReadOnly[int]("_start", "Smallest value.")
    num_categories = ReadOnly[int]("_n", "Alias of :attr:`n`.")

    def _repr_parts(self) -> list[str]:
        """``n``, plus ``start``/``dtype`` when not the default."""
        start = [f"start={self._start}"] if self._start != 0 else []
        return [f"n={self._n}", *start, *self._dtype_repr_parts()]

    def to_json(self) -> dict:
        """Type, dtype, n, start and rank flags."""
        d = self._base_json()
        d["n"] = self._n
        d["start"] = self._start
        return d

    @classmethod
    def _from_json_fields(cls, d: dict) -> "Discrete":
        """Rebuild from :meth:`to_json` output."""
        return cls(int(d["n"]), start=int(d["start"]), dtype=d["dtype"])._apply_json_flags(d)


class MultiDiscrete(IntBox):
    """An integer array whose element ``i`` lies in ``[start[i], start[i] + nvec[i])``.

    Args:
        nvec: Positive category counts; its shape is the value shape.
        start: Smallest values (scalar or array broadcastable to ``nvec``;
            default 0).
        dtype: Integer dtype of values (default ``"int64"``, configurable for
            lossless gymnasium round-trips).
    """

    _json_registered = True

    def __init__(self, nvec: Any, start: Any = None, dtype: Any = "int64") -> None:
        nvec_a = np.asarray(nvec)
        if nvec_a.dtype.kind not in "iu" or np.any(nvec_a <= 0):
            raise SpaceError(f"Invalid MultiDiscrete nvec {nvec!r}: expected an array of positive integers.")
        start_a = np.zeros(nvec_a.shape, np.int64) if start is None else np.asarray(start)
        if start_a.dtype.kind not in "iu":
            raise SpaceError(f"Invalid MultiDiscrete start {start!r}: expected integers.")
        try:
            start_a = np.broadcast_to(start_a, nvec_a.shape)
        except ValueError:
            raise SpaceError(
                f"MultiDiscrete start of shape {start_a.shape} does not fit nvec of shape "
                f"{nvec_a.shape}: expected a scalar or an array of the same shape."
            ) from None
        high = start_a.astype(object) + nvec_a.astype(object) - 1
        super().__init__(low=start_a, high=high, shape=nvec_a.shape, dtype=dtype)
        self._nvec = _readonly(nvec_a.astype(self._dtype))
        self._start = _readonly(start_a.astype(self._dtype))

    nvec = ReadOnly[np.ndarray]("_nvec", "Number of categories per element (read-only array).")
    start = ReadOnly[np.ndarray]("_start", "Smallest value per element (read-only array).")

    def _repr_parts(self) -> list[str]:
        """``nvec``, plus ``start``/``dtype`` when not the default."""
        start = [f"start={self._start.tolist()}"] if np.any(self._start != 0) else []
        return [f"nvec={self._nvec.tolist()}", *start, *self._dtype_repr_parts()]

    def to_json(self) -> dict:
        """Type, shape, dtype, nvec, start and rank flags."""
        d = self._base_json()
        d["nvec"] = self._nvec.tolist()
        d["start"] = encode_array(self._start)
        return d

    @classmethod
    def _from_json_fields(cls, d: dict) -> "MultiDiscrete":
        """Rebuild from :meth:`to_json` output."""
        nvec = np.asarray(d["nvec"], dtype=d["dtype"]).reshape(tuple(d["shape"]))
        return cls(nvec, start=np.asarray(d["start"], dtype=d["dtype"]), dtype=d["dtype"])._apply_json_flags(d)


class MultiBinary(IntBox):
    """An array of 0/1 flags with dtype ``int8`` (the counterpart of gymnasium's MultiBinary).

    Equivalent in values to ``IntBox(0, 1, shape, dtype="int8")`` but a distinct
    type, so that ``from_gym``/``to_gym`` round-trip gymnasium ``MultiBinary``
    spaces without confusing them with an int8 ``Box(0, 1)``.

    Args:
        shape: Value shape, an int ``n`` (shape ``(n,)``) or a tuple.
    """

    _json_registered = True

    def __init__(self, shape: Any) -> None:
        shape = normalize_shape(shape, "MultiBinary shape")
        super().__init__(low=0, high=1, shape=shape, dtype=np.int8)

    def _repr_parts(self) -> list[str]:
        """Just the shape."""
        return [f"shape={self._shape}"]

    def to_json(self) -> dict:
        """Type, shape, dtype and rank flags."""
        return self._base_json()

    @classmethod
    def _from_json_fields(cls, d: dict) -> "MultiBinary":
        """Rebuild from :meth:`to_json` output."""
        return cls(tuple(d["shape"]))._apply_json_flags(d)
