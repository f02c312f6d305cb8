"""Nothing poisons a run (issue 19), through the real command line: foreign files, bad env data, NaN losses.

Each test starts ``rlgraph train`` as a subprocess; small networks and budgets keep each to a
few seconds of training.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rlgraph_core.checkpoint import read_meta
from rlgraph_core.plugins import get_plugin_manager

pytestmark = pytest.mark.skipif("torch" not in get_plugin_manager().names("backends"), reason="needs rlgraph-torch")

SMALL = [
    "--no-progress",
    "--set", "agent.network.hidden=[16]",
    "--set", "agent.learning_starts=100",
    "--set", "agent.train_freq=50",
    "--set", "agent.gradient_steps=2",
    "--set", "train.total_timesteps=3000",
    "--set", "train.eval_interval=200",
    "--set", "train.eval_episodes=1",
    "--set", "env.num_envs=1",
]  # fmt: skip


def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``rlgraph ARGS`` to completion, with ``poison_env`` importable."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="3", MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "rlgraph_core.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def all_finite(checkpoint: Path) -> bool:
    with np.load(checkpoint / "weights.npz") as npz:
        return all(np.isfinite(npz[k]).all() for k in npz.files)


def test_overwrite_of_a_folder_holding_user_files_is_refused_and_deletes_nothing(tmp_path):
    """Issue 19: --overwrite deleted the user's checkpoints/my_model.pt and metrics.csv."""
    out = tmp_path / "userdir"
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "my_model.pt").write_bytes(b"precious")
    (out / "metrics.csv").write_text("step,loss\n1,0.5\n")
    for extra in ([], ["--overwrite"]):
        result = run("train", "--out", str(out), *SMALL, *extra)
        assert result.returncode == 2, result.stderr
        assert "checkpoints/my_model.pt" in result.stderr and "metrics.csv" in result.stderr
        assert "--overwrite" not in result.stderr  # never suggests the flag that would destroy them
    assert (out / "checkpoints" / "my_model.pt").read_bytes() == b"precious"
    assert (out / "metrics.csv").read_text() == "step,loss\n1,0.5\n"


def test_a_string_reward_stops_the_run_naming_env_step_and_field(tmp_path):
    """Issue 19: the reward "1.0" was silently coerced, None became NaN and trained to the end."""
    out = tmp_path / "run"
    result = run("train", "--out", str(out), *SMALL, "--set", "env.id=poison_env:PoisonCartPole",
                 "--set", "env.kwargs={bad: reward_str, after: 450}")  # fmt: skip
    assert result.returncode == 1, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ended_by"] == "error"
    assert "EnvDataError" in summary["error"] and "'poison_env:PoisonCartPole'" in summary["error"]
    assert "env step 450" in summary["error"] and "the reward is '1.0' of type str" in summary["error"]
    assert all_finite(out / "checkpoint") and read_meta(out / "checkpoint")[0]["counters"]["timesteps"] < 450


@pytest.mark.parametrize("mode", ["eager", "static"])
def test_a_nan_loss_stops_the_run_and_no_checkpoint_holds_nan_weights(tmp_path, mode):
    """Issue 19: NaN observations trained to the end with exit 0; every checkpoint held all-NaN weights.

    Here the observation check is switched off (``env.allow_nonfinite_obs``), so the NaN reaches
    the loss: the train step refuses that update before applying it (NonFiniteError), the run
    stops with ``ended_by: error``, and every checkpoint -- the final one included, which now
    holds the last finite weights -- is finite. Static mode: the check runs inside the compiled
    update round (DQN's fused loop), which then names the step of the round.
    """
    out = tmp_path / "run"
    result = run("train", "--out", str(out), *SMALL, "--set", f"train.mode={mode}", "--set", "env.id=poison_env:PoisonCartPole",
                 "--set", "env.kwargs={bad: obs_nan, after: 400}", "--set", "env.allow_nonfinite_obs=true")  # fmt: skip
    assert result.returncode == 1, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    start = "NonFiniteError: The loss is nan" if mode == "eager" else "NonFiniteError: At step 1 of 2 of a fused"
    assert summary["ended_by"] == "error" and summary["error"].startswith(start), summary["error"]
    assert "not applied" in summary["error"] and "env step" in summary["error"]
    assert not summary.get("checkpoint_refused")  # the weights never became NaN
    assert summary["checkpoint"] == str(out / "checkpoint")
    for folder in [*sorted((out / "checkpoints").glob("step-*")), out / "checkpoint_best", out / "checkpoint"]:
        assert all_finite(folder), folder
    assert read_meta(out / "checkpoint")[0]["counters"]["timesteps"] >= 400


def test_a_network_too_large_for_memory_is_refused_even_by_dry_run(tmp_path):
    """Issue 19: --dry-run allocated the weights of hidden=[100000000] and was OOM-killed."""
    result = run("train", "--dry-run", "--set", "agent.network.hidden=[100000000, 100000000]", timeout=120)
    assert result.returncode == 2, result.stderr
    assert "'agent.network.hidden' = [100000000, 100000000]" in result.stderr and "PiB" in result.stderr


def test_one_huge_layer_is_refused_by_dry_run_with_the_bytes_training_needs():
    """Issue 35 §4: hidden=[100000000] passed the weights-and-gradients estimate (4.5 GiB) and --dry-run
    took every byte of the machine building it (measured 19-41 bytes per parameter)."""
    from rlgraph_core.memories.sizing import available_memory_bytes

    if (available_memory_bytes() or 0) > 60 * 2**30:
        pytest.skip("this machine has the 63 GiB that training such a network needs")
    from cli_helpers import run_cli

    code, _, stderr = run_cli("train", "--dry-run", "--set", "agent.network.hidden=[100000000]")
    assert code == 2 and "Traceback" not in stderr, stderr[-2000:]
    assert "'agent.network.hidden' = [100000000]: the agent's networks need at least 63.3 GiB" in stderr
    assert "optimizer slots, target copies" in stderr and "nothing was allocated" in stderr


#: A DQN that checkpoints every 500 env steps and would run for a long time.
LONG = [
    "--no-progress",
    "--set", "agent.network.hidden=[16]",
    "--set", "agent.learning_starts=200",
    "--set", "agent.train_freq=50",
    "--set", "agent.gradient_steps=5",
    "--set", "train.total_timesteps=2000000",
    "--set", "train.target_return=null",
    "--set", "train.eval_interval=500",
    "--set", "train.eval_episodes=1",
    "--set", "train.log_interval=250",
]  # fmt: skip


def _assert_disk_full_reported(proc: subprocess.CompletedProcess, out: Path) -> None:
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert "No space left to write the checkpoint" in proc.stderr and "it needs about" in proc.stderr
    previous = out / "checkpoints" / os.readlink(out / "checkpoints" / "latest")
    assert f"The previous checkpoint '{previous}' is intact" in proc.stderr
    read_meta(previous)  # complete and readable
    assert all_finite(previous)


def test_a_full_disk_during_a_periodic_checkpoint_is_one_paragraph_and_keeps_the_previous(tmp_path):
    """Issue 19: a 60-line chained traceback. A real tmpfs is filled once the first periodic checkpoint exists."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)]).returncode:
        pytest.skip("cannot mount a size-limited tmpfs here (the injected-ENOSPC test covers the same path)")
    out = disk / "run"
    try:
        env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="3", MPLBACKEND="Agg")
        cmd = [sys.executable, "-m", "rlgraph_core.cli", "train", "--out", str(out), *LONG]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            deadline = time.time() + 240
            while not (out / "checkpoints" / "latest").exists():
                assert proc.poll() is None and time.time() < deadline, "no periodic checkpoint appeared"
                time.sleep(0.2)
            filler = disk / "filler"
            with open(filler, "wb") as f:  # fill the disk, then give back 8 KiB (room for summary.json only)
                try:
                    while True:
                        f.write(bytes(65536))
                        f.flush()
                except OSError:
                    pass
            with open(filler, "r+b") as f:
                f.truncate(max(filler.stat().st_size - 8192, 0))
            stdout, stderr = proc.communicate(timeout=240)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        _assert_disk_full_reported(subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr), out)
    finally:
        subprocess.run(["umount", str(disk)])


def test_an_injected_enospc_during_a_periodic_checkpoint_is_one_paragraph_and_keeps_the_previous(tmp_path):
    """The same with ENOSPC injected at the write (for machines where no tmpfs can be mounted)."""
    out = tmp_path / "run"
    code = (
        "import errno, os, sys; import rlgraph_core.checkpoint.store as c; from rlgraph_core.cli import main\n"
        "orig = c._write_file\n"
        "def full(path, write):\n"
        f"    periodic = os.path.join({str(out)!r}, 'checkpoints')\n"
        "    if str(path).startswith(periodic) and len(os.listdir(periodic)) >= 3:\n"
        "        raise OSError(errno.ENOSPC, 'No space left on device', str(path))\n"
        "    return orig(path, write)\n"
        "c._write_file = full\n"
        f"sys.exit(main(['train', '--out', {str(out)!r}, *{LONG!r}]))"
    )
    env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="3", MPLBACKEND="Agg")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    _assert_disk_full_reported(proc, out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ended_by"] == "error" and "DiskFullError" in summary["error"]


def _to_older_layout(out: Path) -> None:
    """Leave ``out`` as an interrupted save of the layout before links did: '.checkpoint.old' plus a
    complete temporary folder, and no 'checkpoint' (nor periodic checkpoints)."""
    real = (out / "checkpoint").resolve()
    shutil.copytree(real, out / ".checkpoint.old")
    shutil.copytree(real, out / ".checkpoint.x1y2z3w4")
    (out / "checkpoint").unlink()
    shutil.rmtree(out / ".checkpoint.versions")
    shutil.rmtree(out / "checkpoints")


def test_resume_of_a_read_only_folder_in_the_older_layout_suggests_out_and_recovers(tmp_path):
    """Issue 19: a traceback from the lock file; and every --resume form refused the older layout's leftovers."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = (
        os.geteuid() == 0
        and not subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)]).returncode
    )
    if os.geteuid() == 0 and not mounted:
        pytest.skip("running as root without a read-only mount: permissions would not stop root")
    out = disk / "run"
    try:
        small = [*SMALL, "--set", "train.total_timesteps=400"]
        assert run("train", "--out", str(out), *small).returncode == 0
        _to_older_layout(out)
        if mounted:
            assert not subprocess.run(["mount", "-o", "remount,ro", str(disk)]).returncode
        else:
            for p in [out, *out.rglob("*")]:
                p.chmod(p.stat().st_mode & ~0o222)
        refused = run("train", "--resume", str(out), "--no-progress", "--set", "train.total_timesteps=600")
        assert refused.returncode == 2 and "Traceback" not in refused.stderr
        assert "cannot be written" in refused.stderr and f"--resume {out} --out" in refused.stderr
        other = tmp_path / "continued"
        resumed = run("train", "--resume", str(out), "--out", str(other), "--no-progress",
                      "--set", "train.total_timesteps=600")  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
        assert "resuming" in resumed.stdout and "(400 steps)" in resumed.stdout
        assert read_meta(other / "checkpoint")[0]["counters"]["timesteps"] >= 600
    finally:
        if mounted:
            subprocess.run(["umount", str(disk)])
        elif out.exists():
            for p in [out, *out.rglob("*")]:
                p.chmod(p.stat().st_mode | 0o200)


def test_resume_of_the_checkpoint_path_of_an_interrupted_older_layout_save_recovers_it(tmp_path):
    """Issue 35: '--resume RUN' recovered the older layout's leftovers, '--resume RUN/checkpoint' was refused."""
    from cli_helpers import run_cli

    out = tmp_path / "run"
    assert run_cli("train", "--out", str(out), *SMALL, "--set", "train.total_timesteps=300")[0] == 0
    _to_older_layout(out)
    code, stdout, stderr = run_cli(
        "train", "--resume", str(out / "checkpoint"), "--no-progress", "--set", "train.total_timesteps=400"
    )
    assert code == 0, stderr
    assert "a save was interrupted" in stderr
    assert "resuming" in stdout and "(300 steps)" in stdout
    assert read_meta(out / "checkpoint")[0]["counters"]["timesteps"] >= 400
    assert not (out / ".checkpoint.old").exists()  # the save repaired the folder
