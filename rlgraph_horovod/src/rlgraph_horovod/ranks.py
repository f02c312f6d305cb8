"""Which process of a ``horovodrun`` job this is, read from the launcher's environment.

Read without importing Horovod, so the CLI can decide early (before any framework loads)
whether this process owns the run's output folder, and config validation can tell whether the
launch is elastic (``executor.elastic`` needs one).
"""

from __future__ import annotations

import os

from rlgraph_core.errors import ConfigError

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


#: Launch line shown in errors and docs (a discovery script names every local slot once).
ELASTIC_LAUNCH = (
    "horovodrun -np 2 --min-np 1 --max-np 2 --host-discovery-script ./discover_hosts.sh --gloo "
    "rlgraph train CONFIG --executor horovod --set executor.elastic=true"
)


def elastic_launch() -> bool:
    """Whether ``horovodrun`` started this process in elastic mode (it sets ``HOROVOD_ELASTIC=1``)."""
    return os.environ.get("HOROVOD_ELASTIC") == "1"


def require_elastic_launch() -> None:
    """Raise :class:`ConfigError` when ``executor.elastic`` is on but the launch is not elastic."""
    if not elastic_launch():
        raise ConfigError(
            "'executor.elastic' is true but horovodrun was not started in elastic mode, so a lost rank could "
            "not be replaced by a reset (the job would just fail). Launch with --min-np/--max-np and a "
            "--host-discovery-script (or several --hosts), e.g.\n  " + ELASTIC_LAUNCH + "\nwhere "
            "discover_hosts.sh prints one line per host and slot count. On one machine name it twice "
            "('localhost:1' and '127.0.0.1:1'): Horovod blacklists the whole host of a rank that dies, and a "
            "job whose every host is blacklisted stops. Or set executor.elastic: false."
        )
