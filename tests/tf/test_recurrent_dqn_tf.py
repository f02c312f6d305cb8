"""R2D2-style recurrent DQN on the tf backend (the sequence loss is compared with numpy on tf in
tests/core/test_recurrent_dqn_loss.py, in CI): the memory task is learned where the same DQN
without memory guesses (heavy: 90 s wall with tf's first-use warm-up, 24 CPU-s, load ~10)."""

from __future__ import annotations

import numpy as np
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


#: tests/torch/test_recurrent_pixels.py's CNN for RecallCueImage's 6x6 frames
CNN = {"type": "cnn", "preset": "custom", "conv": [{"filters": 8, "kernel": 3, "stride": 3}], "hidden": [16]}


@pytest.mark.heavy
@pytest.mark.parametrize("mode", ["eager", "static"])
def test_r2d2_cnn_lstm_learns_the_pixel_memory_task_on_tf(mode):
    """R2D2 with the CNN before the LSTM on RecallCueImage's uint8 frames, tf eager and static, reaches
    what it reaches on torch (tests/torch/test_recurrent_pixels.py) after 1,000 env steps where DQN with
    the same CNN and no memory guesses; the CNN-LSTM's sequence loss against numpy on tf eager is CI
    (tests/core/test_recurrent_dqn_loss.py). Measured seed 0: 1.0 on both; 45 s (eager) and 31 s (static)
    wall at load ~8 on one shared core."""

    def make_image(network: dict):
        settings = r2d2_recall_settings()
        del settings["type"]
        settings.update(network=network, burn_in=2 if network["type"] == "lstm" else 0)
        return rl.make(
            "dqn",
            env={"id": "rlgraph_core.testing.memory_env:RecallCueImage", "num_envs": 8},
            backend="tf",
            mode=mode,
            seed=0,
            exploration={
                "type": "epsilon_greedy",
                "epsilon": {"type": "linear", "start": 1.0, "end": 0.05, "steps": 500},
            },
            eval_interval=10**9,
            **settings,
        )

    r2d2 = make_image({"type": "lstm", "units": 16, "encoder": CNN, "seq_len": 8})
    assert isinstance(r2d2.agent, RecurrentDQNAgent)
    r2d2.learn(1000)
    assert r2d2.agent.memory.sample(1)["obs"].dtype == np.uint8
    dqn = make_image(CNN)
    dqn.learn(1000)
    assert r2d2.evaluate(50)["eval_return_mean"] >= 0.9
    assert dqn.evaluate(50)["eval_return_mean"] <= 0.7
