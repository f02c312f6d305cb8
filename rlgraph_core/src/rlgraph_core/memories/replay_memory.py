"""Uniform experience replay over dicts of numpy arrays, stored in a ring buffer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlgraph_core.readonly import ReadOnly
from rlgraph_core.memories._checks import check_int, state_scalar
from rlgraph_core.memories.frames import FrameStore, frames_of, record_shape_of, slot_layout, stacks_of
from rlgraph_core.memories.obs import SEP, flatten_fields, unflatten_fields

__all__ = ["ReplayMemory"]

#: Keys that ``sample`` adds to its result, so records may not use them as field names.
RESERVED_FIELDS = frozenset({"indices", "weights"})

_DATA_PREFIX = "data/"
_FRAMES_PREFIX = "frames/"
_FRAME_INDEX_PREFIX = "frame_index/"
#: Observation fields whose frames may be shared (``obs``, ``next_obs`` and their Dict keys).
_OBS_FIELDS = ("obs", "next_obs")
_MASK64 = (1 << 64) - 1


def _rng_state_to_array(rng: np.random.Generator) -> np.ndarray:
    """Encode a PCG64 generator's state as six uint64 values (128-bit ints split in halves)."""
    state = rng.bit_generator.state
    s, inc = state["state"]["state"], state["state"]["inc"]
    return np.array(
        [s >> 64, s & _MASK64, inc >> 64, inc & _MASK64, state["has_uint32"], state["uinteger"]],
        dtype=np.uint64,
    )


def _rng_state_from_array(arr: np.ndarray) -> dict[str, Any]:
    """Decode the array written by ``_rng_state_to_array`` into a PCG64 state dict."""
    v = [int(x) for x in arr]
    return {
        "bit_generator": "PCG64",
        "state": {"state": (v[0] << 64) | v[1], "inc": (v[2] << 64) | v[3]},
        "has_uint32": v[4],
        "uinteger": v[5],
    }


class ReplayMemory:
    """Fixed-capacity ring buffer of transitions, sampled uniformly with replacement.

    A record is a set of named fields ("obs", "actions", ...). ``insert`` takes a dict mapping each
    field to an array whose leading dimension is the batch. Storage is allocated on the first
    accepted insert from that batch's per-record shapes and dtypes; every later batch must have
    the same fields, shapes and dtypes. When full, the oldest records are overwritten.

    A field may hold a dict of arrays (a Dict observation): it is stored per key, as fields
    ``obs/image``, ``obs/vector`` ..., and sampled back as the same dict. Observations keep their
    dtype. uint8 observations (images) in ``obs``/``next_obs`` (and their Dict keys) are stored
    as frames, each distinct frame once, shared by ``obs`` and ``next_obs`` and by overlapping
    frame stacks (:mod:`rlgraph_core.memories.frames`); sampling rebuilds the stacks.

    Args:
        capacity: Maximum number of records held.
        seed: Seed for the sampling generator; None draws fresh entropy.
        frames: ``"auto"`` stores uint8 observations as shared frames; ``"off"`` stores every
            field as given.
    """

    #: Uniform memories take no priority updates.
    prioritized = False

    def __init__(self, capacity: int, seed: int | None = None, frames: str = "auto") -> None:
        self._capacity = check_int("capacity", capacity, minimum=1)
        if frames not in ("auto", "off"):
            raise ValueError(f"frames must be 'auto' or 'off', got {frames!r}.")
        self._frames_mode = frames
        self._rng = np.random.default_rng(seed)
        self._storage: dict[str, np.ndarray] | None = None
        #: per field: (record shape, dtype) as inserted (framed fields store frame slots instead)
        self._schema: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
        #: framed field -> frame group (``next_obs`` shares ``obs``'s frames)
        self._framed: dict[str, str] = {}
        self._frame_stores: dict[str, FrameStore] = {}
        self._nested = False
        self._size = 0
        self._next_index = 0

    # ------------------------------------------------------------------ properties

    capacity = ReadOnly[int]("_capacity", "Maximum number of records held.")

    @property
    def fields(self) -> tuple[str, ...]:
        """Field names in first-insert order (a Dict field per key: ``obs/image``); empty until the first insert."""
        return () if self._storage is None else tuple(self._storage)

    @property
    def framed_fields(self) -> dict[str, str]:
        """The fields stored as shared frames, each with its frame group (``{"next_obs": "obs", ...}``)."""
        return dict(self._framed)

    def frame_store(self, group: str) -> FrameStore:
        """The :class:`FrameStore` of a frame group (``"obs"``, ``"obs/image"``)."""
        return self._frame_stores[group]

    def nbytes(self) -> int:
        """Bytes the memory holds now: its arrays and frame stores (the measure of
        ``benchmarks/bench_replay.py`` and the memory estimator)."""
        return sum(a.nbytes for a in (self._storage or {}).values()) + sum(
            fs.nbytes() for fs in self._frame_stores.values()
        )

    def _frame_group(self, name: str, arr: np.ndarray) -> str | None:
        """The frame group of a new field, or None when it is stored as given."""
        if self._frames_mode != "auto" or arr.dtype != np.uint8:
            return None
        head, _, rest = name.partition(SEP)
        if head not in _OBS_FIELDS:
            return None
        return "obs" + (SEP + rest if rest else "")

    def _allocate(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Create the storage (and frame stores) for the fields of the first batch."""
        self._storage, self._schema, self._framed = {}, {}, {}
        for name, arr in arrays.items():
            shape = tuple(arr.shape[1:])
            self._schema[name] = (shape, arr.dtype)
            group = self._frame_group(name, arr)
            if group is None:
                self._storage[name] = np.zeros((self._capacity,) + shape, dtype=arr.dtype)
                continue
            slot_shape, frame_shape = slot_layout(shape)
            self._framed[name] = group
            self._storage[name] = np.zeros((self._capacity, *slot_shape), dtype=np.int32)
            if group not in self._frame_stores:
                self._frame_stores[group] = FrameStore(frame_shape, arr.dtype, initial=min(self._capacity, 4096) + 16)

    def __len__(self) -> int:
        return self._size

    # ------------------------------------------------------------------ insert

    def _check_batch(self, batch: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Return ``batch`` as arrays after checking it against itself and the stored schema."""
        if not isinstance(batch, Mapping) or not batch:
            raise ValueError(
                "insert expects a non-empty dict mapping field names to arrays with a leading "
                f"batch dimension, got {type(batch).__name__}."
            )
        arrays = {name: np.asarray(value) for name, value in flatten_fields(batch).items()}
        for name, arr in arrays.items():
            if not isinstance(name, str):
                raise ValueError(f"field names must be strings, got {name!r}.")
            if name in RESERVED_FIELDS:
                raise ValueError(
                    f"field name {name!r} is reserved for sample() output; reserved names are "
                    f"{sorted(RESERVED_FIELDS)}."
                )
            if arr.ndim == 0:
                raise ValueError(f"field {name!r} must have a leading batch dimension, got a 0-d array.")
            if arr.dtype.hasobject:
                raise ValueError(
                    f"field {name!r} has object dtype; only numeric and bool arrays can be "
                    "stored (and saved without pickling)."
                )
        lengths = {name: arr.shape[0] for name, arr in arrays.items()}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"all fields must have the same batch size, got {lengths}.")
        if self._storage is not None:
            self._check_schema(arrays, what="inserted batch")
        return arrays

    def _matching_batch(self, batch: Mapping[str, Any]) -> dict[str, np.ndarray] | None:
        """``batch`` itself when it is a dict of arrays that match the stored schema exactly, else None.

        This is the hot path (one insert per env step): such a batch passes every check of
        :meth:`_check_batch`, so it needs none of them; anything else (the first insert, other
        fields, shapes or dtypes, lists, mappings that are not dicts) takes the checked path.
        """
        schema = self._schema
        if self._storage is None or type(batch) is not dict or batch.keys() != schema.keys():
            return None
        n = -1
        for name, (shape, dtype) in schema.items():
            arr = batch[name]
            if type(arr) is not np.ndarray or arr.dtype != dtype or arr.shape[1:] != shape:
                return None
            if n < 0:
                n = arr.shape[0]
            elif arr.shape[0] != n:
                return None
        return batch

    def _check_schema(self, arrays: Mapping[str, np.ndarray], what: str) -> None:
        """Raise ValueError unless ``arrays`` have the stored fields, record shapes and dtypes."""
        assert self._storage is not None
        if set(arrays) != set(self._schema):
            raise ValueError(
                f"{what} has fields {sorted(arrays)}, but this memory stores "
                f"{sorted(self._schema)}; every batch must carry exactly the same fields."
            )
        for name, (shape, dtype) in self._schema.items():
            arr = arrays[name]
            if arr.shape[1:] != shape or arr.dtype != dtype:
                raise ValueError(
                    f"field {name!r} of the {what} has per-record shape {arr.shape[1:]} and "
                    f"dtype {arr.dtype}, but this memory stores shape {shape} and dtype "
                    f"{dtype}; convert the array to match."
                )

    def insert(self, batch: Mapping[str, np.ndarray]) -> np.ndarray:
        """Append a batch of records, overwriting the oldest ones once the memory is full.

        ``batch`` maps each field to an array with a leading batch dimension. If the batch is
        larger than the capacity only its newest ``capacity`` records are kept. Returns the int64
        slot indices the kept records were written to, in batch order.
        """
        arrays = self._matching_batch(batch)
        if arrays is None:
            arrays = self._check_batch(batch)
        n = next(iter(arrays.values())).shape[0]
        if self._storage is None:
            self._allocate(arrays)
            self._nested = any(SEP in name for name in arrays)
        assert self._storage is not None
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        kept = min(n, self._capacity)
        start = (self._next_index + n - kept) % self._capacity
        first = min(kept, self._capacity - start)  # records before the ring wraps around
        if first == kept:
            positions = np.arange(start, start + kept, dtype=np.int64)
        else:
            positions = (start + np.arange(kept, dtype=np.int64)) % self._capacity
        framed = self._framed
        for name, store in self._storage.items():
            src = arrays[name]
            if name in framed:
                self._insert_frames(name, store, src[n - kept :], positions)
            elif kept == n and first == kept:  # the usual case: no ring wrap, nothing dropped
                store[start : start + n] = src
            else:
                src = src[n - kept :]
                store[start : start + first] = src[:first]
                store[: kept - first] = src[first:]
        self._next_index = (self._next_index + n) % self._capacity
        self._size = min(self._size + n, self._capacity)
        return positions

    def _insert_frames(self, name: str, slots: np.ndarray, records: np.ndarray, positions: np.ndarray) -> None:
        """Reference the frames of ``records`` at ``positions`` and release what they overwrite."""
        frames = self._frame_stores[self._framed[name]]
        slot_shape = slots.shape[1:]
        k = int(np.prod(slot_shape, dtype=np.int64))
        new = frames.add(frames_of(records).reshape(len(records) * k, *frames.frame_shape))
        new = new.reshape(len(records), *slot_shape)
        occupied = positions[positions < self._size] if self._size < self._capacity else positions
        old = slots[occupied]  # a copy (fancy index), taken before the slots are overwritten
        slots[positions] = new
        frames.release(old)

    # ------------------------------------------------------------------ sample

    def _check_can_sample(self, batch_size: int) -> int:
        """Validate ``batch_size`` and that there is something to sample; return it as int."""
        batch_size = check_int("batch_size", batch_size, minimum=1)
        if self._size == 0:
            raise RuntimeError("cannot sample from an empty replay memory; insert records first.")
        return batch_size

    def _gather(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        """Return the stored records at ``indices``, one array per field."""
        assert self._storage is not None
        out = {}
        for name, store in self._storage.items():
            group = self._framed.get(name)
            if group is None:
                out[name] = store[indices]
            else:
                out[name] = stacks_of(self._frame_stores[group], store[indices], len(self._schema[name][0]) >= 3)
        return unflatten_fields(out) if self._nested else out

    def sample(self, batch_size: int) -> dict[str, np.ndarray]:
        """Draw ``batch_size`` records uniformly with replacement.

        Returns one array per field plus "indices" (int64 slots sampled). Raises RuntimeError when
        the memory is empty.
        """
        batch_size = self._check_can_sample(batch_size)
        indices = self._rng.integers(0, self._size, size=batch_size, dtype=np.int64)
        out = self._gather(indices)
        out["indices"] = indices
        return out

    # ------------------------------------------------------------------ state

    def _state_keys(self) -> set[str]:
        """Names of the non-field entries of ``state_dict``; subclasses add theirs."""
        return {"capacity", "size", "next_index", "rng_state"}

    def state_dict(self) -> dict[str, np.ndarray]:
        """Return the full state as numpy arrays only, so ``np.savez`` needs no pickling.

        Holds the stored records (``"data/<field>"``, filled rows only), the counters as 0-d int64
        arrays and the sampling generator's state, so a restored memory samples identically.
        """
        state = {
            "capacity": np.array(self._capacity, dtype=np.int64),
            "size": np.array(self._size, dtype=np.int64),
            "next_index": np.array(self._next_index, dtype=np.int64),
            "rng_state": _rng_state_to_array(self._rng),
        }
        for name, store in (self._storage or {}).items():
            if name not in self._framed:
                state[_DATA_PREFIX + name] = store[: self._size].copy()
        for group, frames in self._frame_stores.items():
            names = [name for name, g in self._framed.items() if g == group]
            slots = np.stack([self._storage[name][: self._size] for name in names])  # type: ignore[index]
            pool, remapped = frames.compact(slots)
            state[_FRAMES_PREFIX + group] = pool
            for name, index in zip(names, remapped):
                state[_FRAME_INDEX_PREFIX + name] = index
        return state

    def _parse_state(self, d: Mapping[str, Any]) -> dict[str, Any]:
        """Validate a state dict completely, raising ValueError, and return its parsed contents."""
        if not isinstance(d, Mapping):
            raise ValueError(f"load_state_dict expects a mapping of arrays, got {type(d).__name__}.")
        keys = set(d.keys())
        expected = self._state_keys()
        data_keys = {k for k in keys if k.startswith((_DATA_PREFIX, _FRAMES_PREFIX, _FRAME_INDEX_PREFIX))}
        missing, unknown = expected - keys, keys - expected - data_keys
        if missing or unknown:
            raise ValueError(
                f"state dict does not match {type(self).__name__}: missing keys {sorted(missing)}, "
                f"unexpected keys {sorted(unknown)}."
            )
        capacity = state_scalar(d, "capacity", "iu")
        size = state_scalar(d, "size", "iu")
        next_index = state_scalar(d, "next_index", "iu")
        if capacity != self._capacity:
            raise ValueError(
                f"state dict was saved with capacity {capacity}, but this memory has capacity "
                f"{self._capacity}; create the memory with the saved capacity."
            )
        if not 0 <= size <= capacity or not 0 <= next_index < capacity:
            raise ValueError(
                f"state dict counters are out of range: size={size} must lie in [0, {capacity}] "
                f"and next_index={next_index} in [0, {capacity})."
            )
        if size < capacity and next_index != size:
            raise ValueError(
                f"state dict is inconsistent: a memory that is not full (size={size}) must have "
                f"next_index equal to size, got {next_index}."
            )
        rng_state = np.asarray(d["rng_state"])
        if rng_state.shape != (6,) or rng_state.dtype != np.uint64:
            raise ValueError(
                "state_dict['rng_state'] must be a uint64 array of shape (6,), got shape "
                f"{rng_state.shape} and dtype {rng_state.dtype}."
            )
        data = {k[len(_DATA_PREFIX) :]: np.asarray(d[k]) for k in d.keys() if k.startswith(_DATA_PREFIX)}
        frames = {k[len(_FRAMES_PREFIX) :]: np.asarray(d[k]) for k in d.keys() if k.startswith(_FRAMES_PREFIX)}
        index = {k[len(_FRAME_INDEX_PREFIX) :]: np.asarray(d[k]) for k in d.keys() if k.startswith(_FRAME_INDEX_PREFIX)}
        framed = self._parse_frames(frames, index, size)
        for name, arr in data.items():
            if arr.dtype.hasobject:
                raise ValueError(f"state_dict['{_DATA_PREFIX}{name}'] must not have object dtype.")
            if arr.ndim == 0 or arr.shape[0] != size:
                raise ValueError(
                    f"state_dict['{_DATA_PREFIX}{name}'] must hold {size} records (the saved "
                    f"size), got shape {arr.shape}."
                )
        if size > 0 and not data and not index:
            raise ValueError(f"state dict claims {size} records but holds no '{_DATA_PREFIX}*' fields.")
        schema = {name: (arr.shape[1:], arr.dtype) for name, arr in data.items()}
        schema.update({name: spec for name, (_, spec) in framed.items()})
        if self._storage is not None and schema:
            self._check_stored_schema(schema)
        return {
            "size": size,
            "next_index": next_index,
            "rng_state": rng_state,
            "data": data,
            "frames": frames,
            "framed": {name: (group, index[name]) for name, (group, _) in framed.items()},
            "schema": schema,
        }

    def _parse_frames(self, frames: Mapping[str, np.ndarray], index: Mapping[str, np.ndarray], size: int) -> dict:
        """Check the frame pools and frame slots of a state dict; ``{field: (group, (shape, dtype))}``."""
        out = {}
        for name, slots in index.items():
            group = "obs" + name[len("next_obs") :] if name.startswith("next_obs") else name
            pool = frames.get(group)
            if pool is None:
                raise ValueError(
                    f"state_dict['{_FRAME_INDEX_PREFIX}{name}'] has no frames ('{_FRAMES_PREFIX}{group}')."
                )
            if slots.ndim < 2 or slots.shape[0] != size or slots.dtype.kind not in "iu":
                raise ValueError(
                    f"state_dict['{_FRAME_INDEX_PREFIX}{name}'] must be integer frame slots of shape ({size}, ..., k), "
                    f"got shape {slots.shape} and dtype {slots.dtype}."
                )
            if slots.size and (slots.min() < 0 or slots.max() >= len(pool)):
                raise ValueError(
                    f"state_dict['{_FRAME_INDEX_PREFIX}{name}'] refers to frames outside the {len(pool)} "
                    f"of '{_FRAMES_PREFIX}{group}'."
                )
            shape = record_shape_of(slots.shape[1:], pool.shape[1:])
            if slot_layout(shape) != (slots.shape[1:], pool.shape[1:]):  # frames.slot_layout
                raise ValueError(
                    f"state_dict['{_FRAME_INDEX_PREFIX}{name}'] has slots of shape {slots.shape[1:]} for frames of "
                    f"shape {pool.shape[1:]}, which no record is stored as; expected {slot_layout(shape)[0]}."
                )
            out[name] = (group, (shape, pool.dtype))
        unused = set(frames) - {g for g, _ in out.values()}
        if unused:
            raise ValueError(f"state dict holds frames {sorted(unused)} that no '{_FRAME_INDEX_PREFIX}*' field uses.")
        return out

    def _check_stored_schema(self, schema: Mapping[str, tuple]) -> None:
        """Raise ValueError unless a state's ``{field: (shape, dtype)}`` are this memory's fields."""
        if set(schema) != set(self._schema):
            raise ValueError(
                f"state dict has fields {sorted(schema)}, but this memory stores "
                f"{sorted(self._schema)}; every batch must carry exactly the same fields."
            )
        for name, (shape, dtype) in self._schema.items():
            if tuple(schema[name][0]) != shape or schema[name][1] != dtype:
                raise ValueError(
                    f"field {name!r} of the state dict has per-record shape {tuple(schema[name][0])} and dtype "
                    f"{schema[name][1]}, but this memory stores shape {shape} and dtype {dtype}; convert the array to match."
                )

    def _restore_state(self, state: dict[str, Any]) -> None:
        """Install contents already validated by ``_parse_state``."""
        if state["data"] or state["framed"]:
            self._storage, self._schema, self._framed, self._frame_stores = {}, dict(state["schema"]), {}, {}
            for name, arr in state["data"].items():
                self._storage[name] = np.zeros((self._capacity,) + arr.shape[1:], dtype=arr.dtype)
                self._storage[name][: state["size"]] = arr
            for name, (group, slots) in state["framed"].items():
                self._framed[name] = group
                self._storage[name] = np.zeros((self._capacity, *slots.shape[1:]), dtype=np.int32)
                self._storage[name][: state["size"]] = slots
            for group, pool in state["frames"].items():
                used = np.concatenate(
                    [self._storage[n][: state["size"]].ravel() for n, g in self._framed.items() if g == group]
                )
                self._frame_stores[group] = FrameStore.from_frames(pool, used, initial=min(self._capacity, 4096) + 16)
            self._storage = {name: self._storage[name] for name in state["schema"]}  # insertion order
            self._nested = any(SEP in name for name in self._storage)
        elif self._storage is not None:
            for store in self._storage.values():
                store.fill(0)
            for group, frames in self._frame_stores.items():
                self._frame_stores[group] = FrameStore(frames.frame_shape, frames.dtype, initial=len(frames.pool))
        self._size = state["size"]
        self._next_index = state["next_index"]
        self._rng.bit_generator.state = _rng_state_from_array(state["rng_state"])

    def load_state_dict(self, d: Mapping[str, np.ndarray]) -> None:
        """Replace this memory's contents with a dict produced by ``state_dict``.

        Accepts the result of ``np.load`` on a saved ``.npz`` too. Everything is validated before
        anything changes; on a mismatch (capacity, missing or unknown keys, record counts, or
        fields that differ from this memory's existing fields) a ValueError explains it.
        """
        self._restore_state(self._parse_state(d))
