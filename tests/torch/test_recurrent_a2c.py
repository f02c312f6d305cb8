"""A2C with a recurrent policy (``network: {type: lstm | gru}``) on torch: the sequences of one
rollout unrolled from their stored states give what acting gave, and the memory env is learned
only with memory."""

from __future__ import annotations

import numpy as np

import rlgraph_core as rl
from rlgraph_core.agents.recurrent_a2c import RecurrentA2CAgent

ENV = "rlgraph_core.testing.memory_env:RecallCue"


def small(cell: str, seed: int = 0, **overrides):
    """A2C on RecallCue (delay 2: 4 steps an episode), 8 envs x 8-step rollouts, one sequence each."""
    network = (
        {"type": "mlp", "hidden": [16]}
        if cell == "mlp"
        else {"type": cell, "units": 16, "encoder": {"hidden": []}, "seq_len": 8}
    )
    settings = dict(network=network, n_steps=8, ent_coef=0.01, optimizer={"learning_rate": 2e-3}, eval_interval=10**9)
    settings.update(overrides)
    return rl.make("a2c", env={"id": ENV, "num_envs": 8}, backend="torch", seed=seed, **settings)


def test_rollout_sequences_give_what_acting_gave():
    """Before the update, the rollout cut into sequences of 4 (episodes of 4 steps straddle them),
    each unrolled from its stored state with resets inside, gives the log-probabilities and values
    acting recorded."""
    algo = small("gru", network={"type": "gru", "units": 8, "seq_len": 4})
    agent = algo.agent
    assert isinstance(agent, RecurrentA2CAgent)
    from rlgraph_core.agents.recurrent_on_policy import sequences
    from rlgraph_core.testing.rollouts import collect_rollout

    rollout = collect_rollout(algo)
    to_t, to_np = agent.backend.to_tensor, agent.backend.to_numpy
    states = {k: to_t(v.reshape(16, -1)) for k, v in rollout["sequence_states"].items()}
    log_probs, _, values = agent.graph.evaluate_actions(
        to_t(sequences(rollout["obs"], 4)),
        states,
        to_t(sequences(rollout["episode_starts"], 4)),
        to_t(sequences(rollout["actions"], 4)),
    )
    np.testing.assert_allclose(
        to_np(log_probs).reshape(4, 16), sequences(rollout["log_probs"], 4), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(to_np(values).reshape(4, 16), sequences(rollout["values"], 4), rtol=1e-5, atol=1e-6)
    assert np.abs(rollout["sequence_states"]["pi_h"][1]).max() > 1e-3  # memory crosses sequences


def test_lstm_a2c_learns_the_memory_task_where_an_mlp_cannot():
    """RecallCue pays 1 for naming at the last step the cue of the first; a feed-forward policy
    can only guess (0.5). 1,024 env steps, seed 0 (measured: LSTM 1.0 from 512 steps; seed 1 from 1,024)."""
    lstm = small("lstm")
    lstm.learn(1024)
    remembered = lstm.evaluate(50)["eval_return_mean"]
    mlp = small("mlp")
    mlp.learn(1024)
    guessed = mlp.evaluate(50)["eval_return_mean"]
    assert remembered >= 0.9, f"LSTM A2C reached {remembered} on RecallCue after 1,024 env steps"
    assert guessed <= 0.7, f"MLP A2C reached {guessed}: the task no longer needs memory"
