"""How many bytes a replay memory will take, and whether that fits in this machine's memory.

A replay record of the off-policy agents holds the observation twice (``obs`` and ``next_obs``;
float observations as float32, others in their own dtype), the action, the reward (float32),
the terminal flag (bool) and the discount (float32); a prioritized memory adds a sum and a min
segment tree of float64 over the next power of two above its capacity. uint8 observations
(images) in a memory with ``frames: auto`` are stored as shared frames
(:mod:`rlgraph_core.memories.frames`): per record, the frames new to it (one for a stack of
``frame_stack`` frames, all ``C`` planes of an unstacked ``(H, W, C)`` image), their hash-table
entries, and ``C`` int32 frame slots for each of ``obs`` and ``next_obs``. The estimate is
``capacity x record`` (+ trees), compared before the memory is built with the memory available
to this process (``MemAvailable`` of ``/proc/meminfo``, lowered to a cgroup limit where one is set).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from rlgraph_core.errors import ConfigError
from rlgraph_core.memories.frames import frame_layout
from rlgraph_core.spaces import Space, SpaceError, from_gym

__all__ = ["available_memory_bytes", "check_replay_fits", "estimate_replay_bytes", "format_bytes", "record_bytes"]


def _numel(space) -> int:
    """Number of scalars in one value of ``space`` (all leaves of a container)."""
    return sum(int(np.prod(leaf.shape, dtype=np.int64)) if leaf.shape else 1 for leaf in space.flatten().values())


def _action_bytes(space) -> int:
    """Bytes of one action as replay stores it: floats as float32, integers as int64, bools as bool."""
    total = 0
    for leaf in space.flatten().values():
        kind = np.dtype(leaf.dtype).kind if leaf.dtype is not None else "f"
        item = 4 if kind == "f" else 1 if kind == "b" else 8
        total += (int(np.prod(leaf.shape, dtype=np.int64)) if leaf.shape else 1) * item
    return total


#: Bytes a shared frame costs beside its pixels: its hash-table entry, reference count and hash.
FRAME_OVERHEAD_BYTES = 116


def _obs_leaf_bytes(leaf, frames: str, frame_stack: int) -> int:
    """Bytes one observation leaf takes in a record, ``obs`` and ``next_obs`` together."""

    shape = tuple(leaf.shape or ())
    numel = int(np.prod(shape, dtype=np.int64)) if shape else 1
    dtype = np.dtype(leaf.dtype) if leaf.dtype is not None else np.dtype(np.float32)
    if dtype.kind == "f":
        return 2 * 4 * numel
    if frames != "auto" or dtype != np.uint8:
        return 2 * dtype.itemsize * numel
    k, frame_shape = frame_layout(shape)
    new = 1 if (len(shape) >= 3 and frame_stack > 1 and k == frame_stack) else k
    frame_bytes = int(np.prod(frame_shape, dtype=np.int64)) if frame_shape else 1
    return new * (frame_bytes + FRAME_OVERHEAD_BYTES) + 2 * 4 * k


def record_bytes(observation_space, action_space, frames: str = "auto", frame_stack: int = 1) -> int:
    """Bytes of one replay record: obs and next_obs (float ones as float32, others in their dtype;
    uint8 ones as shared frames with ``frames="auto"``, one new frame per record when the last
    axis stacks ``frame_stack`` > 1 frames), the action, reward (float32), terminal (bool) and
    discount (float32).

    ``observation_space`` and ``action_space`` are rlgraph spaces (or gymnasium spaces, which are
    converted).
    """
    obs, act = _as_space(observation_space), _as_space(action_space)
    obs_bytes = sum(_obs_leaf_bytes(leaf, frames, frame_stack) for leaf in obs.flatten().values())
    return obs_bytes + _action_bytes(act) + 4 + 1 + 4


def estimate_replay_bytes(
    capacity: int,
    observation_space,
    action_space,
    prioritized: bool = False,
    frames: str = "auto",
    frame_stack: int = 1,
) -> int:
    """Bytes of a full replay memory of ``capacity`` records (plus segment trees when prioritized);
    ``frames`` and ``frame_stack`` as :func:`record_bytes` takes them."""
    total = int(capacity) * record_bytes(observation_space, action_space, frames, frame_stack)
    if prioritized:
        leaves = 1 << max(int(capacity) - 1, 0).bit_length()
        total += 2 * (2 * leaves * 8)  # a sum and a min tree, float64, 2 x leaves nodes each
    return total


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup_available() -> int | None:
    """Memory left under this process's cgroup limit (v2 or v1), if a limit is set."""
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        limit, usage = _read_int(limit_file), _read_int(usage_file)
        if limit is not None and usage is not None and limit < (1 << 60):
            return max(limit - usage, 0)
    return None


def available_memory_bytes() -> int | None:
    """Memory available to this process now, in bytes (None where it cannot be told).

    ``MemAvailable`` of ``/proc/meminfo`` (memory that can be had without swapping), else the
    free physical pages from ``os.sysconf``; lowered to what a cgroup memory limit leaves.
    """
    available = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            available = None
    cgroup = _cgroup_available()
    if cgroup is not None:
        available = cgroup if available is None else min(available, cgroup)
    return available


def format_bytes(n: float) -> str:
    """``n`` bytes in a readable unit (``1.5 GiB``)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def check_replay_fits(
    capacity: int,
    observation_space,
    action_space,
    prioritized: bool = False,
    field: str = "agent.memory.capacity",
    available: int | None = None,
    frames: str = "auto",
    frame_stack: int = 1,
) -> int:
    """Raise a ConfigError if a replay memory of ``capacity`` records cannot fit in memory.

    Args:
        capacity: records the memory holds.
        observation_space / action_space: the environment's spaces (rlgraph or gymnasium).
        prioritized: add the segment trees of a prioritized memory.
        field: the config path named in the error.
        available: bytes available (default: :func:`available_memory_bytes`; not checked when
            that cannot be told).
        frames / frame_stack: how uint8 observations are stored (see :func:`record_bytes`).

    Returns:
        The estimated size in bytes.
    """
    size = estimate_replay_bytes(capacity, observation_space, action_space, prioritized, frames, frame_stack)
    available = available_memory_bytes() if available is None else available
    if available is not None and size > available:
        per_record = record_bytes(observation_space, action_space, frames, frame_stack)
        obs = _as_space(observation_space)
        half = _round_down(available // 2 // (per_record + (32 if prioritized else 0)))
        raise ConfigError(
            f"'{field}' = {capacity}: a replay memory of that many records needs about "
            f"{format_bytes(size)} ({per_record} bytes per record: the observation, shape {tuple(obs.shape or ())}, "
            f"as obs and next_obs, the action, reward, terminal flag and discount"
            f"{'; plus its segment trees' if prioritized else ''}), but only {format_bytes(available)} of "
            f"memory is available; lower the capacity (about {half} records would take half of it) or "
            f"run on a machine with more memory."
        )
    return size


def _round_down(n: int) -> int:
    """``n`` rounded down to two significant digits (at least 1)."""
    if n < 100:
        return max(int(n), 1)
    scale = 10 ** (len(str(int(n))) - 2)
    return int(n) // scale * scale


def _as_space(space):

    if isinstance(space, Space):
        return space
    try:
        return from_gym(space)
    except SpaceError as exc:  # a text space (MiniGrid's mission): one paragraph, not a traceback
        raise ConfigError(f"The environment's space cannot be used: {exc}") from None
