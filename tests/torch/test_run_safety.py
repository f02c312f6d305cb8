"""No run loses its work: real processes, real signals, torn files, owned output folders.

Each test that stops a run starts ``rlgraph train`` as a subprocess and signals the pid it
started; small networks and short intervals keep every run to a few seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlgraph_core.checkpoint import latest_checkpoint, read_meta
from rlgraph_core.execution.run_dir import RunDirError, claim_run_dir, json_line, read_metrics
from rlgraph_core.plugins import get_plugin_manager

pytestmark = pytest.mark.skipif("torch" not in get_plugin_manager().names("backends"), reason="needs rlgraph-torch")

#: A small DQN that evaluates and checkpoints every 500 env steps and would run for a long time.
LONG_RUN = [
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


def _env() -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="3", MPLBACKEND="Agg")
    env.setdefault("RLGRAPH_TEST_QUIET", "1")
    return env


def start(out: Path, *args: str) -> subprocess.Popen:
    """``rlgraph train --out OUT ARGS`` as a subprocess (its own process group)."""
    cmd = [sys.executable, "-m", "rlgraph_core.cli", "train", "--out", str(out), *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())


def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``rlgraph ARGS`` to completion."""
    cmd = [sys.executable, "-m", "rlgraph_core.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=timeout)


def wait_for(predicate, proc: subprocess.Popen, timeout: float = 240) -> None:
    """Poll ``predicate`` until it holds; fail with the process's output if it died or timed out."""
    deadline = time.time() + timeout
    while not predicate():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the run ended early with {proc.returncode}:\n{out}\n{err}")
        if time.time() > deadline:
            proc.kill()
            pytest.fail("timed out waiting for the run")
        time.sleep(0.2)


def periodic(out: Path) -> list[Path]:
    """The periodic checkpoints of a run, oldest first."""
    folder = out / "checkpoints"
    if not folder.is_dir():
        return []
    found = [p for p in folder.glob("step-*") if (p / "meta.json").is_file()]
    return sorted(found, key=lambda p: int(p.name.split("-")[1].split(".")[0]))


@pytest.mark.parametrize("sig, code, reason", [(signal.SIGTERM, 143, "sigterm"), (signal.SIGINT, 130, "sigint")])
def test_a_signal_ends_the_run_with_a_checkpoint_summary_and_plot(tmp_path, sig, code, reason):
    out = tmp_path / "run"
    proc = start(out, *LONG_RUN)
    wait_for(lambda: len(read_metrics(out / "metrics.jsonl")) >= 3, proc)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == code, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ended_by"] == reason and summary["exit_code"] == code
    meta, _ = read_meta(out / "checkpoint")
    assert meta["counters"]["timesteps"] == summary["timesteps"] >= 750
    assert meta["ended_by"] == reason
    assert (out / "learning_curve.png").stat().st_size > 0
    assert "resume with: rlgraph train --resume" in stderr


def test_kill_9_keeps_the_last_periodic_checkpoint_and_resume_carries_everything_on(tmp_path):
    out = tmp_path / "run"
    proc = start(out, *LONG_RUN)
    wait_for(lambda: len(periodic(out)) >= 2, proc)
    proc.kill()  # SIGKILL: no handler runs
    proc.wait(timeout=60)
    assert not (out / "checkpoint").exists() and not (out / "summary.json").exists()
    with open(out / "metrics.jsonl", "a") as f:
        f.write('{"timesteps": 99999, "episode_ret')  # a torn last line, as kill -9 can leave
    newest = periodic(out)[-1]
    assert latest_checkpoint(out) == newest
    meta, _ = read_meta(newest)
    steps, best = meta["counters"]["timesteps"], meta["run_state"]["best_eval_return"]
    assert steps >= 1000 and best is not None

    done = run("train", "--resume", str(out), "--set", f"train.total_timesteps={steps + 1000}", "--no-progress")
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ended_by"] == "total_timesteps" and summary["timesteps"] >= steps + 1000
    final, _ = read_meta(out / "checkpoint")
    assert final["counters"]["updates"] > meta["counters"]["updates"]
    # the replay memory came back: the final memory holds the old records plus the new ones
    assert final["counters"]["timesteps"] == summary["timesteps"]
    assert summary["best_eval_return"] >= best  # the best evaluation survived the resume
    rows = read_metrics(out / "metrics.jsonl")  # the torn line was dropped with the rows after the checkpoint
    steps_logged = [r["timesteps"] for r in rows]
    assert steps_logged == sorted(steps_logged) and len(steps_logged) == len(set(steps_logged))
    assert 99999 not in steps_logged and (out / "learning_curve.png").stat().st_size > 0
    best_meta, _ = read_meta(out / "checkpoint_best")
    assert best_meta["eval"]["eval_return_mean"] == summary["best_eval_return"]


def test_metrics_are_strict_json_and_a_torn_line_is_skipped_with_a_warning(tmp_path):
    line = json_line({"timesteps": 1, "loss": float("nan"), "x": [float("inf"), 1.0]})
    assert json.loads(line, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}")) == {
        "timesteps": 1,
        "loss": None,
        "x": [None, 1.0],
    }
    path = tmp_path / "metrics.jsonl"
    path.write_text(line + "\n" + '{"timesteps": 2}\n{"timesteps": 3, "lo')
    with pytest.warns(RuntimeWarning, match="torn last line"):
        rows = read_metrics(path)
    assert [r["timesteps"] for r in rows] == [1, 2]


def test_an_output_folder_belongs_to_one_run(tmp_path):
    out = tmp_path / "run"
    with claim_run_dir(out):
        with pytest.raises(RunDirError, match=f"pid {os.getpid()}"):
            with claim_run_dir(out):
                pass
        (out / "metrics.jsonl").write_text('{"timesteps": 1}\n')
    with pytest.raises(RunDirError, match="--resume .* --overwrite"):
        with claim_run_dir(out):
            pass
    with claim_run_dir(out, overwrite=True):
        assert not (out / "metrics.jsonl").exists()


def test_two_runs_into_one_folder_the_second_is_refused_naming_the_first(tmp_path):
    out = tmp_path / "run"
    first = start(out, *LONG_RUN)
    try:
        wait_for(lambda: (out / "metrics.jsonl").is_file(), first)
        second = run("train", "--out", str(out), *LONG_RUN, "--overwrite", timeout=120)
        assert second.returncode == 2
        assert f"pid {first.pid}" in second.stderr and "in use by another rlgraph run" in second.stderr
    finally:
        first.kill()
        first.wait(timeout=60)


def test_a_new_run_refuses_a_folder_holding_another_run(tmp_path):
    out = tmp_path / "run"
    small = ["--no-progress", "--set", "agent.network.hidden=[16]", "--set", "train.total_timesteps=300",
             "--set", "train.eval_interval=300", "--set", "train.eval_episodes=1"]  # fmt: skip
    assert run("train", "--out", str(out), *small).returncode == 0
    before = (out / "metrics.jsonl").read_text()
    again = run("train", "--out", str(out), *small)
    assert again.returncode == 2 and "--overwrite" in again.stderr
    assert (out / "metrics.jsonl").read_text() == before  # nothing appended
    replaced = run("train", "--out", str(out), *small, "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    assert len(read_metrics(out / "metrics.jsonl")) == len(read_metrics_text(before))


def read_metrics_text(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_resume_applies_flags_like_set(tmp_path):
    out = tmp_path / "run"
    small = ["--no-progress", "--set", "agent.network.hidden=[16]", "--set", "train.total_timesteps=300",
             "--set", "train.eval_interval=300", "--set", "train.eval_episodes=1"]  # fmt: skip
    assert run("train", "--out", str(out), *small).returncode == 0
    resumed = run("train", "--resume", str(out), "--seed", "7", "--mode", "static", "--no-progress",
                  "--set", "train.total_timesteps=600")  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    _, config = read_meta(out / "checkpoint")
    assert config["train"]["seed"] == 7 and config["train"]["mode"] == "static"
    assert config["train"]["total_timesteps"] == 600


def test_an_env_error_ends_the_run_with_a_checkpoint_summary_and_exit_code_1(tmp_path):
    out = tmp_path / "run"
    code = (
        "import sys, faulty_env; from rlgraph_core.cli import main; "
        f"sys.exit(main(['train', '--out', {str(out)!r}, *{LONG_RUN!r}, '--set', 'env.id=FaultyCartPole-v0']))"
    )
    env = dict(_env(), PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "simulated simulator crash" in proc.stderr and "Traceback" not in proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ended_by"] == "error" and "RuntimeError: simulated simulator crash" in summary["error"]
    assert "faulty_env.py" in summary["traceback"]
    meta, _ = read_meta(out / "checkpoint")
    assert meta["counters"]["timesteps"] == summary["timesteps"] >= 500
    assert (out / "learning_curve.png").is_file()


def test_resume_of_a_run_folder_chooses_its_checkpoint_under_the_lock(tmp_path, monkeypatch):
    """Issue 35: '--resume RUN' chose step 15,000 before taking the lock; the run still writing there
    ended at 20,000 and the resumed run replaced its final checkpoint and cut metrics.jsonl back.

    Deterministic: the moment between choosing and locking is where the test lets the first run
    "end" (the folder becomes the finished run's), through the lock function itself.
    """
    import shutil

    import rlgraph_core.execution.run_dir as run_dir
    import rlgraph_core.training as training
    from cli_helpers import run_cli
    from rlgraph_core.checkpoint import remove_checkpoint
    from rlgraph_core.execution.run_dir import trim_metrics

    small = ["--no-progress", "--set", "agent.network.hidden=[16]", "--set", "agent.learning_starts=100",
             "--set", "train.eval_interval=200", "--set", "train.eval_episodes=1", "--set", "env.num_envs=1"]  # fmt: skip
    out, finished = tmp_path / "run", tmp_path / "finished"
    assert run_cli("train", "--out", str(out), *small, "--set", "train.total_timesteps=500")[0] == 0
    shutil.copytree(out, finished, symlinks=True)
    # ``out`` as the live run looked at step 200: no final checkpoint, the newest periodic one at 200.
    remove_checkpoint(out / "checkpoint")
    (out / "summary.json").unlink()
    for folder in periodic(out)[1:]:
        shutil.rmtree(folder)
    (out / "checkpoints" / "latest").unlink()
    os.symlink("step-200", out / "checkpoints" / "latest")
    trim_metrics(out / "metrics.jsonl", 200)
    real_claim = run_dir.claim_run_dir

    def claim_after_the_live_run_ended(folder, **kwargs):
        shutil.rmtree(out)
        shutil.copytree(finished, out, symlinks=True)
        return real_claim(folder, **kwargs)

    # training.py imports claim_run_dir by name: patch it where the run looks it up
    monkeypatch.setattr(training, "claim_run_dir", claim_after_the_live_run_ended)
    code, stdout, stderr = run_cli("train", "--resume", str(out), *small, "--set", "train.total_timesteps=600")
    assert code == 0, stderr
    assert "(500 steps)" in stdout, stdout
    kept = [r["timesteps"] for r in read_metrics(finished / "metrics.jsonl")]
    assert [r["timesteps"] for r in read_metrics(out / "metrics.jsonl")][: len(kept)] == kept
    assert read_meta(out / "checkpoint")[0]["counters"]["timesteps"] >= 600


def test_signals_during_the_final_phase_wait_until_the_plot_and_the_last_line_are_written(tmp_path):
    """Issue 35: a second SIGTERM (or INT then TERM) during the final phase killed the run before
    its plot and its "stopped" line. Fault points, not sleeps: the run stops itself with SIGINT
    at step 300, then sends SIGTERM and SIGINT from inside the final checkpoint's save and again
    while the CLI formats its last line."""
    out = tmp_path / "run"
    code = (
        "import os, signal, sys\n"
        "import rlgraph_core.execution.recorder as recorder, rlgraph_core.training as training\n"
        "from rlgraph_core.cli import main\n"
        "def twice():\n"
        "    os.kill(os.getpid(), signal.SIGTERM); os.kill(os.getpid(), signal.SIGINT)\n"
        "done, finish, end_line = recorder.RunRecorder.done, recorder.RunRecorder.finish, training.end_line\n"
        "def first(self, stop=None):\n"
        "    if self.timesteps >= 300 and stop is not None and stop.reason is None:\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "    return done(self, stop)\n"
        "recorder.RunRecorder.done = first\n"
        "recorder.RunRecorder.finish = lambda self: (twice(), finish(self))[1]\n"
        "training.end_line = lambda summary: (twice(), end_line(summary))[1]\n"
        f"sys.exit(main(['train', '--out', {str(out)!r}, *{LONG_RUN!r}]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=300)
    assert proc.returncode == 130, proc.stderr[-3000:]
    assert "stopped (sigint)" in proc.stdout and "ended because Ctrl-C" in proc.stdout, proc.stdout[-2000:]
    assert (out / "learning_curve.png").is_file()
    assert json.loads((out / "summary.json").read_text())["ended_by"] == "sigint"
    assert read_meta(out / "checkpoint")[0]["counters"]["timesteps"] >= 300
