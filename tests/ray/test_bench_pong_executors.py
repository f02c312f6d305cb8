"""benchmarks/bench_pong_executors.py without training: the shortened configs of its four cases validate
and keep the shipped Pong configs' agents, with the overrides that make a case short."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_pong_executors as bench  # noqa: E402

ARGS = argparse.Namespace(steps=4000, backend=None, mode=None, seed=3)


@pytest.mark.parametrize(
    "agent, executor", [("dqn", "local"), ("dqn", "ray_apex"), ("impala", "local"), ("impala", "ray_impala")]
)
def test_case_configs(agent, executor):
    config, skip = bench.config_for(agent, executor, ARGS)
    tc = config.train
    assert skip == 4 and config.env.id == "ALE/Pong-v5"
    assert (tc.executor, tc.total_timesteps, tc.log_interval, tc.seed) == (executor, 4000, 500, 3)
    assert (tc.backend, tc.mode, tc.num_threads) == ("torch", "static", 1)  # the configs' full-run mode
    assert tc.eval_interval > tc.total_timesteps and tc.target_return is None
    assert tc.loggers == ["jsonl"] and not tc.progress_bar
    assert config.agent.type == agent
    if agent == "dqn":
        assert config.agent.batch_size == 512 and config.agent.train_freq == 256  # apex_pong's replay ratio
        assert config.agent.learning_starts == 1000 and config.agent.memory.capacity == 4000
    if executor == "local":
        assert config.env.num_envs == {"dqn": 4, "impala": 16}[agent]
    else:
        ex = config.executor
        assert ex.num_workers == 2 and ex.envs_per_worker == config.env.num_envs // 2
        if executor == "ray_apex":
            assert ex.replay_snapshot_interval is None


def test_small_budget_keeps_a_batch_in_the_replay():
    config, _ = bench.config_for("dqn", "local", argparse.Namespace(steps=1024, backend="tf", mode="eager", seed=0))
    assert config.agent.learning_starts == 512 and config.agent.memory.capacity == 1024
    assert (config.train.backend, config.train.mode) == ("tf", "eager")
