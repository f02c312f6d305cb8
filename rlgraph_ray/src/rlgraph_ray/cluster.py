"""Ray set-up shared by the Ray executors: a private local Ray or a named cluster, CPU checks,
placement with a timeout, and actor names a run (or a test) can find.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import tempfile
import time
import uuid
import warnings
from pathlib import Path
from typing import Iterator, Sequence

import ray

from rlgraph_core.errors import RLGraphError
from rlgraph_core.plugins.manager import DISABLE_ENV
from rlgraph_ray.reaper import quiet_reaper, start_reaper, stop_reaper


class RayConnectError(RLGraphError):
    """``executor.address`` names a cluster that cannot be reached."""


class RayProcessDied(RLGraphError):
    """One of Ray's own processes of the run's private Ray session died (its raylet, GCS, an agent ...)."""


def ray_process_death(session: dict) -> tuple[str, int] | None:
    """``(what, pid)`` of the first of Ray's own processes that the watchdog saw die while this
    driver lived (:mod:`rlgraph_ray.reaper`), or None (none died, or no private Ray with a run folder)."""
    snapshot = session.get("snapshot")
    if snapshot is None:
        return None
    try:
        with open(Path(snapshot).parent / "ray-died.json") as f:
            found = json.load(f)
        return str(found["name"]), int(found["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``host:port`` or ``ray://host:port`` address; None for ``auto``."""
    rest = address[len("ray://") :] if address.startswith("ray://") else address
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]") or "127.0.0.1", int(port)


def probe_address(
    address: str,
    timeout_s: float,
    setting: str = "executor.address",
    timeout_setting: str = "executor.connect_timeout_s",
) -> None:
    """Raise :class:`RayConnectError` unless a TCP connection to ``address`` opens within ``timeout_s``.

    Ray itself retries a closed port for minutes with only its own log lines; this checks the
    address first and fails with one paragraph naming ``setting`` (where the address came from:
    the config field, or ``rlgraph tune``'s ``--address``) and ``timeout_setting``.
    """
    target = _host_port(address)
    if target is None:
        return
    start = time.monotonic()
    try:
        socket.create_connection(target, timeout=timeout_s).close()
    except OSError as exc:
        reason = "timed out" if isinstance(exc, socket.timeout) else (exc.strerror or str(exc))
        raise RayConnectError(
            f"{setting} = '{address}': no Ray cluster could be reached there within "
            f"{timeout_setting} = {timeout_s:g} s ({reason}). Start the head node first (ray start "
            f"--head --port={target[1]}), check the host and port (and any firewall), or leave "
            f"{setting} unset for a private local Ray."
        ) from None
    # An open port is not yet Ray: Ray's GCS (host:port) and its client server (ray://) speak gRPC,
    # and ray.init retries anything else for minutes (ignoring SIGTERM meanwhile). A gRPC channel
    # that becomes ready within what is left of the timeout is the bounded check.
    if not _grpc_ready(target, max(timeout_s - (time.monotonic() - start), 0.5)):
        what = (
            "a Ray client server (ray start --head starts one on port 10001)" if address.startswith("ray://") else "Ray"
        )
        raise RayConnectError(
            f"{setting} = '{address}': the port is open, but what answers there did not speak {what}'s protocol "
            f"within {timeout_setting} = {timeout_s:g} s: it is not a Ray cluster (or not yet up). Check the port "
            f"(the head's GCS port, 6379 by default, for host:port; its client port for ray://), or leave "
            f"{setting} unset for a private local Ray."
        )


def _grpc_ready(target: tuple[str, int], timeout_s: float) -> bool:
    """Whether a gRPC channel to ``target`` becomes ready (an HTTP/2 handshake) within ``timeout_s``."""
    import grpc

    host, port = target
    channel = grpc.insecure_channel(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout_s)
        return True
    except grpc.FutureTimeoutError:
        return False
    finally:
        channel.close()


class RayPlacementError(RLGraphError):
    """The Ray actors of a run could not be placed (or built) within ``executor.placement_timeout_s``."""


@contextlib.contextmanager
def _signals_kept() -> Iterator[None]:
    """Keep this process's SIGTERM handler while ``ray.init`` runs.

    ``ray.init`` installs SIGTERM handlers of its own in the driver (``sys.exit``, then one that
    kills the node's processes and exits 1), so a SIGTERM while Ray starts bypassed rlgraph's
    stop request: no final checkpoint, no summary (issue 19). Ray offers no option for this, so
    its private hook ``ray._private.utils.set_sigterm_handler`` is made a no-op for the call
    (where a Ray version lacks it, nothing is changed). Ray's processes are still ended by the
    run's ``ray.shutdown()`` and, after a hard kill, by the watchdog (:mod:`rlgraph_ray.reaper`).
    """
    utils = getattr(getattr(ray, "_private", None), "utils", None)
    original = getattr(utils, "set_sigterm_handler", None)
    if original is None:
        yield
        return
    utils.set_sigterm_handler = lambda handler: None
    try:
        yield
    finally:
        utils.set_sigterm_handler = original


@contextlib.contextmanager
def ray_session(
    address: str | None,
    *,
    quiet: bool = False,
    connect_timeout_s: float = 10.0,
    setting: str = "executor.address",
    timeout_setting: str = "executor.connect_timeout_s",
    run_dir: str | None = None,
) -> Iterator[dict]:
    """Connect to Ray for the duration of a run; yields ``{"address", "where", "started", "own_cluster",
    "gcs_address", "cpus"}`` (``started``: this call connected, so it disconnects at the end;
    ``own_cluster``: this call started the Ray processes themselves; ``gcs_address``: the
    cluster's GCS as Ray reports it, e.g. ``127.0.0.1:6379``).

    * Ray already initialised in this process (e.g. by a test or a notebook): used as it is.
    * ``address`` null or ``local``: a private local Ray (``ray.init(address="local")``) with
      ``os.cpu_count()`` CPUs and no dashboard, so a stray ``RAY_ADDRESS`` or an old session is
      never joined by accident; shut down at the end.
    * otherwise (``auto``, ``host:port``, ``ray://host:port``): join that cluster and say so;
      disconnect at the end (the cluster keeps running). A ``host:port`` that does not accept a
      connection within ``connect_timeout_s`` raises :class:`RayConnectError` before Ray is asked
      (naming ``setting`` and ``timeout_setting``, where the address and the timeout came from).

    ``run_dir``: the run's output folder, for the watchdog of a private Ray (:mod:`rlgraph_ray.reaper`).
    With it and a private Ray, the dict's ``snapshot`` is a checkpoint path on a RAM-backed folder
    (:func:`snapshot_folder`) for the executor to keep a recent checkpoint of its learner at: the
    watchdog moves it into ``run_dir`` should Ray end the driver, and it is removed when the
    session ends. Otherwise ``snapshot`` is None.
    """
    started = own = False
    reaper = snapshot = None
    if ray.is_initialized():
        where = "the Ray session already running in this process"
    elif address in (None, "local"):
        # The watchdog starts first: it ends the session's processes should this driver die while
        # Ray starts (a second Ctrl-C, SIGKILL) as well as later.
        if run_dir is not None:
            snapshot = snapshot_folder()
        reaper = start_reaper(run_dir, None if snapshot is None else str(snapshot))
        try:
            with _signals_kept():
                ray.init(
                    address="local",
                    num_cpus=os.cpu_count() or 1,
                    include_dashboard=False,
                    log_to_driver=True,
                    configure_logging=False,
                )
        except BaseException:
            quiet_reaper(reaper)
            with contextlib.suppress(Exception):
                ray.shutdown()  # what Ray had started (the watchdog ends the rest when this process exits)
            if snapshot is not None:
                shutil.rmtree(snapshot, ignore_errors=True)
            raise
        started = own = True
        where = "a private local Ray"
    else:
        probe_address(address, connect_timeout_s, setting, timeout_setting)
        with _signals_kept():
            ray.init(address=address, log_to_driver=True, configure_logging=False)
        started = True
        where = f"the Ray cluster at {address}"
        if not quiet:
            print(f"rlgraph-ray: joined the Ray cluster at {address} ({ray.cluster_resources().get('CPU', 0):g} CPUs)")
    try:
        yield {
            "address": address,
            "where": where,
            "started": started,
            "own_cluster": own,
            "gcs_address": ray.get_runtime_context().gcs_address,
            "cpus": ray.cluster_resources().get("CPU", 0),
            "snapshot": None if snapshot is None else str(snapshot / "checkpoint"),
        }
    finally:
        if started:
            ray.shutdown()
        if snapshot is not None:  # before the watchdog stops: it removes the folder should this process die first
            shutil.rmtree(snapshot, ignore_errors=True)
        stop_reaper(reaper)


def snapshot_folder() -> Path:
    """A new empty folder for a run's in-memory snapshot: under ``/dev/shm`` where that is a writable
    RAM-backed folder, else under the system's temp folder; named ``rlgraph-snapshot-<pid>-<random>``."""
    root = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK | os.X_OK) else None
    return Path(tempfile.mkdtemp(prefix=f"rlgraph-snapshot-{os.getpid()}-", dir=root))


def check_cpus(requested: float, what: str) -> None:
    """Warn when ``requested`` CPUs exceed the cluster's (the actors would wait for CPUs forever)."""
    cpus = ray.cluster_resources().get("CPU", 0.0)
    if requested > cpus + 1e-9:
        warnings.warn(
            f"rlgraph-ray: {what} ask for {requested:g} CPUs but the Ray cluster has {cpus:g}: some actors "
            f"cannot be placed until CPUs free up, and the run fails after executor.placement_timeout_s. "
            f"Lower executor.num_workers, or use a fractional executor.num_cpus_per_worker (e.g. "
            f"{max(cpus, 1) / max(requested, 1):.2g}) to oversubscribe the CPUs on purpose.",
            RuntimeWarning,
            stacklevel=2,
        )


def wait_ready(actors: Sequence, timeout_s: float, what: str) -> None:
    """Wait until every actor answers ``ready()``; raise :class:`RayPlacementError` after ``timeout_s``.

    An actor that raised while it was built re-raises its error here.
    """
    refs = [a.ready.remote() for a in actors]
    done, pending = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
    if pending:
        for a in actors:
            with contextlib.suppress(Exception):
                ray.kill(a, no_restart=True)
        raise RayPlacementError(
            f"{len(pending)} of {len(refs)} {what} were not placed and built within executor.placement_timeout_s = "
            f"{timeout_s:g} s (the cluster has {ray.cluster_resources().get('CPU', 0):g} CPUs, "
            f"{ray.available_resources().get('CPU', 0):g} free). Lower executor.num_workers or "
            f"executor.num_cpus_per_worker, or raise placement_timeout_s if building takes long."
        )
    ray.get(done)


def run_tag() -> str:
    """A short id that names one run's actors (``rlgraph-<tag>-worker-0`` ...)."""
    return uuid.uuid4().hex[:8]


def actor_options(name: str, num_cpus: float) -> dict:
    """Ray options of one of a run's actors: its name, CPUs, no automatic restarts (the executor
    restarts and counts them), and the plugin blocklist of the driver."""
    options: dict = {"name": name, "num_cpus": num_cpus, "max_restarts": 0, "max_task_retries": 0}
    blocked = os.environ.get(DISABLE_ENV)
    if blocked:
        options["runtime_env"] = {"env_vars": {DISABLE_ENV: blocked}}
    return options


def kill_all(actors: Sequence) -> None:
    """Stop actors without waiting (errors from already-dead actors are ignored)."""
    for a in actors:
        if a is not None:
            with contextlib.suppress(Exception):
                ray.kill(a, no_restart=True)
