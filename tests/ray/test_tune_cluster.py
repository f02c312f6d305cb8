"""``rlgraph tune --resume`` and ``--address``: a search interrupted (Ctrl-C) while its second trial runs,
then resumed through Tune's own restore; finished trials are not redone and the interrupted one continues
from its run folder's checkpoint. ``--address`` goes through the Ray executors' address logic: a closed
port fails at once, naming the flag."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
sys.path.insert(0, str(Path(__file__).parents[1] / "torch"))
from cli_helpers import assert_user_error, run_cli  # noqa: E402
from test_cluster import free_port  # noqa: E402
from tune_helpers import TINY, TUNE_MARKS  # noqa: E402

from rlgraph_core.checkpoint import latest_checkpoint, read_meta  # noqa: E402

pytestmark = TUNE_MARKS


def test_a_closed_address_fails_at_once_naming_the_flag(tmp_path):
    if ray.is_initialized():  # a module before this one left its session open
        ray.shutdown()
    space = tmp_path / "space.yaml"
    space.write_text("agent.optimizer.learning_rate: {choice: [0.001]}\n")
    port = free_port()
    start = time.monotonic()
    code, _, stderr = run_cli(
        "tune", "dqn_cartpole", "--space", str(space), "--out", str(tmp_path / "o"),
        "--address", f"127.0.0.1:{port}", "--connect-timeout-s", "2",
    )  # fmt: skip
    assert_user_error(
        code, stderr, f"--address = '127.0.0.1:{port}': no Ray cluster could be reached", "--connect-timeout-s = 2 s"
    )
    assert time.monotonic() - start < 60 and not ray.is_initialized()
    code, _, stderr = run_cli("tune", "dqn_cartpole", "--space", str(space), "--out", str(tmp_path / "o"), "--resume")
    assert_user_error(code, stderr, "--resume: no search to continue")


def _trial_runs(out: Path) -> list[Path]:
    return sorted((out / "trials").glob("trial_*/run"))


def _summary_steps(run: Path) -> int | None:
    summary = run / "summary.json"
    return json.loads(summary.read_text())["timesteps"] if summary.is_file() else None


def _tune(out: Path, space: Path, *more: str) -> subprocess.Popen:
    sets = [a for s in TINY for a in ("--set", s)]
    cmd = [sys.executable, "-m", "rlgraph_core.cli", "tune", "dqn_cartpole", "--space", str(space),
           "--samples", "1", "--scheduler", "fifo", "--max-concurrent", "1", "--cpus-per-trial", "1",
           "--out", str(out), *sets, *more]  # fmt: skip
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    # on a loaded 2-core machine the raylet may take longer than Ray's default 60 s to register
    env.setdefault("RAY_raylet_start_wait_time_s", "300")
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def test_an_interrupted_search_resumes_without_redoing_trials(tmp_path):
    """Ctrl-C while the second of two trials runs, then --resume (Tune's restore, on a private local Ray)."""
    if ray.is_initialized():
        ray.shutdown()
    space = tmp_path / "space.yaml"
    # a grid of two trials, run one at a time: a short one, then a longer one to interrupt
    space.write_text("train.total_timesteps: {grid: [500, 4000]}\n")
    out = tmp_path / "search"

    proc = _tune(out, space)
    deadline = time.monotonic() + 600
    interrupted = False
    while time.monotonic() < deadline and proc.poll() is None:
        runs = _trial_runs(out)
        finished = [r for r in runs if _summary_steps(r) == 500]
        running = [r for r in runs if r not in finished and list((r / "checkpoints").glob("*"))]
        if finished and running:
            proc.send_signal(signal.SIGINT)  # Ctrl-C: Tune stops the search and keeps its state
            interrupted = True
            break
        time.sleep(0.5)
    output = proc.communicate(timeout=300)[0]
    assert interrupted, output[-3000:]
    (first,) = finished
    (second,) = running
    assert _summary_steps(second) is None, "the long trial ended before the interrupt"
    # rlgraph's resume only, and no "best" of an unfinished search (issue 35 §2)
    assert proc.returncode == 130, output[-3000:]
    assert "--resume" in output and "Tuner.restore" not in output and "best:" not in output, output[-3000:]
    assert not (out / "best_config.yaml").exists()
    first_metrics = (first / "metrics.jsonl").read_bytes()
    second_rows = (second / "metrics.jsonl").read_text().splitlines()
    checkpoint_steps = read_meta(latest_checkpoint(second))[0]["counters"]["timesteps"]

    proc = _tune(out, space, "--resume")
    output = proc.communicate(timeout=600)[0]
    assert proc.returncode == 0, output[-3000:]
    assert _trial_runs(out) == sorted([first, second])  # no new trials
    assert (first / "metrics.jsonl").read_bytes() == first_metrics  # the finished trial was not redone
    # the interrupted trial continued from its checkpoint: its rows up to there are the ones written
    # before the interrupt (a fresh start would have cleared the folder), then it ran to its budget
    assert _summary_steps(second) == 4000
    rows = (second / "metrics.jsonl").read_text().splitlines()
    steps = [json.loads(r)["timesteps"] for r in rows]
    assert steps == sorted(set(steps)) and steps[-1] == 4000

    def upto(lines):
        return [line for line in lines if json.loads(line)["timesteps"] <= checkpoint_steps]

    assert upto(rows) == upto(second_rows) and upto(rows), (checkpoint_steps, steps)
    with open(out / "trials.csv") as f:
        table = list(csv.DictReader(f))
    assert len(table) == 2 and all(not r["error"] for r in table)
    assert sorted(int(r["train.total_timesteps"]) for r in table) == [500, 4000]


def test_a_trial_run_again_continues_from_its_checkpoint(tmp_path, monkeypatch):
    """What a resumed search does with an unfinished trial, without a cluster: the trainable, run again
    in the same trial folder, continues the run there from its newest checkpoint (rows kept) instead
    of starting over."""
    from ray import tune

    from rlgraph_core.config.run import apply_overrides, load_shipped_config, validate_config
    from rlgraph_ray.tune import _make_trainable

    reports = []
    monkeypatch.setattr(tune, "report", lambda metrics, **_: reports.append(dict(metrics)))
    monkeypatch.setattr(tune, "get_context", lambda: type("C", (), {"get_trial_name": lambda self: "trial_x"})())
    raw = validate_config(apply_overrides(load_shipped_config("dqn_cartpole"), TINY)).to_dict()
    trainable = _make_trainable(raw, str(tmp_path / "trials"))
    run = tmp_path / "trials" / "trial_x" / "run"
    trainable({"train.total_timesteps": 500})  # the part done before an interrupt
    rows_before = (run / "metrics.jsonl").read_text().splitlines()
    trainable({"train.total_timesteps": 1000})  # run again: continues to the (larger) budget
    rows = (run / "metrics.jsonl").read_text().splitlines()
    assert rows[: len(rows_before)] == rows_before and len(rows) > len(rows_before)
    assert [json.loads(r)["timesteps"] for r in rows] == [250, 500, 750, 1000]
    assert _summary_steps(run) == 1000
    assert [r["timesteps"] for r in reports if r.get("done")] == [500, 1000]
