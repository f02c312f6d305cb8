"""SIGTERM on a real ``rlgraph train --executor ray_apex`` process: actors stopped, final checkpoint
(with the replay shards), exit code 143; ``--resume`` then carries the run on.

The runs are subprocesses with their own private Ray (``RAY_TMPDIR`` a fresh temp dir),
so this module needs no in-process Ray session; the test signals only the pid it started.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")

from rlgraph_core.checkpoint import CheckpointError, latest_checkpoint, read_attachment, read_meta  # noqa: E402
from ray_procs import kill_all, ray_processes  # noqa: E402

#: configs/apex_cartpole.yaml with one small worker, a run far longer than the test lets it go,
#: a metrics row every 500 env steps, and the shards saved with every checkpoint.
SETTINGS = [
    "agent.network.hidden=[16]",
    "agent.learning_starts=500",
    "agent.gradient_steps=16",
    "env.num_envs=1",
    "executor.num_workers=1",
    "executor.save_replay=true",
    "train.total_timesteps=1000000",
    "train.target_return=null",
    "train.eval_interval=1000000",
    "train.eval_episodes=1",
    "train.log_interval=500",
    "train.loggers=[jsonl]",
]


@pytest.fixture
def ray_tmp():
    """A private Ray temp dir with a short path (Ray's socket paths must stay under 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="rlgraph-ray-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _env(ray_tmp: Path) -> dict:
    return dict(
        os.environ,
        RAY_AUTH_MODE="disabled",
        RAY_TMPDIR=str(ray_tmp),
        PYTHONUNBUFFERED="1",
        TF_CPP_MIN_LOG_LEVEL="3",
        MPLBACKEND="Agg",
        RLGRAPH_TEST_QUIET="1",
    )


def _cli(*args: str, more: tuple[str, ...] = ()) -> list[str]:
    sets = [item for s in (*SETTINGS, *more) for item in ("--set", s)]
    return [sys.executable, "-m", "rlgraph_core.cli", "train", "--no-progress", *args, *sets]


def _rows(out: Path) -> list[dict]:
    path = out / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def _snapshots(pid: int) -> list[Path]:
    """The in-memory snapshot folders of the driver ``pid`` (rlgraph_ray.cluster.snapshot_folder) still there."""
    return [p for root in ("/dev/shm", tempfile.gettempdir()) for p in Path(root).glob(f"rlgraph-snapshot-{pid}-*")]


def _wait_for_a_snapshot_at(pid: int, timesteps: int, deadline: float) -> None:
    """Wait until the driver ``pid``'s in-memory snapshot holds at least ``timesteps`` env steps (it
    is refreshed at most once a second, after a learner round)."""
    while time.time() < deadline:
        for folder in _snapshots(pid):
            try:
                if read_meta(folder / "checkpoint")[0]["counters"]["timesteps"] >= timesteps:
                    return
            except (CheckpointError, OSError):  # not written yet, or being replaced right now
                pass
        time.sleep(0.2)
    pytest.fail(f"the driver's in-memory snapshot never reached {timesteps} env steps")


def _ray_left_after(ray_tmp: Path, seconds: float) -> dict[int, str]:
    """The processes of this test's private Ray still alive after up to ``seconds`` of waiting for
    them all to exit (returns at once when none is left)."""
    deadline = time.time() + seconds
    while ray_processes(ray_tmp) and time.time() < deadline:
        time.sleep(0.2)
    return ray_processes(ray_tmp)


def _ray_processes(ray_tmp: Path) -> list[int]:
    """Pids of the live processes of this test's private Ray session (renamed helpers included)."""
    return sorted(ray_processes(ray_tmp))


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to see that Ray's processes are gone")
def test_sigterm_stops_a_ray_apex_run_cleanly_and_resume_carries_on(tmp_path, ray_tmp):
    out = tmp_path / "run"
    env = _env(ray_tmp)
    proc = subprocess.Popen(
        _cli("apex_cartpole", "--executor", "ray_apex", "--out", str(out)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        deadline = time.time() + 240
        while len(_rows(out)) < 2:  # mid-run: learning has started and rows are being logged
            if proc.poll() is not None:
                pytest.fail(f"the run ended early with {proc.returncode}:\n{proc.communicate()[0]}")
            if time.time() > deadline:
                pytest.fail("timed out waiting for the run to log two rows")
            time.sleep(0.2)
        assert _ray_processes(ray_tmp), "the run's Ray processes are not found by their temp dir"
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ended_by"] == "sigterm" and summary["exit_code"] == 143
    stopped_at = summary["timesteps"]
    meta, _ = read_meta(out / "checkpoint")
    assert meta["counters"]["timesteps"] == stopped_at and meta["ended_by"] == "sigterm"
    info, arrays = read_attachment(out / "checkpoint", "replay")
    stored = int(arrays["shard_0/size"])
    assert stored > 0 and info["shards"] == 1
    # the private Ray's processes exit with the driver
    assert _ray_left_after(ray_tmp, 15) == {}, "Ray processes outlived the stopped run"
    assert _snapshots(proc.pid) == [], "the in-memory snapshot outlived the run (a normal end removes it)"

    target = stopped_at + 1000
    resumed = subprocess.run(
        _cli("--resume", str(out), more=(f"train.total_timesteps={target}",)),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "rlgraph: resuming" in resumed.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ended_by"] == "total_timesteps" and summary["timesteps"] >= target
    assert summary["replay_restored"] == stored
    rows = _rows(out)
    assert [r["timesteps"] for r in rows] == sorted(r["timesteps"] for r in rows)  # one run, carried on
    assert rows[-1]["timesteps"] > stopped_at


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to see that Ray's processes are gone")
def test_kill_9_of_the_driver_leaves_no_ray_process_of_its_private_session(tmp_path, ray_tmp):
    """Issue 19: after kill -9 of a ray_apex driver its dashboard and runtime-env agents lived on (~100 MB each)."""
    out = tmp_path / "run"
    proc = subprocess.Popen(
        _cli("apex_cartpole", "--executor", "ray_apex", "--out", str(out)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(ray_tmp),
    )
    try:
        deadline = time.time() + 240
        while not _rows(out):
            assert proc.poll() is None, f"the run ended early with {proc.returncode}"
            assert time.time() < deadline, "timed out waiting for the run to log a row"
            time.sleep(0.2)
        names = set(ray_processes(ray_tmp).values())
        # the helpers that were orphaned (they rename themselves, so only the finder's environ/fd check sees them)
        assert {"ray::DashboardAgent", "ray::RuntimeEnvAgent"} <= names, names
        assert _snapshots(proc.pid), "the driver keeps no in-memory snapshot"
    finally:
        proc.kill()  # SIGKILL: the driver runs no code
        proc.wait()
    left = _ray_left_after(ray_tmp, 30)
    kill_all(left)  # never leave them behind, even when the test fails
    assert left == {}, f"Ray processes outlived their driver: {left}"
    assert _snapshots(proc.pid) == [], "the driver's in-memory snapshot outlived it (the watchdog removes it)"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to see that Ray's processes are gone")
def test_sigterm_while_ray_starts_stops_the_run_cleanly(tmp_path, ray_tmp):
    """Issue 19: a signal inside ray.init killed the driver without rlgraph's handling (no summary,
    no message, Ray's helpers left to the watchdog)."""
    out = tmp_path / "run"
    proc = subprocess.Popen(
        _cli("apex_cartpole", "--executor", "ray_apex", "--out", str(out)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(ray_tmp),
    )
    try:
        deadline = time.time() + 240
        while not (ray_tmp / "ray").is_dir():  # ray.init has begun: its session folder appears first
            if proc.poll() is not None:
                pytest.fail(f"the run ended early with {proc.returncode}:\n{proc.communicate()[0]}")
            assert time.time() < deadline, "timed out waiting for ray.init to begin"
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, output
    assert "rlgraph-ray: SIGTERM while Ray and the run's actors were starting" in output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ended_by"] == "sigterm" and summary["timesteps"] == 0 and summary["exit_code"] == 143
    meta, _ = read_meta(out / "checkpoint")  # a whole checkpoint, as for any stop
    assert meta["ended_by"] == "sigterm"
    assert not [p.name for p in out.iterdir() if "tmp" in p.name], "a half-written file was left"
    left = _ray_left_after(ray_tmp, 15)
    kill_all(left)
    assert left == {}, f"Ray processes outlived the stopped run: {left}"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc to find Ray's processes")
def test_a_killed_ray_dashboard_agent_ends_the_run_with_a_message_a_summary_and_its_work_saved(tmp_path, ray_tmp):
    """Issue 19: killing Ray's dashboard agent ended the driver within a second with only Ray's log
    lines. Ray ends the driver from C++ (its raylet fate-shares with the agent), so the watchdog
    says what died, writes summary.json and moves the driver's in-memory snapshot of the learner
    into the run folder as its newest checkpoint: no periodic checkpoint is due here, yet the work
    up to the kill is saved, and --resume carries on from it."""
    out = tmp_path / "run"
    proc = subprocess.Popen(
        _cli("apex_cartpole", "--executor", "ray_apex", "--out", str(out), more=("train.checkpoint_interval=1000000",)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(ray_tmp),
    )
    try:
        deadline = time.time() + 300
        while not [r for r in _rows(out) if r["timesteps"] >= 1000]:  # the learner has been learning a while
            if proc.poll() is not None:
                pytest.fail(f"the run ended early with {proc.returncode}:\n{proc.communicate()[0]}")
            assert time.time() < deadline, "timed out waiting for a metrics row at 1000 env steps"
            time.sleep(0.2)
        logged = _rows(out)[-1]["timesteps"]
        _wait_for_a_snapshot_at(proc.pid, logged, deadline=time.time() + 60)
        assert not (out / "checkpoints").exists() and not (out / "checkpoint").exists()  # nothing periodic
        agent = [pid for pid, name in ray_processes(ray_tmp).items() if name == "ray::DashboardAgent"]
        assert len(agent) == 1
        os.kill(agent[0], signal.SIGKILL)
        output, _ = proc.communicate(timeout=400)  # the driver may live on until actors cannot be placed (120 s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    left = _ray_left_after(ray_tmp, 15)  # the watchdog reports, then ends what is left
    kill_all(left)
    assert proc.returncode != 0, output
    assert (out / "summary.json").is_file(), f"exit {proc.returncode}, no summary.json; the run said:\n{output[-4000:]}"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ended_by"] == "error" and summary["exit_code"] == 1, output
    died = f"RayProcessDied: Ray's dashboard agent (pid {agent[0]})"
    if "watchdog" in summary.get("written_by", ""):  # Ray ended the driver from C++ at once (the usual case)
        assert f"rlgraph-ray: the run failed: {died}" in output, output
        assert f"resume with: rlgraph train --resume {out.resolve()}" in output
        assert summary["died"] == "dashboard agent" and summary["checkpoint_from_snapshot"] is True, output
        assert f"The newest checkpoint is {summary['checkpoint']}" in output
        assert Path(summary["checkpoint"]).parent == (out / "checkpoints").resolve()
    else:  # the driver lived on until its actors could not be placed, and wrote its own final checkpoint
        assert f"rlgraph: the run failed: {died}" in output and summary["error"].startswith(died), output
        assert Path(summary["checkpoint"]) == out / "checkpoint"
    meta, _ = read_meta(summary["checkpoint"])
    assert meta["counters"]["timesteps"] == summary["timesteps"] >= logged >= 1000  # seen 5 s before the kill
    assert latest_checkpoint(out) == Path(summary["checkpoint"])
    assert _snapshots(proc.pid) == [], "the in-memory snapshot outlived the run"
    assert left == {}, f"Ray processes outlived the run: {left}"

    target = summary["timesteps"] + 500
    resumed = subprocess.run(
        _cli("--resume", str(out), more=(f"train.total_timesteps={target}",)),
        capture_output=True,
        text=True,
        env=_env(ray_tmp),
        timeout=400,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "rlgraph: resuming" in resumed.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ended_by"] == "total_timesteps" and summary["timesteps"] >= target


def test_a_run_that_fails_after_a_ray_process_died_names_what_died(tmp_path):
    """The other way issue 19's kill ends: Ray lets the driver live on, and its run fails later with
    an error of its own (actors cannot be placed); that error then names what died first."""
    from rlgraph_ray.base import _naming_ray_deaths
    from rlgraph_ray.cluster import RayProcessDied, RayPlacementError

    def loop(recorder, stop):
        raise RayPlacementError("1 of 1 restarted replay shards were not placed (the cluster has 0 CPUs)")

    session = {"snapshot": str(tmp_path / "checkpoint")}
    with pytest.raises(RayPlacementError):  # no Ray process died: the error is the loop's own
        _naming_ray_deaths(loop, session)(None, None)
    (tmp_path / "ray-died.json").write_text(json.dumps({"name": "dashboard agent", "pid": 4242}))
    with pytest.raises(RayProcessDied, match=r"Ray's dashboard agent \(pid 4242\) .*RayPlacementError: 1 of 1") as info:
        _naming_ray_deaths(loop, session)(None, None)
    assert isinstance(info.value.__cause__, RayPlacementError)
    with pytest.raises(RayPlacementError):  # no run folder, no snapshot folder: nothing to read
        _naming_ray_deaths(loop, {"snapshot": None})(None, None)
