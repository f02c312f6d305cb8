"""R2D2-style recurrent DQN on the tf backend (the sequence loss is compared with numpy on tf in
tests/core/test_recurrent_dqn_loss.py, in CI): the memory task is learned where the same DQN
without memory guesses (heavy: 90 s wall with tf's first-use warm-up, 24 CPU-s, load ~10)."""

from __future__ import annotations

import pytest

import rlgraph_core as rl
from rlgraph_core.agents.recurrent_dqn import RecurrentDQNAgent
from rlgraph_core.testing.memory_env import r2d2_recall_settings

ENV = "rlgraph_core.testing.memory_env:RecallCue"


def make(cell: str):
    """tests/torch/test_recurrent_dqn.py's RecallCue settings on tf eager."""
    settings = r2d2_recall_settings()
    del settings["type"]
    if cell == "mlp":
        settings.update(network={"type": "mlp", "hidden": [16]}, burn_in=0)
    else:
        settings["network"]["type"] = cell
    return rl.make(
        "dqn",
        env={"id": ENV, "num_envs": 8},
        backend="tf",
        mode="eager",
        seed=0,
        exploration={"type": "epsilon_greedy", "epsilon": {"type": "linear", "start": 1.0, "end": 0.05, "steps": 800}},
        eval_interval=10**9,
        **settings,
    )


@pytest.mark.heavy
def test_r2d2_learns_the_memory_task_on_tf_where_dqn_without_memory_cannot():
    """Measured (seed 0, 1,600 env steps, 176 updates): LSTM 1.0, MLP 0.56, as on torch."""
    r2d2 = make("lstm")
    assert isinstance(r2d2.agent, RecurrentDQNAgent)
    r2d2.learn(1600)
    dqn = make("mlp")
    dqn.learn(1600)
    assert r2d2.evaluate(50)["eval_return_mean"] >= 0.9
    assert dqn.evaluate(50)["eval_return_mean"] <= 0.7
