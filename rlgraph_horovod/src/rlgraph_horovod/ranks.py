"""Which process of a ``horovodrun`` job this is, read from the launcher's environment.

Read without importing Horovod, so the CLI can decide early (before any framework loads)
whether this process owns the run's output folder.
"""

from __future__ import annotations

import os

#: Environment variables that carry a process's global rank, by launcher: horovodrun (Gloo),
#: Open MPI, MPICH/Intel MPI (PMI).
RANK_VARIABLES = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
SIZE_VARIABLES = ("HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")


def _first_int(names: tuple[str, ...]) -> int | None:
    for name in names:
        value = os.environ.get(name)
        if value is not None and value.strip().isdigit():
            return int(value)
    return None


def launched_rank() -> int:
    """This process's rank as the launcher set it (0 when not started by a launcher)."""
    return _first_int(RANK_VARIABLES) or 0


def launched_size() -> int:
    """Number of processes the launcher started (1 when not started by a launcher)."""
    return _first_int(SIZE_VARIABLES) or 1


def under_launcher() -> bool:
    """Whether a launcher (``horovodrun``, ``mpirun``) started this process."""
    return _first_int(RANK_VARIABLES) is not None
