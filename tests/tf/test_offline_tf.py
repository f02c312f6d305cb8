"""Offline RL on TensorFlow: CQL ends clearly above behaviour cloning on the same mixed-quality
CartPole dataset (the torch session runs the same comparison and the rest of the offline tests).
The dataset (60 episodes of a behaviour that takes a scripted expert's action only 40% of the
time) is recorded here; nothing is downloaded."""

from __future__ import annotations

import pytest

pytest.importorskip("minari", reason="the offline extra (minari) is not installed")

import rlgraph_core as rl  # noqa: E402
from rlgraph_core.testing.datasets import cartpole_expert, record_policy  # noqa: E402


@pytest.mark.learning
def test_cql_ends_clearly_above_bc_on_mixed_quality_data_tf(tmp_path):
    data_return = record_policy(tmp_path / "mixed", cartpole_expert, episodes=60, p_other=0.6, seed=1)
    returns = {}
    for name in ("bc", "cql"):
        algo = rl.make(
            name,
            dataset=str(tmp_path / "mixed"),
            backend="tf",
            mode="static",
            eval_interval=1000,
            eval_episodes=5,
            network={"type": "mlp", "hidden": [64, 64]},
            batch_size=64,
        )
        algo.learn(updates=1000)
        returns[name] = algo.last_summary["eval_return_mean"]
    assert returns["bc"] < 2 * data_return, returns
    assert returns["cql"] >= max(200.0, returns["bc"] + 150.0), returns
