"""Abstract :class:`Space` base class, :class:`SpaceError` and shared helpers.

A space describes the structure, shape, dtype and value range of the data that
flows through an rlgraph graph (observations, actions, internal states). Spaces
are immutable values: every "modifying" method returns a new space.

Two optional leading axes can be attached to any space:

* a *batch rank* (``has_batch_rank``), and
* a *time rank* (``has_time_rank``), which follows the batch axis unless
  ``time_major`` is set, in which case the time axis comes first.

``Space.shape`` never includes these axes; ``Space.get_shape`` does.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

__all__ = ["SpaceError", "Space"]


class SpaceError(ValueError):
    """Raised when a space is ill-defined or a value does not fit a space.

    The message is a single paragraph naming what was wrong and what was
    expected instead.
    """


# Registry of concrete space classes by type name, used by ``Space.from_json``.
_SPACE_TYPES: dict[str, type["Space"]] = {}


class Space:
    """Abstract base class of all spaces (leaf spaces and containers).

    Subclasses must implement the abstract methods below. Instances carry three
    flags describing optional leading axes of values: ``has_batch_rank``,
    ``has_time_rank`` and ``time_major``.
    """

    #: Whether the class is a concrete space that ``from_json`` can rebuild.
    _json_registered: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Register concrete subclasses (those with ``_json_registered``) by name."""
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("_json_registered", False):
            _SPACE_TYPES[cls.__name__] = cls

    def __init__(self) -> None:
        self._has_batch_rank = False
        self._has_time_rank = False
        self._time_major = False

    # ------------------------------------------------------------------ ranks
    @property
    def has_batch_rank(self) -> bool:
        """Whether values carry a leading batch axis (of any size)."""
        return self._has_batch_rank

    @property
    def has_time_rank(self) -> bool:
        """Whether values carry a time axis (of any size)."""
        return self._has_time_rank

    @property
    def time_major(self) -> bool:
        """If True the time axis precedes the batch axis; only meaningful with a time rank."""
        return self._time_major

    def with_batch_rank(self, flag: bool = True) -> "Space":
        """Return a copy of this space with the batch-rank flag set to ``flag``."""
        new = copy.copy(self)
        new._has_batch_rank = bool(flag)
        return new

    def with_time_rank(self, flag: bool = True, time_major: bool = False) -> "Space":
        """Return a copy with the time-rank flag set to ``flag``.

        ``time_major`` is only kept when ``flag`` is True.
        """
        new = copy.copy(self)
        new._has_time_rank = bool(flag)
        new._time_major = bool(flag) and bool(time_major)
        return new

    def _rank_flags(self) -> tuple[bool, bool, bool]:
        """Return ``(has_batch_rank, has_time_rank, time_major)``."""
        return (self.has_batch_rank, self.has_time_rank, self.time_major)

    def _leading_dims(self, batch_size: Any = None, time_size: Any = None) -> tuple:
        """Return the leading (batch/time) dims for this space's flags."""
        dims: list[Any] = []
        if self.has_batch_rank:
            dims.append(batch_size)
        if self.has_time_rank:
            if self.time_major:
                dims.insert(0, time_size)
            else:
                dims.append(time_size)
        return tuple(dims)

    @property
    def num_leading_dims(self) -> int:
        """Number of leading batch/time axes a value of this space carries (0, 1 or 2)."""
        return int(self.has_batch_rank) + int(self.has_time_rank)

    def _flags_repr(self) -> list[str]:
        """Return repr fragments for the rank flags (e.g. ``["+batch"]``)."""
        parts = []
        if self.has_batch_rank:
            parts.append("+batch")
        if self.has_time_rank:
            parts.append("+time(major)" if self.time_major else "+time")
        return parts

    def _flags_json(self) -> dict[str, bool]:
        """Return the rank flags as a JSON fragment."""
        return {
            "has_batch_rank": self.has_batch_rank,
            "has_time_rank": self.has_time_rank,
            "time_major": self.time_major,
        }

    def _apply_json_flags(self, d: dict) -> "Space":
        """Return a copy of this space with the rank flags stored in ``d``."""
        out = self.with_batch_rank(bool(d.get("has_batch_rank", False)))
        return out.with_time_rank(bool(d.get("has_time_rank", False)), bool(d.get("time_major", False)))

    # ------------------------------------------------------- abstract API
    @property
    def shape(self) -> Any:
        """Shape of one value without batch/time axes (containers: nested shapes)."""
        raise NotImplementedError

    @property
    def rank(self) -> Any:
        """Number of axes of one value without batch/time axes (containers: nested)."""
        raise NotImplementedError

    @property
    def dtype(self) -> np.dtype | None:
        """Numpy dtype of values (None for containers)."""
        raise NotImplementedError

    @property
    def flat_dim(self) -> int:
        """Total number of scalars in one value without batch/time axes."""
        raise NotImplementedError

    def get_shape(self, batch_size: int | None = None, time_size: int | None = None) -> Any:
        """Full shape including batch/time axes (None where the size is unknown)."""
        raise NotImplementedError

    def sample(self, size: int | tuple | None = None, rng: np.random.Generator | None = None) -> Any:
        """Draw a random value.

        ``size=None`` returns a single value (batch/time flags are ignored); an
        int or tuple adds that many leading dims. ``rng`` defaults to a fresh
        ``np.random.default_rng()``.
        """
        raise NotImplementedError

    def zeros(self, size: int | tuple | None = None) -> Any:
        """Return an all-zero value (same ``size`` convention as :meth:`sample`).

        The zeros are not clipped into the space's bounds, so for spaces whose
        range excludes 0 the result is not contained in the space.
        """
        raise NotImplementedError

    def _mismatch(self, value: Any, path: str) -> str | None:
        """Return a description of why ``value`` does not fit, or None if it fits."""
        raise NotImplementedError

    def _flatten_into(self, prefix: str, out: dict[str, "Space"]) -> None:
        """Add this space's leaves to ``out`` under keys starting with ``prefix``."""
        raise NotImplementedError

    def _flatten_value_into(self, value: Any, prefix: str, out: dict[str, np.ndarray]) -> None:
        """Add the leaf arrays of ``value`` to ``out`` under keys starting with ``prefix``."""
        raise NotImplementedError

    def _unflatten_from(self, flat: Any, prefix: str) -> Any:
        """Rebuild the (sub-)value stored in ``flat`` under keys starting with ``prefix``."""
        raise NotImplementedError

    def to_json(self) -> dict:
        """Return a JSON-serialisable description; see :meth:`from_json`."""
        raise NotImplementedError

    @classmethod
    def _from_json_fields(cls, d: dict) -> "Space":
        """Rebuild an instance of exactly ``cls`` from its JSON description."""
        raise NotImplementedError

    def _eq_key(self) -> tuple:
        """Hashable key capturing the full structural identity of the space."""
        raise NotImplementedError

    # ------------------------------------------------------- concrete API
    def contains(self, value: Any) -> bool:
        """Return True if ``value`` is a valid value of this space.

        With a batch (time) rank, the value needs one leading axis of any size
        for each rank, in the order given by ``time_major``.
        """
        return self._mismatch(value, "") is None

    def check(self, value: Any, name: str = "value") -> None:
        """Raise :class:`SpaceError` explaining why ``value`` does not fit this space."""
        problem = self._mismatch(value, "")
        if problem is not None:
            raise SpaceError(f"{name}{problem}")

    def flatten(self) -> dict[str, "Space"]:
        """Ordered mapping from flat keys to leaf spaces.

        A leaf flattens to ``{"": self}``; Dict keys nest as ``"a/b"`` and Tuple
        positions as ``"0"``, ``"1"``, e.g. ``Dict(a=Tuple(x, y))`` flattens to
        ``{"a/0": x, "a/1": y}``.
        """
        out: dict[str, Space] = {}
        self._flatten_into("", out)
        return out

    def flatten_value(self, value: Any) -> dict[str, np.ndarray]:
        """Flatten a (possibly nested) value into ``{flat_key: np.ndarray}``.

        Keys match :meth:`flatten`. Only the nesting structure is checked; use
        :meth:`check` to validate shapes, dtypes and bounds.
        """
        out: dict[str, np.ndarray] = {}
        self._flatten_value_into(value, "", out)
        return out

    def unflatten_value(self, flat: dict[str, Any]) -> Any:
        """Inverse of :meth:`flatten_value` (Dict -> dict, Tuple -> tuple)."""
        if not isinstance(flat, Mapping):
            raise SpaceError(
                f"Cannot unflatten a {type(flat).__name__}: expected a dict mapping "
                f"flat keys {list(self.flatten())} to arrays."
            )
        unexpected = [k for k in flat if k not in self.flatten()]
        if unexpected:
            raise SpaceError(
                f"Cannot unflatten: unexpected flat keys {unexpected}; expected exactly "
                f"the keys {list(self.flatten())}."
            )
        return self._unflatten_from(flat, "")

    @classmethod
    def from_json(cls, d: dict) -> "Space":
        """Rebuild a space from :meth:`to_json` output, dispatching on ``d["type"]``.

        Called on a subclass (e.g. ``FloatBox.from_json``), the result must be
        an instance of that subclass.
        """
        if not isinstance(d, dict) or "type" not in d:
            raise SpaceError(
                f"Cannot rebuild a space from {d!r}: expected a dict with a 'type' "
                f"entry as produced by Space.to_json()."
            )
        type_name = d["type"]
        target = _SPACE_TYPES.get(type_name)
        if target is None:
            raise SpaceError(
                f"Cannot rebuild a space of unknown type {type_name!r}: expected one of {sorted(_SPACE_TYPES)}."
            )
        if not issubclass(target, cls):
            raise SpaceError(
                f"{cls.__name__}.from_json() was given a description of a {type_name} "
                f"space: expected a {cls.__name__} (or subclass) description; use "
                f"Space.from_json() to accept any space type."
            )
        try:
            return target._from_json_fields(d)
        except SpaceError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise SpaceError(
                f"Invalid JSON description of a {type_name} space ({exc!r}): expected "
                f"the fields written by {type_name}.to_json(), got {d!r}."
            ) from exc

    def __eq__(self, other: object) -> bool:
        """Structural equality (type, shape, dtype, bounds, children and rank flags)."""
        if not isinstance(other, Space):
            return NotImplemented
        return type(self) is type(other) and self._eq_key() == other._eq_key()

    def __hash__(self) -> int:
        """Hash consistent with :meth:`__eq__`."""
        return hash((type(self).__name__, self._eq_key()))


# ---------------------------------------------------------------- helpers
def join_key(prefix: str, key: str) -> str:
    """Join a flat-key prefix and a child key with ``/`` (empty prefix: key alone)."""
    return key if not prefix else f"{prefix}/{key}"


def normalize_size(size: Any) -> tuple[int, ...]:
    """Turn a ``sample``/``zeros`` size argument into a tuple of leading dims."""
    if size is None:
        return ()
    if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
        dims: tuple = (int(size),)
    elif isinstance(size, (tuple, list)):
        dims = tuple(size)
    else:
        raise SpaceError(f"Invalid size {size!r}: expected None, a non-negative int, or a tuple of non-negative ints.")
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
            raise SpaceError(
                f"Invalid size {size!r}: expected None, a non-negative int, or a tuple of non-negative ints."
            )
    return tuple(int(d) for d in dims)


def resolve_rng(rng: np.random.Generator | None) -> np.random.Generator:
    """Return ``rng`` or a fresh default generator; reject other RNG types."""
    if rng is None:
        return np.random.default_rng()
    if not isinstance(rng, np.random.Generator):
        raise SpaceError(
            f"Invalid rng of type {type(rng).__name__}: expected a "
            f"numpy.random.Generator (e.g. np.random.default_rng(seed)) or None."
        )
    return rng


def encode_number(x: Any) -> Any:
    """Encode a scalar for JSON: non-finite floats become "inf"/"-inf"/"nan"."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def decode_number(x: Any) -> Any:
    """Inverse of :func:`encode_number`."""
    if isinstance(x, str):
        if x in ("inf", "-inf", "nan"):
            return float(x)
        raise SpaceError(f"Invalid encoded number {x!r}: expected a number, 'inf', '-inf' or 'nan'.")
    return x


def encode_array(arr: np.ndarray) -> Any:
    """Encode an array as a scalar (if all elements equal) or nested lists."""
    arr = np.asarray(arr)
    if arr.size > 0 and np.all(arr == arr.flat[0]):
        return encode_number(arr.flat[0].item())
    return _map_nested(arr.tolist(), encode_number)


def decode_array(x: Any) -> Any:
    """Inverse of :func:`encode_array` (returns scalars or nested lists)."""
    return _map_nested(x, decode_number)


def _map_nested(x: Any, fn: Any) -> Any:
    """Apply ``fn`` to every scalar in a nested list."""
    if isinstance(x, list):
        return [_map_nested(e, fn) for e in x]
    return fn(x)


def format_bound(arr: np.ndarray) -> str:
    """Short human-readable form of a bound array (scalar if uniform)."""
    if arr.size > 0 and np.all(arr == arr.flat[0]):
        return str(arr.flat[0])
    return np.array2string(arr, separator=", ", threshold=8, edgeitems=2)
