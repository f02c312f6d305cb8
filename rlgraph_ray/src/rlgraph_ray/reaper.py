"""A private Ray session never outlives its driver: a small watchdog process ends it after ``kill -9``.

``ray.init(address="local")`` starts Ray's processes (GCS, raylet, dashboard and runtime-env
agents ...) as descendants of the driver. ``ray.shutdown()`` stops them when the run ends in any
normal way; a driver killed with SIGKILL runs no code, and some of them (measured: the dashboard
agent and the runtime-env agent, ~100 MB each) stayed alive as orphans.

:func:`start_reaper` starts a separate, tiny Python process (its own session, so a Ctrl-C to the
driver's process group does not reach it) that notes the driver's descendants every second, by
pid and start time (so a reused pid is never touched), and, once the driver is gone, kills
those still alive. It exits then, or when :func:`stop_reaper` ends it after a normal shutdown.
Linux only (it reads ``/proc``); elsewhere it is not started.

Hand-written: Ray offers no option to tie its processes' lives to the driver's.
"""

from __future__ import annotations

import os
import subprocess
import sys

__all__ = ["start_reaper", "stop_reaper"]

_SCRIPT = r"""
import os, signal, sys, time

driver, me = int(sys.argv[1]), os.getpid()

def table():
    procs = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        procs[int(name)] = (int(fields[1]), fields[19])  # ppid, start time
    return procs

def descendants(procs):
    children = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    found, stack = {}, [driver]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child != me and child not in found:
                found[child] = procs[child][1]
                stack.append(child)
    return found

def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

seen = {}
while alive(driver):
    seen.update(descendants(table()))
    time.sleep(1.0)
procs = table()
for pid, started in seen.items():
    if pid in procs and procs[pid][1] == started:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
"""


def start_reaper() -> subprocess.Popen | None:
    """Start the watchdog for this process's private Ray session (None where ``/proc`` is missing)."""
    if not os.path.isdir("/proc/self"):
        return None
    return subprocess.Popen(
        [sys.executable, "-c", _SCRIPT, str(os.getpid())],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )


def stop_reaper(reaper: subprocess.Popen | None) -> None:
    """End the watchdog after a normal ``ray.shutdown()`` (nothing is left for it to do)."""
    if reaper is None:
        return
    reaper.kill()
    reaper.wait()
