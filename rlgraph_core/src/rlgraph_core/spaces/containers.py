"""Container spaces: :class:`Dict` (string keys, sorted) and :class:`Tuple` (positional).

A container's rank flags are derived from its leaves: ``has_batch_rank`` is
True iff every leaf has a batch rank (likewise for the time rank and
``time_major``). ``with_batch_rank``/``with_time_rank`` apply to all leaves. An
empty container stores its own flags.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from .base import Space, SpaceError, join_key, normalize_size, resolve_rng

__all__ = ["ContainerSpace", "Dict", "Tuple"]


def _as_space(x: Any, where: str) -> Space:
    """Return ``x`` as a Space; plain dicts/tuples become Dict/Tuple containers."""
    if isinstance(x, Space):
        return x
    if isinstance(x, Mapping):
        return Dict(x)
    if isinstance(x, builtins.tuple):
        return Tuple(x)
    raise SpaceError(f"{where} is a {type(x).__name__} ({x!r}): expected a Space (or a dict/tuple of spaces).")


class ContainerSpace(Space):
    """Base class of :class:`Dict` and :class:`Tuple`.

    Subclasses implement ``_items`` (ordered ``(key, child)`` pairs),
    ``_rebuild`` (same container type with new children) and the value
    packing helpers ``_pack``/``_unpack_children``.
    """

    def __init__(self) -> None:
        super().__init__()
        self._leaves: list[Space] = []

    def _finish_init(self) -> None:
        """Cache the leaves once the children are set."""
        self._leaves = list(self.flatten().values())

    def _items(self) -> list[tuple[str, Space]]:
        """Ordered ``(flat key component, child)`` pairs."""
        raise NotImplementedError

    def _rebuild(self, children: list[Space]) -> "ContainerSpace":
        """Return a container of the same type and keys with the given children."""
        raise NotImplementedError

    def _pack(self, values: list[Any]) -> Any:
        """Build a dict/tuple value from per-child values (in ``_items`` order)."""
        raise NotImplementedError

    def _unpack_children(self, value: Any, path: str) -> tuple[list[Any] | None, str | None]:
        """Split ``value`` into per-child values, or return a problem description."""
        raise NotImplementedError

    def _child_path(self, path: str, key: str) -> str:
        """Location string of a child value for error messages."""
        raise NotImplementedError

    # ------------------------------------------------------------ flags
    @property
    def has_batch_rank(self) -> bool:
        """True iff every leaf has a batch rank (own flag if there are no leaves)."""
        if not self._leaves:
            return self._has_batch_rank
        return all(leaf.has_batch_rank for leaf in self._leaves)

    @property
    def has_time_rank(self) -> bool:
        """True iff every leaf has a time rank (own flag if there are no leaves)."""
        if not self._leaves:
            return self._has_time_rank
        return all(leaf.has_time_rank for leaf in self._leaves)

    @property
    def time_major(self) -> bool:
        """True iff every leaf has a time-major time rank (own flag if there are no leaves)."""
        if not self._leaves:
            return self._time_major
        return all(leaf.has_time_rank and leaf.time_major for leaf in self._leaves)

    def with_batch_rank(self, flag: bool = True) -> "ContainerSpace":
        """Copy with the batch-rank flag set on every leaf (recursively)."""
        new = self._rebuild([c.with_batch_rank(flag) for _, c in self._items()])
        new._has_batch_rank = bool(flag)
        new._has_time_rank, new._time_major = self._has_time_rank, self._time_major
        return new

    def with_time_rank(self, flag: bool = True, time_major: bool = False) -> "ContainerSpace":
        """Copy with the time-rank flag (and ``time_major``) set on every leaf."""
        new = self._rebuild([c.with_time_rank(flag, time_major) for _, c in self._items()])
        new._has_batch_rank = self._has_batch_rank
        new._has_time_rank = bool(flag)
        new._time_major = bool(flag) and bool(time_major)
        return new

    # ------------------------------------------------------------ structure
    @property
    def dtype(self) -> None:
        """Containers have no single dtype."""
        return None

    @property
    def flat_dim(self) -> int:
        """Sum of the leaves' ``flat_dim``."""
        return sum(leaf.flat_dim for leaf in self._leaves)

    @property
    def shape(self) -> Any:
        """Nested shapes of the children (dict for Dict, tuple for Tuple)."""
        return self._pack([c.shape for _, c in self._items()])

    @property
    def rank(self) -> Any:
        """Nested ranks of the children."""
        return self._pack([c.rank for _, c in self._items()])

    def get_shape(self, batch_size: int | None = None, time_size: int | None = None) -> Any:
        """Nested full shapes of the children."""
        return self._pack([c.get_shape(batch_size, time_size) for _, c in self._items()])

    # ------------------------------------------------------------ values
    def sample(self, size: int | tuple | None = None, rng: np.random.Generator | None = None) -> Any:
        """Sample every child (in key order) with one shared generator."""
        size = normalize_size(size)
        rng = resolve_rng(rng)
        return self._pack([c.sample(size, rng) for _, c in self._items()])

    def zeros(self, size: int | tuple | None = None) -> Any:
        """Nested zeros of every child."""
        size = normalize_size(size)
        return self._pack([c.zeros(size) for _, c in self._items()])

    def _mismatch(self, value: Any, path: str) -> str | None:
        """Check the container structure, then each child."""
        children, problem = self._unpack_children(value, path)
        if problem is not None:
            return problem
        for (key, child), child_value in zip(self._items(), children):
            problem = child._mismatch(child_value, self._child_path(path, key))
            if problem is not None:
                return problem
        return None

    # ------------------------------------------------------------ flattening
    def _flatten_into(self, prefix: str, out: dict) -> None:
        """Recurse into the children with ``prefix/key``."""
        for key, child in self._items():
            child._flatten_into(join_key(prefix, key), out)

    def _flatten_value_into(self, value: Any, prefix: str, out: dict) -> None:
        """Split ``value`` per child and recurse."""
        children, problem = self._unpack_children(value, f" at flat key {prefix!r}" if prefix else "")
        if problem is not None:
            raise SpaceError(f"Cannot flatten the value{problem}")
        for (key, child), child_value in zip(self._items(), children):
            child._flatten_value_into(child_value, join_key(prefix, key), out)

    def _unflatten_from(self, flat: Any, prefix: str) -> Any:
        """Rebuild every child and pack them."""
        return self._pack([c._unflatten_from(flat, join_key(prefix, k)) for k, c in self._items()])

    # ------------------------------------------------------------ misc
    def _eq_key(self) -> tuple:
        """Children (with their types) and, for empty containers, the own flags."""
        own = self._rank_flags() if not self._leaves else None
        return (builtins.tuple((k, type(c).__name__, c._eq_key()) for k, c in self._items()), own)

    def _add_flags_json(self, d: dict) -> dict:
        """Add the (derived) rank flags to ``d``; only read back for empty containers."""
        d.update(self._flags_json())
        return d

    def _flags_repr_suffix(self) -> str:
        """The rank flags for ``repr``, shown only for an empty container (children show their own)."""
        return "".join(", " + f for f in self._flags_repr()) if not self._leaves else ""

    @classmethod
    def _json_children(cls, d: dict, kind: type, expected: str):
        """``d["children"]`` of :meth:`to_json` output, checked to be a ``kind`` (``expected`` in words)."""
        children = d["children"]
        if not isinstance(children, kind):
            raise SpaceError(f"{cls.__name__} JSON 'children' is a {type(children).__name__}: expected {expected}.")
        return children


class Dict(ContainerSpace):
    """Container of named child spaces; keys are sorted for determinism.

    ``Dict({"a": FloatBox()}, b=Discrete(3))``. Keys must be non-empty strings
    without ``"/"`` (the flat-key separator). Plain dict/tuple children are
    converted to Dict/Tuple. Values are ``dict``s with exactly these keys.
    """

    _json_registered = True

    def __init__(self, spaces: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__()
        if spaces is None:
            spaces = {}
        if not isinstance(spaces, Mapping):
            raise SpaceError(
                f"Dict spaces argument is a {type(spaces).__name__}: expected a mapping "
                f"from string keys to spaces (or None)."
            )
        merged: dict[str, Any] = dict(spaces)
        for key, value in kwargs.items():
            if key in merged:
                raise SpaceError(f"Dict key {key!r} given twice (in spaces and as keyword): expected unique keys.")
            merged[key] = value
        for key in merged:
            if not isinstance(key, str) or not key or "/" in key:
                raise SpaceError(
                    f"Invalid Dict key {key!r}: expected a non-empty string without '/' "
                    f"('/' separates levels of flat keys)."
                )
        self._spaces: dict[str, Space] = {k: _as_space(merged[k], f"Dict entry {k!r}") for k in sorted(merged)}
        self._finish_init()

    def _items(self) -> list[tuple[str, Space]]:
        """Sorted ``(key, child)`` pairs."""
        return list(self._spaces.items())

    def _rebuild(self, children: list[Space]) -> "Dict":
        """Same keys, new children."""
        return Dict(dict(zip(self._spaces, children)))

    def _pack(self, values: list[Any]) -> dict:
        """``{key: value}`` in key order."""
        return dict(zip(self._spaces, values))

    def _child_path(self, path: str, key: str) -> str:
        """``path['key']``."""
        return f"{path}[{key!r}]"

    def _unpack_children(self, value: Any, path: str) -> tuple[list[Any] | None, str | None]:
        """Require a mapping with exactly this Dict's keys."""
        keys = list(self._spaces)
        if not isinstance(value, Mapping):
            return None, f"{path} is a {type(value).__name__}, but a Dict expects a dict with keys {keys}."
        missing = [k for k in keys if k not in value]
        unexpected = [k for k in value if k not in self._spaces]
        if missing or unexpected:
            return None, (
                f"{path} has keys {sorted(map(str, value))}, but a Dict expects exactly "
                f"the keys {keys} (missing: {missing}, unexpected: {unexpected})."
            )
        return [value[k] for k in keys], None

    # mapping interface -------------------------------------------------
    def __getitem__(self, key: str) -> Space:
        """Child space for ``key``."""
        try:
            return self._spaces[key]
        except KeyError:
            raise KeyError(f"Dict space has no key {key!r}; keys are {list(self._spaces)}.") from None

    def keys(self):
        """Sorted keys."""
        return self._spaces.keys()

    def values(self):
        """Child spaces in key order."""
        return self._spaces.values()

    def items(self):
        """``(key, space)`` pairs in key order."""
        return self._spaces.items()

    def __len__(self) -> int:
        """Number of children."""
        return len(self._spaces)

    def __iter__(self) -> Iterator[str]:
        """Iterate over the keys."""
        return iter(self._spaces)

    def __repr__(self) -> str:
        """E.g. ``Dict({'a': FloatBox(shape=(), ...)})``."""
        inner = ", ".join(f"{k!r}: {v!r}" for k, v in self._spaces.items())
        return f"Dict({{{inner}}}{self._flags_repr_suffix()})"

    def to_json(self) -> dict:
        """``{"type": "Dict", "children": {key: child_json}, flags...}``."""
        d = {"type": "Dict", "children": {k: v.to_json() for k, v in self._spaces.items()}}
        return self._add_flags_json(d)

    @classmethod
    def _from_json_fields(cls, d: dict) -> "Dict":
        """Rebuild from :meth:`to_json` output."""
        children = cls._json_children(d, dict, "an object")
        space = cls({k: Space.from_json(v) for k, v in children.items()})
        return space._apply_json_flags(d) if not children else space


class Tuple(ContainerSpace):
    """Container of positional child spaces: ``Tuple(a, b)`` or ``Tuple([a, b])``.

    Values are ``tuple``s (lists are accepted by ``contains``) of the same length.
    """

    _json_registered = True

    def __init__(self, *spaces: Any) -> None:
        super().__init__()
        if len(spaces) == 1 and isinstance(spaces[0], (list, builtins.tuple)):
            spaces = builtins.tuple(spaces[0])
        self._spaces: builtins.tuple[Space, ...] = builtins.tuple(
            _as_space(s, f"Tuple entry {i}") for i, s in enumerate(spaces)
        )
        self._finish_init()

    def _items(self) -> list[tuple[str, Space]]:
        """``(str(index), child)`` pairs."""
        return [(str(i), s) for i, s in enumerate(self._spaces)]

    def _rebuild(self, children: list[Space]) -> "Tuple":
        """New children, same length."""
        return Tuple(list(children))

    def _pack(self, values: list[Any]) -> tuple:
        """Tuple of per-child values."""
        return builtins.tuple(values)

    def _child_path(self, path: str, key: str) -> str:
        """``path[i]``."""
        return f"{path}[{key}]"

    def _unpack_children(self, value: Any, path: str) -> tuple[list[Any] | None, str | None]:
        """Require a tuple/list of the right length."""
        n = len(self._spaces)
        if not isinstance(value, (builtins.tuple, list)):
            return None, f"{path} is a {type(value).__name__}, but a Tuple expects a tuple of {n} values."
        if len(value) != n:
            return None, f"{path} has {len(value)} entries, but a Tuple expects a tuple of {n} values."
        return list(value), None

    # sequence interface ------------------------------------------------
    def __getitem__(self, index: int | slice) -> Any:
        """Child at ``index`` (a slice returns a new Tuple)."""
        if isinstance(index, slice):
            return Tuple(list(self._spaces[index]))
        return self._spaces[index]

    def __len__(self) -> int:
        """Number of children."""
        return len(self._spaces)

    def __iter__(self) -> Iterator[Space]:
        """Iterate over the child spaces."""
        return iter(self._spaces)

    def __repr__(self) -> str:
        """E.g. ``Tuple(FloatBox(...), Discrete(n=3))``."""
        inner = ", ".join(repr(s) for s in self._spaces)
        return f"Tuple({inner}{self._flags_repr_suffix()})"

    def to_json(self) -> dict:
        """``{"type": "Tuple", "children": [child_json, ...], flags...}``."""
        d = {"type": "Tuple", "children": [s.to_json() for s in self._spaces]}
        return self._add_flags_json(d)

    @classmethod
    def _from_json_fields(cls, d: dict) -> "Tuple":
        """Rebuild from :meth:`to_json` output."""
        children = cls._json_children(d, list, "a list")
        space = cls([Space.from_json(c) for c in children])
        return space._apply_json_flags(d) if not children else space
