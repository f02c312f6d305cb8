"""A recency-biased replay memory: a FIFO ring buffer sampled from its newest records.

Plain numpy, no deep-learning framework: it works with every rlgraph backend. It follows the
duck-typed memory API of :class:`rlgraph_core.memories.ReplayMemory` (``insert``, ``sample``,
``__len__``, ``state_dict``/``load_state_dict``), which is all an rlgraph agent relies on.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Mapping
from typing import Any

import numpy as np

from rlgraph_core.readonly import ReadOnly

__all__ = ["FifoReplay"]

#: Keys ``sample`` adds to its output, so records may not use them as field names.
RESERVED_FIELDS = frozenset({"indices", "weights"})
_DATA = "data/"
_SCALARS = ("capacity", "window", "size", "next_index")


def _positive_int(name: str, value: object) -> int:
    """``value`` as an int >= 1, or a ValueError that names the argument."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}.")
    return int(value)


class FifoReplay:
    """First-in-first-out ring buffer that samples uniformly among its newest ``window`` records.

    Records are dicts of equally long arrays (``obs``, ``actions``, ...), as for
    :class:`rlgraph_core.memories.ReplayMemory`. Once full, the oldest records are overwritten.
    ``sample(b)`` draws ``b`` records with replacement, uniformly among the ``min(len, window)``
    most recently inserted ones, so learning concentrates on fresh experience (useful when the
    environment drifts, and a simple example of a custom memory). With ``window >= capacity``
    it behaves like uniform replay.

    Args:
        capacity: Maximum number of records held.
        seed: Seed of the sampling generator; None draws fresh entropy.
        window: How many of the newest records ``sample`` draws from; default
            ``max(1, capacity // 10)``. Must not exceed ``capacity``.
    """

    #: Read by agents: this memory has no priorities and returns no importance weights.
    prioritized = False

    def __init__(self, capacity: int, seed: int | None = None, window: int | None = None) -> None:
        self._capacity = _positive_int("capacity", capacity)
        self._window = max(1, self._capacity // 10) if window is None else _positive_int("window", window)
        if self._window > self._capacity:
            raise ValueError(f"window ({self._window}) must not exceed capacity ({self._capacity}).")
        self._rng = np.random.default_rng(seed)
        self._storage: dict[str, np.ndarray] | None = None
        self._size = 0
        self._next = 0

    capacity = ReadOnly[int]("_capacity", "Maximum number of records held.")
    window = ReadOnly[int](
        "_window", "Number of newest records that ``sample`` draws from (once that many are stored)."
    )

    def __len__(self) -> int:
        return self._size

    # ---------------------------------------------------------------- insert and sample
    def _arrays(self, batch: Mapping[str, Any], what: str) -> dict[str, np.ndarray]:
        """Check a batch (or stored data) and return it as arrays."""
        if not isinstance(batch, Mapping) or not batch:
            raise ValueError(f"{what} must be a non-empty dict of arrays with a leading batch dimension.")
        arrays = {}
        for name, value in batch.items():
            arr = np.asarray(value)
            if not isinstance(name, str) or name in RESERVED_FIELDS:
                raise ValueError(f"{what}: field name {name!r} is not allowed (reserved: {sorted(RESERVED_FIELDS)}).")
            if arr.ndim == 0 or arr.dtype.hasobject:
                raise ValueError(
                    f"{what}: field {name!r} must be a numeric array with a batch dimension, "
                    f"got shape {arr.shape} dtype {arr.dtype}."
                )
            arrays[name] = arr
        if len({a.shape[0] for a in arrays.values()}) != 1:
            raise ValueError(
                f"{what}: all fields need the same batch size, got { {k: a.shape[0] for k, a in arrays.items()} }."
            )
        if self._storage is not None:
            if set(arrays) != set(self._storage):
                raise ValueError(f"{what} has fields {sorted(arrays)}, but this memory stores {sorted(self._storage)}.")
            for name, store in self._storage.items():
                if arrays[name].shape[1:] != store.shape[1:] or arrays[name].dtype != store.dtype:
                    raise ValueError(
                        f"{what}: field {name!r} has record shape {arrays[name].shape[1:]} dtype "
                        f"{arrays[name].dtype}, expected {store.shape[1:]} {store.dtype}."
                    )
        return arrays

    def insert(self, batch: Mapping[str, np.ndarray]) -> np.ndarray:
        """Append a batch of records (oldest overwritten when full); return their int64 slots."""
        arrays = self._arrays(batch, "inserted batch")
        if self._storage is None:
            self._storage = {k: np.zeros((self._capacity,) + a.shape[1:], a.dtype) for k, a in arrays.items()}
        n = next(iter(arrays.values())).shape[0]
        kept = min(n, self._capacity)  # a batch larger than the memory keeps its newest records
        slots = (self._next + (n - kept) + np.arange(kept, dtype=np.int64)) % self._capacity
        for name, store in self._storage.items():
            store[slots] = arrays[name][n - kept :]
        self._next = (self._next + n) % self._capacity
        self._size = min(self._size + n, self._capacity)
        return slots

    def sample(self, batch_size: int) -> dict[str, np.ndarray]:
        """Draw ``batch_size`` records uniformly among the newest ``window``, with replacement.

        Returns one array per field plus ``"indices"`` (the int64 slots drawn).
        """
        batch_size = _positive_int("batch_size", batch_size)
        if self._size == 0:
            raise RuntimeError("cannot sample from an empty FifoReplay; insert records first.")
        age = self._rng.integers(0, min(self._size, self._window), size=batch_size, dtype=np.int64)
        indices = (self._next - 1 - age) % self._capacity  # age 0 is the newest record
        out = {name: store[indices] for name, store in self._storage.items()}
        out["indices"] = indices
        return out

    # ---------------------------------------------------------------- state
    def state_dict(self) -> dict[str, np.ndarray]:
        """The full state as numpy arrays only (no pickling needed to save it with ``np.savez``).

        Holds the filled rows of every field (``data/<field>``), the counters and the sampling
        generator's state (JSON as uint8 bytes), so a restored memory samples identically.
        """
        state = {
            k: np.array(v, dtype=np.int64)
            for k, v in zip(_SCALARS, (self._capacity, self._window, self._size, self._next))
        }
        rng = json.dumps(self._rng.bit_generator.state).encode()
        state["rng_state"] = np.frombuffer(rng, dtype=np.uint8).copy()
        for name, store in (self._storage or {}).items():
            state[_DATA + name] = store[: self._size].copy()
        return state

    def load_state_dict(self, state: Mapping[str, np.ndarray]) -> None:
        """Replace the contents with a ``state_dict`` (or an ``np.load`` of one).

        Everything is checked before anything changes; a mismatch raises ValueError.
        """
        if not isinstance(state, Mapping):
            raise ValueError(f"load_state_dict expects a mapping of arrays, got {type(state).__name__}.")
        keys = set(state.keys())
        expected = set(_SCALARS) | {"rng_state"}
        data_keys = {k for k in keys if k.startswith(_DATA)}
        if expected - keys or keys - expected - data_keys:
            raise ValueError(
                f"not a FifoReplay state: missing {sorted(expected - keys)}, "
                f"unexpected {sorted(keys - expected - data_keys)}."
            )
        values = {}
        for key in _SCALARS:
            arr = np.asarray(state[key])
            if arr.ndim != 0 or arr.dtype.kind not in "iu":
                raise ValueError(f"state['{key}'] must be a 0-d integer array, got {arr.shape} {arr.dtype}.")
            values[key] = int(arr)
        if values["capacity"] != self._capacity or values["window"] != self._window:
            raise ValueError(
                f"state was saved with capacity {values['capacity']} and window {values['window']}; "
                f"this memory has capacity {self._capacity} and window {self._window}."
            )
        size, nxt = values["size"], values["next_index"]
        if not (0 <= size <= self._capacity and 0 <= nxt < self._capacity) or (size < self._capacity and nxt != size):
            raise ValueError(
                f"state counters are inconsistent: size={size}, next_index={nxt}, capacity={self._capacity}."
            )
        rng_arr = np.asarray(state["rng_state"])
        try:
            if rng_arr.dtype != np.uint8 or rng_arr.ndim != 1:
                raise ValueError("not a 1-d uint8 array")
            rng_state = json.loads(rng_arr.tobytes().decode())
            probe = np.random.default_rng()
            probe.bit_generator.state = rng_state  # validates the state dict
        except (ValueError, TypeError, KeyError, UnicodeDecodeError) as exc:
            raise ValueError(f"state['rng_state'] is not a generator state saved by FifoReplay ({exc}).") from None
        data = {k[len(_DATA) :]: np.asarray(state[k]) for k in data_keys}
        if size and not data:
            raise ValueError(f"state claims {size} records but holds no '{_DATA}*' arrays.")
        storage = None
        if data:
            checker = FifoReplay(self._capacity, window=self._window)
            checker._storage = self._storage  # also check against fields stored already, if any
            checked = checker._arrays(data, "state")
            if next(iter(checked.values())).shape[0] != size:
                raise ValueError(
                    f"state data holds {next(iter(checked.values())).shape[0]} records, "
                    f"but its size counter says {size}."
                )
            storage = {k: np.zeros((self._capacity,) + a.shape[1:], a.dtype) for k, a in checked.items()}
            for k, a in checked.items():
                storage[k][:size] = a
        # Everything is valid: apply.
        if storage is not None:
            self._storage = storage
        elif self._storage is not None:
            for store in self._storage.values():
                store.fill(0)
        self._size, self._next = size, nxt
        self._rng.bit_generator.state = rng_state
