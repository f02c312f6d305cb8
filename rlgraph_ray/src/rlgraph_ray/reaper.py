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

It also says what died when Ray ends the driver itself: a driver whose raylet is gone (the
raylet fate-shares with its dashboard and runtime-env agents, so killing any of them ends it) is
terminated by Ray's C++ core within a second, with ``_exit``, so no Python code of the run gets
to write a final checkpoint. The watchdog checks Ray's own processes (GCS, raylet, agents,
dashboard, monitors) every 50 ms; when one died while the driver lived and the driver died within
``REPORT_WINDOW_S`` after, it writes one paragraph to the driver's stderr and ``summary.json`` into the run
folder (``ended_by: error``, what died, the newest checkpoint, which ``--resume`` takes).

So that such a run loses (about) no work, the driver keeps a recent complete checkpoint of its
learner outside the run folder, on a RAM-backed path (``/dev/shm/rlgraph-snapshot-<pid>-*``, see
:func:`rlgraph_ray.cluster.snapshot_folder`), rewritten atomically at most once a second after a
learner round (:attr:`rlgraph_core.execution.recorder.RunRecorder.snapshot_path`). When Ray ended
the driver, the watchdog copies that snapshot into the run folder as its newest periodic
checkpoint (``checkpoints/step-<env steps>``, ``latest`` switched to it) with
:func:`rlgraph_core.checkpoint.adopt_checkpoint`, which checks every file before the copy gets a
checkpoint's name (never unpickling), and names it. The replay shards died with Ray: the
snapshot holds none, so a resumed run starts them empty. Whatever ended the driver, the
watchdog then removes the snapshot folder (after a normal end the driver has removed it).

When one of Ray's processes dies while the driver lives, the watchdog also leaves a note
(``ray-died.json`` in the snapshot folder): a driver that Ray does not end at once, and whose run
then fails (its actors can no longer be placed ...), names what died in its own error
(:class:`rlgraph_ray.cluster.RayProcessDied`), with its own final checkpoint.

The window is wide because the driver does not always end at once: measured here 0.39 s on a
quiet machine, but in CI (2 loaded cores) the driver lived on until the GCS had marked the node
dead by missed health checks (Ray's defaults: 5 checks 3 s apart after a start-up delay), which
is tens of seconds. A driver that stops normally stops the watchdog first, so a wide window
cannot misreport an ordinary end.

Hand-written: Ray offers no option to tie its processes' lives to the driver's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

__all__ = ["REPORT_WINDOW_S", "quiet_reaper", "start_reaper", "stop_reaper"]

REPORT_WINDOW_S = 180.0
"""A Ray process death is blamed for the driver's end when the driver ends within this many seconds."""

_SCRIPT = r"""
import json, os, shutil, signal, sys, time, warnings

driver, me, run_dir, window, snapshot = int(sys.argv[1]), os.getpid(), sys.argv[2], float(sys.argv[3]), sys.argv[4]
CORE = (  # Ray's own processes of the session (workers are the executor's business), by command line;
    # the agents are matched before they rename themselves and after (their arguments name the raylet)
    ("ray::DashboardAgent", "dashboard agent"), ("dashboard/agent.py", "dashboard agent"),
    ("ray::RuntimeEnvAgent", "runtime-env agent"), ("runtime_env/agent/", "runtime-env agent"),
    ("dashboard/dashboard.py", "dashboard"), ("log_monitor.py", "log monitor"),
    ("autoscaler/_private/monitor.py", "autoscaler monitor"),
)

def stat(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields  # [state, ppid, ... start time at 19]

def table():
    procs = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = stat(name)
            if fields is not None:
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

# Who is blamed when several are seen gone in one tick, first to last: an agent's death takes the raylet
# with it (they fate-share), and the raylet's takes the agents, the dashboard, the monitors and the
# driver within milliseconds, so the leaves come first and the raylet last (seen here: all of them
# gone within one tick after a kill of the dashboard agent).
BLAME_ORDER = ("dashboard agent", "runtime-env agent", "dashboard", "autoscaler monitor", "log monitor", "GCS server", "raylet")

def core_name(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().decode(errors="replace").split("\0")
    except OSError:
        return None
    if args[0].endswith("/raylet"):
        return "raylet"
    if args[0].endswith("/gcs_server"):
        return "GCS server"
    cmd = " ".join(args)
    return next((name for key, name in CORE if key in cmd), None)

def alive(pid):
    fields = stat(pid)
    return fields is not None and fields[0] not in "ZX"

quiet = []  # SIGUSR1: Ray was shut down on purpose (a failed start), nothing to report
signal.signal(signal.SIGUSR1, lambda *args: quiet.append(True))

def gone(pid, started):
    fields = stat(pid)
    return fields is None or fields[0] in "ZX" or fields[19] != started

def report(died, with_it=()):
    # Ray ends its driver from C++ (no Python runs) once its raylet is gone: say what died and
    # where the work is, as summary.json does for any run that ends with an error.
    name, pid = died
    checkpoint = meta = None
    adopted = had_snapshot = False
    problem = None
    if run_dir:
        warnings.simplefilter("ignore")  # a snapshot interrupted mid-save is recovered: no warning needed
        try:
            from rlgraph_core.checkpoint import adopt_checkpoint, latest_checkpoint, read_meta

            checkpoint = latest_checkpoint(run_dir)
            meta = read_meta(checkpoint)[0] if checkpoint is not None else None
            source = os.path.join(snapshot, "checkpoint") if snapshot else None
            had_snapshot = source is not None and os.path.isdir(snapshot) and bool(os.listdir(snapshot))
            if had_snapshot:
                newest = read_meta(source)[0]
                steps = lambda m: ((m or {}).get("counters") or {}).get("timesteps", -1)
                if meta is None or steps(newest) > steps(meta):
                    checkpoint = adopt_checkpoint(source, run_dir)  # checked before it gets a checkpoint's name
                    meta, adopted = read_meta(checkpoint)[0], True
        except Exception as exc:
            problem = f"{type(exc).__name__}: {exc}"
    counters = (meta or {}).get("counters", {})
    error = (
        f"RayProcessDied: Ray's {name} (pid {pid}) of this run's private Ray session died"
        + (", and with it its " + ", ".join(f"{other} (pid {other_pid})" for other, other_pid in with_it) if with_it else "")
        + ", and Ray then ended "
        f"the run's driver (pid {driver}) at once, from its C++ core, before the driver could write a final checkpoint"
    )
    if adopted:
        kind = (
            "the learner's in-memory snapshot, refreshed about once a second, now in the run folder; the replay "
            "shards died with Ray and are not in it, so a resumed run starts them empty"
        )
    elif problem:
        kind = f"a periodic one; the driver's in-memory snapshot could not be used ({problem})"
    else:
        kind = "a periodic one" + ("; the driver's in-memory snapshot was not newer" if had_snapshot else "")
    where = (
        f"The newest checkpoint is {checkpoint} ({counters.get('timesteps', '?')} env steps; {kind}); resume with: "
        f"rlgraph train --resume {run_dir}"
        if checkpoint is not None
        else "No checkpoint was written before it (train.checkpoint_interval)"
        + (f"; the driver's in-memory snapshot could not be used ({problem})." if problem else ".")
    )
    sys.stderr.write(f"rlgraph-ray: the run failed: {error}. {where}\n")
    sys.stderr.flush()
    if run_dir and os.path.isdir(run_dir):
        summary = {
            "ended_by": "error", "exit_code": 1, "error": error, "died": name,
            "checkpoint": None if checkpoint is None else str(checkpoint),
            "checkpoint_from_snapshot": adopted,
            "timesteps": counters.get("timesteps"), "updates": counters.get("updates"),
            "written_by": "rlgraph-ray watchdog (the driver could not write it)",
        }
        tmp = os.path.join(run_dir, f".summary.json.{me}.tmp")
        try:
            with open(tmp, "w") as f:
                json.dump(summary, f, indent=2)
            os.replace(tmp, os.path.join(run_dir, "summary.json"))
        except OSError:
            pass

def note(name, pid):
    # For a driver that Ray does not end at once: it names what died when its run fails (rlgraph_ray.cluster).
    if snapshot and os.path.isdir(snapshot):
        tmp = os.path.join(snapshot, f".ray-died.{me}.tmp")
        try:
            with open(tmp, "w") as f:
                json.dump({"name": name, "pid": pid}, f)
            os.replace(tmp, os.path.join(snapshot, "ray-died.json"))
        except OSError:
            pass

seen, core, died, tick = {}, {}, None, 0
while True:
    if tick % 20 == 0:  # the whole process table once a second; Ray's own processes every 50 ms
        for pid, started in descendants(table()).items():
            if pid not in seen:
                seen[pid] = started
                name = core_name(pid)
                if name is not None:
                    core[pid] = (name, started)
    ended = [(name, pid) for pid, (name, started) in list(core.items()) if gone(pid, started)]
    for _, pid in ended:
        del core[pid]
    driver_alive = alive(driver)
    if ended and died is None:
        # It died while the driver lived, or in the same 50 ms as the driver: Ray's C++ core can end
        # the driver that fast after its raylet goes, whereas a killed driver leaves Ray's processes
        # alive (they are what this watchdog ends), so the Ray process is taken to have gone first.
        ended.sort(key=lambda item: BLAME_ORDER.index(item[0]) if item[0] in BLAME_ORDER else -1)
        died = (*ended[0], time.monotonic(), ended[1:])
        note(*ended[0])
    if not driver_alive:
        break
    tick += 1
    time.sleep(0.05)
if died is not None and not quiet and time.monotonic() - died[2] < window:
    report(died[:2], died[3])
if snapshot:  # in RAM: it must not outlive the run, whatever ended it
    shutil.rmtree(snapshot, ignore_errors=True)
procs = table()
for pid, started in seen.items():
    if pid in procs and procs[pid][1] == started:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
"""


def start_reaper(run_dir: str | None = None, snapshot: str | None = None) -> subprocess.Popen | None:
    """Start the watchdog for this process's private Ray session (None where ``/proc`` is missing).

    ``run_dir``: the run's output folder, where it writes ``summary.json`` should Ray end the driver.
    ``snapshot``: the folder whose ``checkpoint`` the driver keeps refreshed; moved into ``run_dir``
    as its newest checkpoint should Ray end the driver, and removed once the driver is gone.
    """
    if not os.path.isdir("/proc/self"):
        return None
    return subprocess.Popen(
        [sys.executable, "-c", _SCRIPT, str(os.getpid()), run_dir or "", str(REPORT_WINDOW_S), snapshot or ""],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=None,  # the driver's: where it reports what died
        start_new_session=True,
        close_fds=True,
    )


def quiet_reaper(reaper: subprocess.Popen | None) -> None:
    """Tell the watchdog that Ray's processes are being ended on purpose (a failed start): it still
    ends what is left once this process exits, but reports nothing."""
    if reaper is not None:
        with contextlib.suppress(OSError):
            reaper.send_signal(signal.SIGUSR1)


def stop_reaper(reaper: subprocess.Popen | None) -> None:
    """End the watchdog after a normal ``ray.shutdown()`` (nothing is left for it to do)."""
    if reaper is None:
        return
    reaper.kill()
    reaper.wait()
