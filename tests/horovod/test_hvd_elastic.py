"""Elastic mode: ``executor.elastic: true`` under an elastic ``horovodrun`` survives a lost rank.

Rank 1's process is SIGKILLed mid-run (its env kills it); rank 0's next collective fails, it
restores the last commit, meets the launcher again as the only rank and finishes the run:
budget reached, final checkpoint written, the reset and the lost rank counted in the summary.
If rank 0 itself is lost, the survivor (now rank 0, without rank 0's recorder) ends promptly
with an error saying so, instead of hanging or writing over rank 0's folder. (Elastic mode under
a plain launch is refused at config time: ``test_single_rank.py``.)
"""

from __future__ import annotations

import json
import sys

from hvd_launch import CONFIGS, discovery_script, horovodrun_elastic_cmd, run_horovod

QUICK_DQN = [
    "--set",
    "train.eval_interval=1024",
    "--set",
    "train.eval_episodes=2",
    "--set",
    "train.log_interval=256",
    "--set",
    "train.target_return=null",
    "--set",
    "agent.learning_starts=256",
    "--set",
    "agent.train_freq=64",
    "--set",
    "agent.gradient_steps=8",
    "--set",
    "executor.elastic=true",
    "--set",
    "executor.commit_interval=8",
    "--set",
    "executor.check_interval=8",
]


def _train_code(args: list[str]) -> str:
    """``rlgraph train ARGS`` in a process that registers the rank-killing env first."""
    return f"import sys, hvd_faulty_env; from rlgraph_core.cli import main; sys.exit(main({args!r}))"


def _args(out, *more: str) -> list[str]:
    """``rlgraph train`` arguments of a short elastic DQN run into ``out`` on the rank-killing env."""
    return [
        "train",
        str(CONFIGS / "dqn_cartpole.yaml"),
        "--executor",
        "horovod",
        "--out",
        str(out),
        "--no-progress",
        "--set",
        "env.id=RankDyingCartPole-v0",
        "--set",
        "train.total_timesteps=3000",
        *QUICK_DQN,
        *more,
    ]


def test_rank1_killed_rank0_finishes_the_run(tmp_path):
    out = tmp_path / "elastic"
    args = _args(out)
    launcher = horovodrun_elastic_cmd(discovery=discovery_script(tmp_path))
    proc = run_horovod(sys.executable, "-c", _train_code(args), timeout=150, launcher=launcher)
    log = proc.stdout[-4000:] + proc.stderr[-4000:]
    assert proc.returncode == 0, log
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ended_by"] == "total_timesteps", log
    assert summary["timesteps"] >= 3000 and summary["updates"] > 0
    assert summary["elastic_resets"] == 1 and summary["ranks_lost"] == 1, summary
    assert summary["ranks_at_start"] == 2 and summary["ranks"] == 1
    assert (out / "checkpoint" / "meta.json").is_file()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    assert rows[0]["ranks"] == 2 and rows[0]["elastic_resets"] == 0
    assert rows[-1]["ranks"] == 1 and rows[-1]["elastic_resets"] == 1 and rows[-1]["ranks_lost"] == 1
    assert proc.stdout.count("done:") == 1


def test_losing_rank0_ends_the_survivor_with_a_clear_error(tmp_path):
    out = tmp_path / "elastic0"
    args = _args(out, "--set", "env.kwargs={rank: 0}")
    launcher = horovodrun_elastic_cmd(discovery=discovery_script(tmp_path))
    proc = run_horovod(sys.executable, "-c", _train_code(args), timeout=150, launcher=launcher)
    assert proc.returncode != 0
    assert "the original rank 0 was lost" in proc.stdout + proc.stderr, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert not (out / "summary.json").exists()  # the survivor wrote nothing into rank 0's folder
