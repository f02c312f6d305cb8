"""A CNN or Dict encoder in front of the recurrent core (``network: {type: lstm, encoder: {type: cnn}}``)
on torch: PPO, A2C and IMPALA keep uint8 frames in their rollouts, the sequences they train on give
the numbers acting gave, and a CNN-LSTM learns the pixel memory task where a CNN alone cannot."""

from __future__ import annotations

import numpy as np
import pytest

import rlgraph_core as rl
from rlgraph_core.agents.recurrent_impala import RecurrentImpalaAgent
from rlgraph_core.agents.recurrent_on_policy import sequences
from rlgraph_core.envs import make_vector_env
from rlgraph_core.errors import ConfigError
from rlgraph_core.execution.env_runner import EnvRunner
from rlgraph_core.memories.obs import map_obs

IMAGE_ENV = "rlgraph_core.testing.memory_env:RecallCueImage"
#: a CNN small enough for RecallCueImage's 6x6 frames: one 3x3 convolution of stride 3, then 16 features
CNN = {"type": "cnn", "preset": "custom", "conv": [{"filters": 8, "kernel": 3, "stride": 3}], "hidden": [16]}
#: the on-policy settings of each algorithm on RecallCue (as in test_recurrent_{ppo,a2c,impala}.py)
SETTINGS = {
    "ppo": dict(n_steps=16, batch_size=64, n_epochs=4, ent_coef=0.01, optimizer={"learning_rate": 3e-3}),
    "a2c": dict(n_steps=8, optimizer={"type": "rmsprop", "learning_rate": 2e-3}),
    "impala": dict(n_steps=8, optimizer={"type": "rmsprop", "learning_rate": 2e-3}),
}


def make(algorithm: str, network: dict, env: str = IMAGE_ENV, seed: int = 0, num_envs: int = 8):
    return rl.make(
        algorithm,
        env={"id": env, "num_envs": num_envs},
        backend="torch",
        seed=seed,
        network=network,
        eval_interval=10**9,
        **SETTINGS[algorithm],
    )


def lstm(seq_len: int, encoder=CNN, cell: str = "lstm") -> dict:
    return {"type": cell, "units": 16, "encoder": encoder, "seq_len": seq_len}


def collect(algo) -> dict:
    """One rollout of the agent's envs, through the env runner every executor uses."""
    agent = algo.agent
    envs = make_vector_env(algo.config.env, 0, wrappers=[])
    runner = EnvRunner(agent, envs, seed=0)
    while not agent.buffer.full:
        runner.step()
    rollout = agent.rollout()
    envs.close()
    return rollout


@pytest.mark.parametrize("algorithm", ["ppo", "a2c", "impala"])
def test_rollouts_keep_uint8_frames_and_sequences_give_what_acting_gave(algorithm):
    """Frames stay uint8 in the rollout (and in IMPALA's learner batch); unrolling each stored
    sequence of 4 steps from its stored state gives the log-probabilities and values acting gave."""
    seq_len = 4
    algo = make(algorithm, lstm(seq_len), num_envs=4)
    agent = algo.agent
    rollout = collect(algo)
    assert rollout["obs"].dtype == np.uint8 and rollout["obs"].shape[1:] == (4, 6, 6, 1)
    if isinstance(agent, RecurrentImpalaAgent):
        assert agent.sequence_batch(rollout)[0].dtype == np.uint8
    to_t, to_np = agent.backend.to_tensor, agent.backend.to_numpy
    obs, starts, actions = (sequences(rollout[k], seq_len) for k in ("obs", "episode_starts", "actions"))
    states = {k: to_t(v.reshape(-1, v.shape[-1])) for k, v in rollout["sequence_states"].items()}
    log_probs, _, values = agent.graph.evaluate_actions(to_t(obs), states, to_t(starts), to_t(actions))
    for got, field in ((log_probs, "log_probs"), (values, "values")):
        np.testing.assert_allclose(
            to_np(got).reshape(seq_len, -1), sequences(rollout[field], seq_len), rtol=1e-5, atol=1e-6
        )
    assert np.abs(rollout["sequence_states"]["pi_c"][1:]).max() > 1e-3  # memory crosses sequence boundaries


def test_cnn_lstm_ppo_learns_the_pixel_memory_task_where_a_cnn_cannot():
    """RecallCueImage pays 1 for naming at the last step the cue shown in the first frame; the question
    frame looks the same whichever cue was shown, so a CNN without memory can only guess (0.5).
    1,024 env steps each, seed 0 (the LSTM evaluated at 1.0 from 512 steps on seeds 0-2)."""
    remembered = make("ppo", lstm(4))
    remembered.learn(1024)
    cnn = make("ppo", CNN)
    cnn.learn(1024)
    score, guess = remembered.evaluate(50)["eval_return_mean"], cnn.evaluate(50)["eval_return_mean"]
    assert score >= 0.9, f"CNN-LSTM PPO reached {score} on RecallCueImage after 1,024 env steps"
    assert guess <= 0.7, f"a CNN without memory reached {guess}: the task no longer needs memory"


def test_dict_observations_through_a_dict_encoder_before_a_gru():
    """A Dict observation (uint8 image + float vector) through ``dict_encoder`` then a GRU: the rollout
    keeps each key in its dtype, the policy learns the (memoryless) task above chance, and predict
    carries the state."""
    network = lstm(4, {"type": "dict_encoder", "image": CNN, "vector": {"hidden": [8]}}, "gru")
    rollout = collect(make("ppo", network, "dict_env:ImageVectorEnv"))
    assert rollout["obs"]["image"].dtype == np.uint8 and rollout["obs"]["vector"].dtype == np.float32
    algo = make("ppo", network, "dict_env:ImageVectorEnv")
    algo.learn(1024)
    assert algo.evaluate(10)["eval_return_mean"] >= 15  # of 20 steps; chance is 10 (20.0 here, seeds 0 and 1)
    action, state = algo.predict(map_obs(lambda v: v[0, 0], rollout["obs"]))
    assert set(state) == {"pi_h", "vf_h"} and int(action) in (0, 1)


def test_r2d2_refuses_images_naming_what_works():
    with pytest.raises(ConfigError, match=r"R2D2-style.*use PPO, A2C or IMPALA with network: \{type: lstm, encoder"):
        rl.make(
            "dqn",
            env={"id": IMAGE_ENV, "num_envs": 2},
            backend="torch",
            network=lstm(4),
            burn_in=1,
            eval_interval=10**9,
        )
