"""Recurrent PPO on the tf backend: the sequences training unrolls reproduce what acting computed
(eager and static), an update runs in both modes, and (heavy) the memory task is learned."""

from __future__ import annotations

import numpy as np
import pytest

import rlgraph_core as rl
from rlgraph_core.agents.recurrent_ppo import RecurrentPPOAgent
from rlgraph_core.testing.rollouts import collect_rollout

ENV = "rlgraph_core.testing.memory_env:RecallCue"


def make(mode: str, cell: str = "lstm", steps: int = 2000):
    return rl.make(
        "ppo",
        env={"id": ENV, "num_envs": 4},
        backend="tf",
        mode=mode,
        seed=0,
        network={"type": cell, "units": 16, "encoder": {"hidden": []}, "seq_len": 4},
        n_steps=16,
        batch_size=32,
        n_epochs=4,
        ent_coef=0.01,
        optimizer={"learning_rate": 3e-3},
        eval_interval=10**9,
    )


@pytest.mark.parametrize(
    "mode, cell", [("eager", "lstm"), pytest.param("static", "gru", marks=pytest.mark.heavy)]
)  # static: 39 s of tf.function tracing (load ~9), over a CI test's budget
def test_unrolled_sequences_reproduce_acting_and_an_update_runs(mode, cell):
    algo = make(mode, cell)
    agent = algo.agent
    assert isinstance(agent, RecurrentPPOAgent)
    rollout = collect_rollout(algo)
    starts = rollout["episode_starts"]
    assert starts[1:].any() and not starts[1:].all()  # episodes (4 steps) end inside sequences
    to_t, to_np = agent.backend.to_tensor, agent.backend.to_numpy
    n = starts.shape[1]
    for piece in range(starts.shape[0] // 4):
        rows = slice(piece * 4, (piece + 1) * 4)
        state = {k: to_t(v[piece]) for k, v in rollout["sequence_states"].items()}
        log_probs, _, values = agent.graph.evaluate_actions(
            to_t(rollout["obs"][rows]), state, to_t(starts[rows]), to_t(rollout["actions"][rows])
        )
        np.testing.assert_allclose(to_np(log_probs).reshape(4, n), rollout["log_probs"][rows], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(to_np(values).reshape(4, n), rollout["values"][rows], rtol=1e-5, atol=1e-5)
    before = {k: np.copy(v) for k, v in agent.get_weights().items()}
    metrics = agent.update(rollout)
    assert metrics["gradient_steps"] == 4 * 2 and np.isfinite(metrics["loss"])
    after = agent.get_weights()
    assert all(not np.array_equal(before[k], after[k]) for k in before if k.endswith(("w_x", "w_h")))


@pytest.mark.heavy
def test_tf_static_lstm_learns_the_memory_task():
    """As the torch test: RecallCue needs memory; 2,000 env steps (tf static: ~75 s with its tracing)."""
    algo = make("static")
    algo.learn(2000)
    assert algo.evaluate(50)["eval_return_mean"] >= 0.9
