"""Joining an existing Ray cluster: ``executor.address=host:port`` connects to a head node the test
started itself (``ray start --head``), and the executor starts no Ray of its own.

The head runs in its own process group with a private ``--temp-dir``; the test stops it by that
process id and group, and kills what is left of exactly that head (processes whose command line
names its temp dir), never other Ray processes on the machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from rlgraph_core.assemble import train  # noqa: E402
from rlgraph_core.config.run import apply_overrides, load_shipped_config, validate_config  # noqa: E402
from rlgraph_core.plugins import PluginManager, hookimpl  # noqa: E402


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def live_processes() -> dict[int, tuple[int, bytes]]:
    """``{pid: (process group, command line)}`` of this user's running (not zombie) processes."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            if entry.stat().st_uid != os.getuid():
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z":  # state, ppid, pgrp, ...
                found[int(entry.name)] = (int(fields[2]), (entry / "cmdline").read_bytes())
    return found


def head_processes(pgid: int, temp_dir: Path) -> list[int]:
    """Running processes of one head: its process group, and any process naming its temp dir."""
    marker = str(temp_dir).encode()
    return sorted(pid for pid, (group, cmd) in live_processes().items() if group == pgid or marker in cmd)


class RayHead:
    """``ray start --head --block`` on 127.0.0.1 in a new process group with its own temp dir."""

    def __init__(self, temp_dir: Path):
        self.temp_dir = temp_dir
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.log = temp_dir.parent / "ray-head.log"
        ray_cli = Path(sys.executable).with_name("ray")
        cmd = [
            str(ray_cli) if ray_cli.exists() else "ray",
            "start",
            "--head",
            "--block",
            f"--port={self.port}",
            "--node-ip-address=127.0.0.1",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={temp_dir}",
        ]
        env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
        env.pop("RAY_ADDRESS", None)
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.pgid = self.proc.pid  # start_new_session: the head's own process group

    def wait_up(self, timeout_s: float = 180.0) -> None:
        """Wait until the GCS accepts connections (fail with the head's log if it exits first)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ray start exited with {self.proc.returncode}:\n{self.log.read_text()}")
            if "Ray runtime started" in self.log.read_text(errors="replace"):
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            time.sleep(0.5)
        raise RuntimeError(f"the Ray head did not come up within {timeout_s:g} s:\n{self.log.read_text()}")

    def stop(self, grace_s: float = 8.0) -> None:
        """Stop this head: SIGTERM to its process group (``ray start`` and the Ray processes it
        started: GCS, raylet, workers ...), then, after ``grace_s``, SIGKILL to whatever of that
        group or of its temp dir is still running (``ray start`` would drain for 30 s)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            self.proc.poll()  # reap ray start itself once it exits
            if not self.leftovers():
                break
            time.sleep(0.5)
        # SIGKILL what is left, until nothing is: a killed process takes a moment to be gone, and
        # the raylet may have started a worker after the first look (a cold CI run saw one such pid
        # still listed right after a single round of kills).
        deadline = time.monotonic() + 10.0
        while (left := self.leftovers()) and time.monotonic() < deadline:
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.proc.poll()
            time.sleep(0.2)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)

    def leftovers(self) -> list[int]:
        """Processes of this head still running."""
        return head_processes(self.pgid, self.temp_dir)


@pytest.fixture
def ray_head(tmp_path_factory, request):
    """A Ray head the test owns; stopped by its own pid and group even if the test fails."""
    if ray.is_initialized():  # a module before this one left its session open
        ray.shutdown()
    head = RayHead(tmp_path_factory.mktemp("head") / "r")
    request.addfinalizer(head.stop)
    head.wait_up()
    return head


class ClusterProbe:
    """Records, while the run trains, which cluster the driver is connected to."""

    def __init__(self):
        self.gcs_address, self.nodes, self.run_info = None, [], None

    @hookimpl
    def rlgraph_on_train_start(self, run_info):
        self.run_info = run_info
        self.gcs_address = ray.get_runtime_context().gcs_address
        self.nodes = [n for n in ray.nodes() if n.get("Alive")]


def test_executor_joins_an_existing_cluster_and_starts_no_ray_of_its_own(ray_head, tmp_path, capsys):
    pm = PluginManager()
    probe = ClusterProbe()
    pm.register(probe, "cluster-probe")
    raw = apply_overrides(
        load_shipped_config("ppo_cartpole_ray"),
        [
            "train.progress_bar=false",
            "train.loggers=[jsonl]",
            "train.total_timesteps=512",
            "train.eval_interval=100000",
            "train.log_interval=256",
            "agent.n_epochs=1",
            f"executor.address={ray_head.address}",
        ],
    )
    summary = train(validate_config(raw), tmp_path, plugin_manager=pm)
    out = capsys.readouterr().out
    assert summary["ended_by"] == "total_timesteps" and summary["timesteps"] >= 512
    assert f"rlgraph-ray: joined the Ray cluster at {ray_head.address} (2 CPUs)" in out
    assert summary["ray"] == f"the Ray cluster at {ray_head.address}"
    # Ray reports the GCS under the machine's IP even when joined through 127.0.0.1: compare ports
    assert summary["ray_own_cluster"] is False and summary["ray_gcs_address"].endswith(f":{ray_head.port}")
    # the driver was connected to the test's head: one node, whose sockets live in the head's temp dir
    assert probe.gcs_address == summary["ray_gcs_address"]
    assert probe.run_info["ray"]["own_cluster"] is False
    assert len(probe.nodes) == 1 and probe.nodes[0]["ObjectStoreSocketName"].startswith(str(ray_head.temp_dir))
    assert not ray.is_initialized()  # the executor disconnected; the cluster keeps running
    assert ray_head.proc.poll() is None
    ray_head.stop()
    assert ray_head.leftovers() == []


def test_an_address_with_nothing_listening_fails_at_once_naming_it(tmp_path):
    """Issue 19: a closed port hung for minutes (180 s and still retrying) with only Ray's log lines."""
    port = free_port()
    cmd = [sys.executable, "-m", "rlgraph_core.cli", "train", "ppo_cartpole_ray", "--out", str(tmp_path / "run"),
           "--no-progress", "--set", f"executor.address=127.0.0.1:{port}", "--set", "executor.connect_timeout_s=3"]  # fmt: skip
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", RAY_AUTH_MODE="disabled")
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"executor.address = '127.0.0.1:{port}': no Ray cluster could be reached" in result.stderr
    assert "Traceback" not in result.stderr and "ray start --head" in result.stderr


def test_an_open_port_that_is_not_ray_fails_within_the_timeout_for_every_address_form():
    """Issue 35 §4: an open non-Ray port passed the TCP check; Ray then retried for 150 s (host:port,
    ignoring SIGTERM) or raised a traceback after 33 s (ray://)."""
    import socket
    import time

    from rlgraph_ray.cluster import RayConnectError, probe_address

    with socket.socket() as server:  # accepts connections, never speaks
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
            start = time.monotonic()
            with pytest.raises(RayConnectError) as exc:
                probe_address(address, 1.0)
            assert time.monotonic() - start < 10  # the 1 s timeout (+ importing grpc on a loaded machine)
            message = str(exc.value)
            assert message.startswith(f"executor.address = '{address}': the port is open, but what answers there")
            assert "executor.connect_timeout_s = 1 s" in message and "\n" not in message
    # A gRPC server, as Ray's GCS and client server are, passes (the join itself is tested above).
    from concurrent import futures

    import grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        probe_address(f"127.0.0.1:{port}", 5.0)
        probe_address(f"ray://127.0.0.1:{port}", 5.0)
    finally:
        server.stop(None)
