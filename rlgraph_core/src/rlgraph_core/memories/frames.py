"""Image observations in replay with every distinct frame stored once.

A replay record holds ``obs`` and ``next_obs``; with a frame stack of 4, consecutive records
share 3 of their 4 frames, and a record's ``next_obs`` is the next record's ``obs``. Stored
naively that is 8 copies of every frame. :class:`FrameStore` keeps each distinct frame once and
records hold references: for an observation of shape ``(H, W, C)`` (``C`` stacked frames or
channels, the last axis as the ``frame_stack`` wrapper and NHWC networks have it) a record
stores ``C`` int32 frame slots, and a frame is an ``(H, W)`` plane; an observation of lower rank
is one frame. A record with axes before the image, a window ``(T, H, W, C)`` of the sequence
replay of a recurrent DQN, stores ``(T, C)`` slots: overlapping windows share their frames, so
every distinct frame is stored once however many windows hold it. Sampling gathers the planes
and rebuilds the stacks.

Frames are found by content (a hash of their bytes, confirmed by comparing the bytes), so
sharing needs no knowledge of env ids, episode boundaries, n-step folding or insertion order:
any record inserted from anywhere (an actor's batch through Ray, a checkpoint) is stored the
same way, and a stack across an episode boundary is rebuilt exactly as it was inserted.
Frames are reference-counted: a frame is freed when the last record that uses it is
overwritten. Hand-written because neither gymnasium nor numpy offer a content-addressed,
reference-counted array pool; SB3's and Dopamine's replays instead assume one env stream in
order, which n-step folding, vector envs and Ray actors all break.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FrameStore", "frame_layout", "frames_of", "record_shape_of", "slot_layout", "stacks_of"]


def frame_layout(record_shape: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    """``(frames per record, frame shape)``: an image ``(H, W, C)`` is ``C`` frames of ``(H, W)``, and
    a record with axes before the image (a sequence ``(T, H, W, C)`` of a recurrent replay) is
    ``T * C`` of them; anything below rank 3 is one frame."""
    slots, frame = slot_layout(record_shape)
    return int(np.prod(slots, dtype=np.int64)), frame


def slot_layout(record_shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(slot shape, frame shape)`` of a record: the frame slots a record holds are shaped like the
    record without its frame axes, ``(*lead, C)`` for ``(*lead, H, W, C)``; ``(1,)`` below rank 3."""
    shape = tuple(int(d) for d in record_shape)
    if len(shape) >= 3:
        return (*shape[:-3], shape[-1]), shape[-3:-1]
    return (1,), shape


def record_shape_of(slot_shape: tuple[int, ...], frame_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The inverse of :func:`slot_layout`: a record's shape from its slots' and its frames' shapes
    (frames of rank 2 and up are image planes, the last slot axis the channels)."""
    if len(frame_shape) < 2:
        return tuple(frame_shape)
    return (*slot_shape[:-1], *frame_shape, slot_shape[-1])


def frames_of(records: np.ndarray) -> np.ndarray:
    """``[n, *shape]`` records -> ``[n, k, *frame_shape]`` frames (see :func:`frame_layout`): the
    frames of a record in the order of its slots (:func:`slot_layout`), channels last."""
    if records.ndim >= 4:
        n, shape = len(records), records.shape[1:]
        lead = int(np.prod(shape[:-3], dtype=np.int64))
        planes = np.moveaxis(records.reshape(n, lead, *shape[-3:]), -1, 2)  # [n, lead, C, H, W]
        return planes.reshape(n, lead * shape[-1], *shape[-3:-1])
    return records[:, None]


def stacks_of(store: "FrameStore", slots: np.ndarray, split: bool) -> np.ndarray:
    """The records whose frames are ``slots`` (``[n, *slot_shape]``), as contiguous ``[n, *shape]``:
    the inverse of :func:`frames_of`. Each channel's frames are gathered into their place on the
    last axis (4x faster than gathering ``[n, k, ...]`` and moving the axis, numpy 2.4)."""
    if not split:
        return store.pool[slots[:, 0]]
    out = np.empty((*slots.shape[:-1], *store.frame_shape, slots.shape[-1]), store.dtype)
    for j in range(slots.shape[-1]):
        out[..., j] = store.pool[slots[..., j]]
    return out


class FrameStore:
    """A growable pool of distinct frames with reference counts.

    Args:
        frame_shape: shape of one frame.
        dtype: dtype of the frames.
        initial: initial pool size in frames (it grows by half when full).
    """

    def __init__(self, frame_shape: tuple[int, ...], dtype, initial: int = 1024) -> None:
        self.frame_shape = tuple(int(d) for d in frame_shape)
        self.dtype = np.dtype(dtype)
        initial = max(int(initial), 16)
        self.pool = np.zeros((initial, *self.frame_shape), self.dtype)
        self.refs = np.zeros(initial, np.int64)
        self._hashes = np.zeros(initial, np.int64)
        self._lookup: dict[int, int] = {}
        self._free = list(range(initial - 1, -1, -1))  # pop() hands out low slots first

    def __len__(self) -> int:
        """Number of distinct frames held."""
        return len(self.pool) - len(self._free)

    @property
    def frame_bytes(self) -> int:
        """Bytes of one frame."""
        return int(np.prod(self.frame_shape, dtype=np.int64)) * self.dtype.itemsize

    def nbytes(self) -> int:
        """Bytes the store holds now: the pool, its counters and the hash table (an estimate of
        CPython's dict: about 100 bytes per entry)."""
        return self.pool.nbytes + self.refs.nbytes + self._hashes.nbytes + 100 * len(self._lookup)

    def _grow(self) -> None:
        old = len(self.pool)
        new = old + max(old // 2, 16)
        pool = np.zeros((new, *self.frame_shape), self.dtype)
        pool[:old] = self.pool
        self.pool = pool
        self.refs = np.concatenate([self.refs, np.zeros(new - old, np.int64)])
        self._hashes = np.concatenate([self._hashes, np.zeros(new - old, np.int64)])
        self._free.extend(range(new - 1, old - 1, -1))

    def add(self, frames: np.ndarray) -> np.ndarray:
        """Reference each of ``frames`` (``[m, *frame_shape]``), storing the ones not held yet;
        returns their int32 slots (one reference taken per frame)."""
        frames = np.ascontiguousarray(frames, self.dtype)
        slots = np.empty(len(frames), np.int32)
        lookup, pool = self._lookup, self.pool
        for i, frame in enumerate(frames):
            h = hash(frame.data.tobytes())
            slot = lookup.get(h)
            if slot is None or not np.array_equal(pool[slot], frame):
                if not self._free:
                    self._grow()
                    pool = self.pool
                slot = self._free.pop()
                pool[slot] = frame
                self._hashes[slot] = h
                if h not in lookup:  # a hash collision keeps the first frame findable
                    lookup[h] = slot
            self.refs[slot] += 1
            slots[i] = slot
        return slots

    def release(self, slots: np.ndarray) -> None:
        """Drop one reference per entry of ``slots``; frames left without any are freed."""
        slots = np.asarray(slots, np.int64).ravel()
        if not slots.size:
            return
        np.subtract.at(self.refs, slots, 1)
        dead = np.unique(slots[self.refs[slots] == 0])
        for slot in dead.tolist():
            h = int(self._hashes[slot])
            if self._lookup.get(h) == slot:
                del self._lookup[h]
            self._free.append(slot)

    def get(self, slots: np.ndarray) -> np.ndarray:
        """The frames at ``slots`` (any shape of int array -> ``[*slots.shape, *frame_shape]``)."""
        return self.pool[slots]

    def compact(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(frames, remapped slots)``: the frames ``slots`` use, once each, in first-use order, and
        ``slots`` renumbered into them (for a checkpoint that holds no free or dead pool rows)."""
        flat = np.asarray(slots, np.int64).ravel()
        used, inverse = np.unique(flat, return_inverse=True)
        return self.pool[used], inverse.astype(np.int32).reshape(np.shape(slots))

    @classmethod
    def from_frames(cls, frames: np.ndarray, slots: np.ndarray, initial: int = 1024) -> "FrameStore":
        """A store holding ``frames`` (distinct or not) referenced by ``slots`` as :meth:`compact` wrote them."""
        frames = np.asarray(frames)
        store = cls(frames.shape[1:], frames.dtype, initial=max(initial, len(frames)))
        flat = np.asarray(slots, np.int64).ravel()
        counts = np.bincount(flat, minlength=len(frames)) if flat.size else np.zeros(len(frames), np.int64)
        store.pool[: len(frames)] = frames
        store.refs[: len(frames)] = counts
        store._free = [s for s in store._free if s >= len(frames)]
        for slot in range(len(frames)):
            if counts[slot] == 0:
                store._free.append(slot)
                continue
            h = hash(store.pool[slot].data.tobytes())
            store._hashes[slot] = h
            store._lookup.setdefault(h, slot)
        return store
