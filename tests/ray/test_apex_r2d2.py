"""ray_apex with an R2D2-style recurrent DQN: workers cut their steps into sequence records that
carry the state their first step acted from, with sequence priorities under the worker's weights;
the learner learns the memory task from the shards."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray")

from rlgraph_core.assemble import train  # noqa: E402
from rlgraph_core.config.run import validate_config  # noqa: E402
from rlgraph_core.testing.memory_env import r2d2_recall_settings  # noqa: E402

ENV = "rlgraph_core.testing.memory_env:RecallCue"


@pytest.mark.heavy  # 168 s wall at load 13, 78 s at load ~7 (14 CPU-s in the test process); worker side in CI (torch)
def test_apex_r2d2_learns_the_memory_task_with_two_workers(ray_session, tmp_path):
    """Two workers (epsilon 0.4 and 0.4^8) and one prioritized shard: RecallCue (1.0 only with memory)
    evaluates at >= 0.95 within 3,000 env steps."""
    raw = {
        "agent": r2d2_recall_settings(),
        "env": {"id": ENV, "num_envs": 8},
        "train": {
            "backend": "torch",
            "executor": "ray_apex",
            "seed": 0,
            "total_timesteps": 3000,
            "target_return": 0.95,
            "eval_interval": 500,
            "eval_episodes": 20,
            "log_interval": 500,
            "progress_bar": False,
            "loggers": ["jsonl"],
        },
        "executor": {"num_workers": 2, "num_replay_shards": 1, "fragment_length": 16, "epsilon": 0.4},
    }
    summary = train(validate_config(raw), tmp_path)
    assert summary["worker_restarts"] == 0 and summary["num_workers"] == 2 and summary["updates"] > 0
    assert summary["best_eval_return"] >= 0.95, summary
