"""Nothing poisons a run (issue 19), through the real command line: foreign files, bad env data, NaN losses.

Each test starts ``rlgraph train`` as a subprocess; small networks and budgets keep each to a
few seconds of training.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlgraph_core.checkpoint import latest_checkpoint, read_meta
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


def test_a_nan_loss_stops_the_run_and_no_checkpoint_holds_nan_weights(tmp_path):
    """Issue 19: NaN observations trained to the end with exit 0; every checkpoint held all-NaN weights.

    Here the observation check is switched off (``env.allow_nonfinite_obs``), so the NaN reaches
    the loss: the run must stop with ``ended_by: error``, write no final checkpoint, and leave the
    newest finite periodic checkpoint the newest, named in the summary.
    """
    out = tmp_path / "run"
    result = run("train", "--out", str(out), *SMALL, "--set", "env.id=poison_env:PoisonCartPole",
                 "--set", "env.kwargs={bad: obs_nan, after: 400}", "--set", "env.allow_nonfinite_obs=true")  # fmt: skip
    assert result.returncode == 1, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ended_by"] == "error" and "The loss became nan" in summary["error"]
    assert "NaN or infinite" in summary["checkpoint_refused"]
    assert not (out / "checkpoint").exists()
    newest = latest_checkpoint(out)
    assert newest is not None and summary["checkpoint"] == str(newest)
    for folder in [*sorted((out / "checkpoints").glob("step-*")), out / "checkpoint_best"]:
        assert all_finite(folder), folder


def test_a_network_too_large_for_memory_is_refused_even_by_dry_run(tmp_path):
    """Issue 19: --dry-run allocated the weights of hidden=[100000000] and was OOM-killed."""
    result = run("train", "--dry-run", "--set", "agent.network.hidden=[100000000, 100000000]", timeout=120)
    assert result.returncode == 2, result.stderr
    assert "'agent.network.hidden' = [100000000, 100000000]" in result.stderr and "PiB" in result.stderr
