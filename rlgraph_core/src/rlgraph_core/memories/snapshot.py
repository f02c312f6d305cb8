"""A replay memory's state in the checkpoint format: checked from the ``.npy`` headers, then by value.

A memory's ``state_dict`` is arrays only (records under ``data/<field>``, counters, generator
state, priorities). Wherever such a state is stored, in an agent's checkpoint or as a replay
shard's snapshot or checkpoint attachment, the same checks apply before it is loaded: a field's
records must fit the memory's capacity and, where the inserter declares its record spaces,
have exactly their shape and dtype (from the header, before any data is read) and values
inside their bounds; the memory's own ``load_state_dict`` checks the rest before it changes.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from rlgraph_core.checkpoint import Headers, dtype_family, is_count, load_arrays, nonfinite_records_problem, save_arrays
from rlgraph_core.errors import CheckpointError, NonFiniteError
from rlgraph_core.memories.frames import slot_layout
from rlgraph_core.spaces import BoundedSpace, Space, SpaceError

#: Bytes per record allowed for a replay field without a declared record space.
MAX_UNDECLARED_RECORD_BYTES = 2**24

DATA_PREFIX = "data/"
#: Replay fields stored as shared frames (uint8 observations): the frames, and each record's frame slots.
FRAMES_PREFIX = "frames/"
FRAME_INDEX_PREFIX = "frame_index/"


@dataclass(frozen=True)
class RecordBounds:
    """What a replay memory's record arrays may be: at most ``capacity`` records along their first
    axis; with ``records`` (the inserter's record spaces) exactly those fields with their shapes and
    dtypes, otherwise at most ``max_record_bytes`` per record. Each ``*_problem`` method says why
    an array of ``shape``/``dtype`` does not fit, or returns None."""

    capacity: int | None
    records: Mapping[str, Space] | None
    max_record_bytes: int = MAX_UNDECLARED_RECORD_BYTES

    def _count_problem(self, count: int) -> str | None:
        if self.capacity is not None and count > self.capacity:
            return f"claims {count:,} records, but the replay memory holds at most {self.capacity:,}"
        return None

    def _unstored_problem(self, field: str, what: str) -> str | None:
        if self.records is not None and field not in self.records:
            return f"{what} that is not stored (the fields are {sorted(self.records)})"
        return None

    def frames_problem(self, group: str, shape: tuple[int, ...], dtype: Any) -> str | None:
        """Why the array cannot hold the shared frames of the observation field ``group`` (``obs``
        or ``obs/<key>``): at most two records' frames per record held, each frame the record's
        image's ``(H, W)`` planes (:func:`~rlgraph_core.memories.frames.slot_layout`), or the whole record
        below rank 3."""
        shape, dtype = tuple(int(d) for d in shape), np.dtype(dtype)
        if not shape:
            return "must hold frames along its first axis, but is 0-d"
        space = self.records.get(group) if self.records is not None else None
        if space is not None:
            record = tuple(space.shape)
            slots, frame = slot_layout(record)
            k = math.prod(slots)
            if shape[1:] != frame or dtype != space.dtype:
                return (
                    f"holds frames of shape {shape[1:]} and dtype {dtype}, but '{group}' records of shape {record} "
                    f"and dtype {space.dtype} have frames of shape {frame}"
                )
            if self.capacity is not None and shape[0] > 2 * k * self.capacity:
                return (
                    f"claims {shape[0]:,} frames, more than the {2 * k * self.capacity:,} that "
                    f"{self.capacity:,} records can use"
                )
            return None
        unstored = self._unstored_problem(group, "holds frames of a field")
        if unstored is not None:
            return unstored
        frame_bytes = math.prod(shape[1:]) * dtype.itemsize
        if frame_bytes > MAX_UNDECLARED_RECORD_BYTES:
            return f"claims {frame_bytes:,} bytes per frame, more than {MAX_UNDECLARED_RECORD_BYTES:,}"
        return None

    def field_problem(self, field: str, shape: tuple[int, ...], dtype: Any) -> str | None:
        """Why the array cannot hold the replay records of ``field``."""
        shape, dtype = tuple(int(d) for d in shape), np.dtype(dtype)
        if not shape:
            return "must hold replay records along its first axis, but is 0-d"
        too_many = self._count_problem(shape[0])
        if too_many is not None:
            return too_many
        if self.records is None:
            record_bytes = math.prod(shape[1:]) * dtype.itemsize
            if record_bytes > self.max_record_bytes:
                return f"claims {record_bytes:,} bytes per record, more than {self.max_record_bytes:,}"
            return None
        space = self.records.get(field)
        if space is None:
            return self._unstored_problem(field, "is a replay field")
        if shape[1:] != tuple(space.shape) or dtype != space.dtype:
            return (
                f"holds '{field}' records of shape {shape[1:]} and dtype {dtype}, but '{field}' records have "
                f"shape {tuple(space.shape)} and dtype {space.dtype} ({space!r})"
            )
        return None

    def array_problem(self, name: str, shape: tuple[int, ...], dtype: Any) -> str | None:
        """Why a memory state array holding records (``data/<field>``, ``frames/<group>`` or
        ``frame_index/<field>``) cannot have ``shape``/``dtype``."""
        if name.startswith(DATA_PREFIX):
            return self.field_problem(name[len(DATA_PREFIX) :], shape, dtype)
        if name.startswith(FRAMES_PREFIX):
            return self.frames_problem(name[len(FRAMES_PREFIX) :], shape, dtype)
        if len(shape) < 2 or math.prod(shape[1:]) > 2**16 or np.dtype(dtype).kind not in "iu":
            return "must hold integer frame slots of shape (records, ..., frames per record)"
        return self._count_problem(shape[0]) or self._unstored_problem(
            name[len(FRAME_INDEX_PREFIX) :], "is a replay field"
        )


def replay_values_problem(
    data: Mapping[str, np.ndarray],
    records: Mapping[str, Space] | None,
    prefix: str = DATA_PREFIX,
    framed: set[str] | frozenset[str] = frozenset(),
) -> str | None:
    """Why the replay fields ``data`` (``{field: records}``) cannot be loaded, or None.

    With ``records`` every field must be present (in ``data``, or in ``framed``: stored as shared
    frames, whose frames the header check saw) and values of bounded spaces within bounds (e.g.
    actions within the action space); ``prefix`` is how errors name a field's array.
    """
    if records is None or not (data or framed):
        return None
    if set(data) | set(framed) != set(records):
        return (
            f"the replay fields are {sorted(set(data) | set(framed))}, but every record must carry "
            f"exactly {sorted(records)}."
        )
    for key, space in records.items():
        if key not in data:
            continue  # shared frames: uint8, within any integer bounds a uint8 image space has
        if not isinstance(space, BoundedSpace) or np.all(np.isinf(space.low)) and np.all(np.isinf(space.high)):
            continue  # no finite bounds to check (shape and dtype were checked from the header)
        try:
            space.with_batch_rank().check(data[key], name=f"replay field '{prefix}{key}'")
        except SpaceError as exc:
            return f"{str(exc).rstrip('.')}; replay records must be values that could have been inserted."
    return None


def memory_state_check(capacity: int, records: Mapping[str, Space] | None, what: str):
    """A header check (for :func:`~rlgraph_core.checkpoint.load_arrays` and friends) of one memory's
    ``state_dict`` of ``capacity`` records; ``what`` names it in errors."""
    bounds = RecordBounds(capacity, records)

    def check(headers: Headers) -> None:
        for name, (shape, dtype) in headers.items():
            if dtype_family(dtype) is None:
                problem: str | None = "is not numeric; replay state arrays are bool, integer or float"
            elif name.startswith((DATA_PREFIX, FRAMES_PREFIX, FRAME_INDEX_PREFIX)):
                problem = bounds.array_problem(name, shape, dtype)
            else:  # counters, generator state, priorities: at most a few numbers per record
                nbytes = math.prod(shape) * np.dtype(dtype).itemsize
                problem = None if nbytes <= 64 * capacity + 4096 else f"claims {nbytes:,} bytes"
            if problem:
                raise CheckpointError(
                    f"{what}: array '{name}' (shape {tuple(shape)}, dtype {dtype}) {problem}. Nothing was loaded."
                )

    return check


def load_memory_state(
    memory,
    state: Mapping[str, np.ndarray],
    records: Mapping[str, Space] | None,
    what: str,
    allow_nonfinite_obs: bool = False,
) -> None:
    """Check ``state``'s records by value (finite, as an agent checkpoint's replay is checked, except
    observations with ``allow_nonfinite_obs``; within their spaces' bounds), then
    ``memory.load_state_dict(state)`` (which checks the rest).

    Raises:
        CheckpointError: naming ``what`` and the problem; the memory is unchanged then.
    """
    problem = nonfinite_records_problem(state, allow_nonfinite_obs)
    if problem:
        raise CheckpointError(
            f"{what} cannot be loaded: it holds {problem}; rlgraph never saves non-finite replay records "
            f"(observations and rewards are checked where they enter), so they are corrupt or were not written "
            f"by rlgraph, and training on them would only produce NaN. Nothing was loaded; remove the snapshot "
            f"(the shard then starts empty) or resume from an earlier checkpoint of the run."
        )
    data = {k[len(DATA_PREFIX) :]: v for k, v in state.items() if k.startswith(DATA_PREFIX)}
    framed = {k[len(FRAME_INDEX_PREFIX) :] for k in state if k.startswith(FRAME_INDEX_PREFIX)}
    problem = replay_values_problem(data, records, framed=framed)
    if problem:
        raise CheckpointError(f"{what} cannot be loaded: {problem}")
    try:
        memory.load_state_dict(state)
    except ValueError as exc:
        raise CheckpointError(
            f"{what} cannot be loaded into this {type(memory).__name__} (capacity {memory.capacity}): {exc}"
        ) from None


def save_memory_snapshot(
    directory: str | os.PathLike, memory, info: Mapping[str, Any], allow_nonfinite_obs: bool = False
) -> str:
    """Write ``memory.state_dict()`` and the JSON ``info`` as the array folder ``directory``, atomically.

    Raises:
        NonFiniteError: a record is NaN or infinite (observations exempt with ``allow_nonfinite_obs``),
            which loading would refuse; nothing was written and the previous snapshot stays.
    """
    state = memory.state_dict()
    problem = nonfinite_records_problem(state, allow_nonfinite_obs)
    if problem:
        raise NonFiniteError(
            f"Refused to write the replay snapshot '{directory}': the memory holds {problem}, which loading "
            f"would refuse (rlgraph never saves non-finite replay records). Nothing was written; the previous "
            f"snapshot is unchanged."
        )
    return save_arrays(directory, state, info)


def load_memory_snapshot(
    directory: str | os.PathLike, memory, records: Mapping[str, Space] | None, allow_nonfinite_obs: bool = False
) -> dict:
    """Check the snapshot ``directory`` against ``memory`` (capacity, record spaces, finite values
    except observations with ``allow_nonfinite_obs``) and load it; its info.

    Raises:
        CheckpointError: a missing, corrupt or mismatching snapshot (``memory`` is unchanged).
    """
    what = f"Replay snapshot '{directory}'"
    info, state = load_arrays(directory, memory_state_check(memory.capacity, records, what))
    inserted = info.get("inserted", 0)
    if not is_count(inserted):
        raise CheckpointError(f"{what} records {inserted!r} inserts, not a non-negative integer; corrupt snapshot.")
    load_memory_state(memory, state, records, what, allow_nonfinite_obs)
    return info
