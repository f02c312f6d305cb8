"""Reproducibility on the torch backend, like Stable-Baselines3's determinism test: two runs with
the same seed and config (one CPU thread) give bit-identical metrics rows (minus clock fields) and
weights; another seed gives other weights, so the check can fail. A run stopped, saved, loaded
and continued matches the same run continued in-process and an uninterrupted one (the episodes in
progress are replayed, ``rlgraph_core.execution.env_resume``); ``docs/reproducibility.md`` says
which combinations hold.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import rlgraph_core as rl
from rlgraph_core.plugins import get_plugin_manager
from rlgraph_core.errors import CheckpointError
from rlgraph_core.execution import env_resume
from rlgraph_core.execution.run_dir import read_metrics
from cli_helpers import run_cli
from rlgraph_core.testing.determinism import (
    RunResult,
    check_resume_determinism,
    check_seed_determinism,
    joined_rows,
    make_tiny,
    result_of,
    strip_clock,
    weights_differ,
)

if "torch" not in get_plugin_manager().names("backends"):
    pytest.skip("the torch backend (rlgraph-torch) is not installed", allow_module_level=True)


@pytest.mark.parametrize(("algo", "mode"), [("dqn", "eager"), ("ppo", "eager"), ("dqn", "static")])
def test_same_seed_gives_bit_identical_metrics_and_weights(algo, mode, tmp_path):
    check_seed_determinism(rl.make, algo, "torch", mode, tmp_path)


def test_save_load_continues_the_agents_random_streams(tmp_path):
    """Exploration, replay sampling and optimizer state travel in the checkpoint: learn, save,
    load, learn gives what learn, learn gives in one process."""
    in_process = make_tiny(rl.make, "dqn", "torch", "eager", 0, tmp_path / "one").learn(128).learn(128)
    make_tiny(rl.make, "dqn", "torch", "eager", 0, tmp_path / "two").learn(128).save(tmp_path / "ckpt")
    resumed = rl.load(tmp_path / "ckpt", out=tmp_path / "resumed").learn(128)
    assert resumed.timesteps == in_process.timesteps == 256
    one, two = result_of(in_process, tmp_path / "one"), result_of(resumed, tmp_path / "resumed")
    assert one.metrics[-1] == two.metrics[-1]  # the row at 256 steps, clock fields left out
    assert not weights_differ(one, two)


@pytest.mark.parametrize(("algo", "total"), [("dqn", 256), ("ppo", 192)])
def test_a_stopped_and_resumed_run_matches_an_uninterrupted_one(algo, total, tmp_path):
    """A run stopped by its budget at half its steps and resumed (``load`` of the run's final
    checkpoint or of ``save``, then ``learn``; and ``rlgraph train --resume``) continues the
    episodes in progress and every random stream: its metrics rows and weights equal an
    uninterrupted run's. PPO stops at 96 steps, half-way through its second 64-step rollout."""
    first = check_resume_determinism(rl.make, rl.load, algo, "torch", "eager", tmp_path, total)
    cli = tmp_path / "cli"
    argv = ["train", "--resume", str(first), "--set", f"train.total_timesteps={total}", "--no-progress"]
    code, _, stderr = run_cli(*argv, "--out", str(cli))
    assert code == 0, stderr
    expected = result_of(rl.load(tmp_path / "whole" / "checkpoint"), tmp_path / "whole")
    resumed = RunResult(
        strip_clock(read_metrics(cli / "metrics.jsonl")), rl.load(cli / "checkpoint").agent.get_weights()
    )
    assert joined_rows(first, resumed.metrics, total // 2, expected.metrics) == expected.metrics
    assert not weights_differ(expected, resumed), "rlgraph train --resume: other weights"


def test_a_partly_collected_rollout_is_checked_before_it_is_continued(tmp_path):
    """PPO stopped mid-rollout stores its steps so far; a malformed one is refused in one paragraph."""
    algo = make_tiny(rl.make, "ppo", "torch", "eager", 0, None).learn(96)
    rollout = algo.agent.partial_rollout()
    assert rollout is not None and len(rollout["rewards"]) == 16  # 96 = 64 + 16 steps of 2 envs
    assert algo.agent.partial_rollout_problem(rollout) is None
    bad = [
        ({**rollout, "extra": rollout["rewards"]}, "the rollout holds"),
        ({**rollout, "values": np.full_like(rollout["values"], np.nan)}, "'values' holds NaN"),
        ({**rollout, "obs": rollout["obs"][..., :2]}, "rollout observations are [2]"),
        ({k: v[:, :1] for k, v in rollout.items()}, "not [16, 2, ...]"),
    ]
    for fields, named in bad:
        assert named in algo.agent.partial_rollout_problem(fields)
    algo.save(tmp_path / "ck")
    arrays, info = algo._state.env_runner
    with pytest.raises(CheckpointError, match="its partly collected rollout: rollout field 'terminated'"):
        env_resume.check_snapshot(
            info,
            {**arrays, "rollout/terminated": arrays["rollout/terminated"].astype(np.int8)},
            algo.observation_space,
            algo.action_space,
            2,
            "ck",
            algo.agent,
        )
    assert sorted(rl.load(tmp_path / "ck")._state.env_runner[0]) == sorted(arrays)


def test_learn_twice_matches_one_learn():
    """In one process, learn(128) then learn(128) continues the envs' episodes: learn(256)'s weights."""
    whole = make_tiny(rl.make, "dqn", "torch", "eager", 0, None).learn(256).agent.get_weights()
    halves = make_tiny(rl.make, "dqn", "torch", "eager", 0, None).learn(128).learn(128).agent.get_weights()
    assert all(np.array_equal(whole[k], halves[k]) for k in whole)


def test_the_docs_example_runs(tmp_path, monkeypatch):
    """``docs/reproducibility.md``'s block (it asserts two seed-0 runs match) runs as written."""
    monkeypatch.chdir(tmp_path)
    text = (Path(__file__).resolve().parents[2] / "docs" / "reproducibility.md").read_text()
    (block,) = re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    exec(compile(block, "reproducibility.md", "exec"), {})
