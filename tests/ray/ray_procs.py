"""Find the processes of one private Ray session from outside it (for the subprocess fault tests).

Ray renames its helper processes (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``, workers),
so their command lines no longer name the session's temp dir; a finder that reads only
``/proc/<pid>/cmdline`` misses exactly the processes that outlive a killed driver (issue 19:
the orphan test passed with the watchdog removed). A process belongs to the session when its
command line, its environment (``RAY_TMPDIR``, inherited from the driver) or one of its open
files names the session's temp dir.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path


def _names(entry: Path, ray_tmp: str) -> bool:
    try:
        if ray_tmp in (entry / "cmdline").read_bytes().decode(errors="replace"):
            return True
        if f"RAY_TMPDIR={ray_tmp}".encode() in (entry / "environ").read_bytes().split(b"\0"):
            return True
        for fd in (entry / "fd").iterdir():
            if os.readlink(fd).startswith(ray_tmp):
                return True
    except OSError:  # gone meanwhile, or not ours to read
        return False
    return False


def ray_processes(ray_tmp: str | Path) -> dict[int, str]:
    """``{pid: name}`` of the live processes of the Ray session whose temp dir is ``ray_tmp``."""
    tmp, found = str(ray_tmp), {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid() and _names(entry, tmp):
            try:
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                name = (entry / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            except OSError:
                continue
            if state != "Z":  # a zombie is dead already, waiting for its parent
                found[int(entry.name)] = name
    return found


def kill_all(pids) -> None:
    """SIGKILL ``pids`` (those already gone are skipped): a test never leaves them behind."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
