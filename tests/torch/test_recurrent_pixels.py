"""A CNN or Dict encoder in front of the recurrent core (``network: {type: lstm, encoder: {type: cnn}}``)
on torch: PPO, A2C and IMPALA keep uint8 frames in their rollouts, the sequences they train on give
the numbers acting gave, and a CNN-LSTM learns the pixel memory task where a CNN alone cannot."""

from __future__ import annotations

import numpy as np
import pytest

import rlgraph_core as rl
from rlgraph_core.agents.recurrent_dqn import RecurrentDQNAgent
from rlgraph_core.agents.recurrent_impala import RecurrentImpalaAgent
from rlgraph_core.agents.recurrent_on_policy import sequences
from rlgraph_core.errors import ConfigError
from rlgraph_core.memories.obs import map_obs
from rlgraph_core.testing.memory_env import r2d2_recall_settings
from rlgraph_core.testing.rollouts import collect_rollout

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


@pytest.mark.parametrize("algorithm", ["ppo", "a2c", "impala"])
def test_rollouts_keep_uint8_frames_and_sequences_give_what_acting_gave(algorithm):
    """Frames stay uint8 in the rollout (and in IMPALA's learner batch); unrolling each stored
    sequence of 4 steps from its stored state gives the log-probabilities and values acting gave."""
    seq_len = 4
    algo = make(algorithm, lstm(seq_len), num_envs=4)
    agent = algo.agent
    rollout = collect_rollout(algo)
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
    rollout = collect_rollout(make("ppo", network, "dict_env:ImageVectorEnv"))
    assert rollout["obs"]["image"].dtype == np.uint8 and rollout["obs"]["vector"].dtype == np.float32
    algo = make("ppo", network, "dict_env:ImageVectorEnv")
    algo.learn(1024)
    assert algo.evaluate(10)["eval_return_mean"] >= 15  # of 20 steps; chance is 10 (20.0 here, seeds 0 and 1)
    action, state = algo.predict(map_obs(lambda v: v[0, 0], rollout["obs"]))
    assert set(state) == {"pi_h", "vf_h"} and int(action) in (0, 1)


def r2d2(
    network: dict,
    env: str = IMAGE_ENV,
    seed: int = 0,
    steps: int = 1000,
    mode: str = "eager",
    env_kwargs=None,
    **overrides,
):
    """R2D2 (``type: dqn`` with a recurrent network) or DQN with the RecallCue settings of
    tests/torch/test_recurrent_dqn.py, epsilon annealed over half of ``steps``."""
    settings = r2d2_recall_settings()
    del settings["type"]
    settings.update(
        network=network,
        exploration={
            "type": "epsilon_greedy",
            "epsilon": {"type": "linear", "start": 1.0, "end": 0.05, "steps": steps // 2},
        },
        eval_interval=10**9,
    )
    if network["type"] not in ("lstm", "gru"):
        settings["burn_in"] = 0
    settings.update(overrides)
    env_settings = {"id": env, "num_envs": 8, "kwargs": env_kwargs or {}}
    return rl.make("dqn", env=env_settings, backend="torch", mode=mode, seed=seed, **settings)


def test_r2d2_cnn_lstm_learns_the_pixel_memory_task_where_a_cnn_dqn_cannot():
    """R2D2 with the CNN folded over each window's steps before the LSTM: 1.0 after 1,000 env steps
    (100 updates of 16 windows; seeds 0-2 all 1.0), the same CNN in DQN without memory guesses
    (0.56 / 0.46 / 0.52 on seeds 0-2)."""
    remembered = r2d2(lstm(8))
    assert isinstance(remembered.agent, RecurrentDQNAgent)
    remembered.learn(1000)
    cnn = r2d2(CNN)
    cnn.learn(1000)
    score, guess = remembered.evaluate(50)["eval_return_mean"], cnn.evaluate(50)["eval_return_mean"]
    assert score >= 0.9, f"CNN-LSTM R2D2 reached {score} on RecallCueImage after 1,000 env steps"
    assert guess <= 0.7, f"a CNN DQN without memory reached {guess}: the task no longer needs memory"


@pytest.mark.heavy
def test_r2d2_cnn_lstm_learns_the_pixel_memory_task_in_torch_static_mode():
    """The same in static mode (torch.compile): 1.0 after 1,000 env steps (the CNN-LSTM's sequence
    loss against numpy in torch static mode: tests/core/test_recurrent_dqn_loss.py, heavy too). Measured
    seed 0: 1.0; 149 s wall at load ~10, mostly torch.compile."""
    remembered = r2d2(lstm(8), mode="static")
    remembered.learn(1000)
    assert remembered.evaluate(50)["eval_return_mean"] >= 0.9


@pytest.mark.parametrize("channel", [True, False])
def test_r2d2_replays_uint8_windows_that_give_the_q_values_acting_saw(channel, tmp_path):
    """The sequence replay keeps each frame once as uint8 (2-d frames too: stored with a channel axis);
    unrolling a replayed window from its stored state reproduces the greedy actions acting took step by
    step; a checkpoint (weights and the framed replay, arrays only) round-trips and trains on."""
    algo = r2d2(lstm(8, cell="gru"), seed=1, learning_starts=10**9, env_kwargs={"channel": channel})
    assert algo.observation_space.shape == ((6, 6, 1) if channel else (6, 6))
    agent = algo.agent
    algo.learn(200)
    memory = agent.memory
    sample = memory.sample(4)
    assert sample["obs"].dtype == np.uint8 and sample["obs"].shape == (4, 9, 6, 6, 1)
    assert memory.framed_fields == {"obs": "obs"}
    # each distinct frame once: RecallCueImage draws 4 (blank, two cues, the question), the windows hold 216
    every = np.arange(len(memory))
    frames = memory._gather(every)["obs"].reshape(-1, 36)
    assert len(memory.frame_store("obs")) == len(np.unique(frames, axis=0)) == 4 and len(frames) == 24 * 9
    to_t, to_np = agent.backend.to_tensor, agent.backend.to_numpy
    obs = np.ascontiguousarray(np.swapaxes(sample["obs"] if channel else sample["obs"][..., 0], 0, 1))
    reset = np.ascontiguousarray(np.swapaxes(sample["starts"], 0, 1))
    greedy, _ = agent.graph.greedy(to_t(obs), {"h": to_t(sample["state"]["h"])}, to_t(reset))
    state, stepwise = {"h": sample["state"]["h"]}, []
    for t in range(obs.shape[0]):
        actions, state = agent.act(obs[t], explore=False, state=state, episode_start=reset[t])
        stepwise.append(actions)
    np.testing.assert_array_equal(to_np(greedy).reshape(9, 4), np.stack(stepwise))
    loaded = rl.load(algo.save(tmp_path / "ckpt"))
    restored = loaded.agent.memory
    assert len(restored) == len(memory) and len(restored.frame_store("obs")) == len(memory.frame_store("obs"))
    np.testing.assert_array_equal(restored._gather(every)["obs"], memory._gather(every)["obs"])
    loaded.agent.config.learning_starts = 0
    loaded.learn(64)
    assert loaded.agent.updates > 0


def test_r2d2_with_a_dict_encoder_stores_each_key_and_learns():
    """A Dict observation (uint8 image + float vector) through ``dict_encoder`` then a GRU: replay
    stores the image as shared uint8 frames and the vector per key, and the Q-network learns the
    (memoryless) task above chance; predict carries the state."""
    network = lstm(4, {"type": "dict_encoder", "image": CNN, "vector": {"hidden": [8]}}, "gru")
    algo = r2d2(network, "dict_env:ImageVectorEnv", burn_in=1, n_step=1, steps=1000)
    algo.learn(1000)
    memory = algo.agent.memory
    assert memory.framed_fields == {"obs/image": "obs/image"}
    sample = memory.sample(2)
    assert sample["obs"]["image"].dtype == np.uint8 and sample["obs"]["vector"].dtype == np.float32
    assert algo.evaluate(10)["eval_return_mean"] >= 15  # of 20 steps; chance is 10
    obs = {"image": sample["obs"]["image"][0, 0], "vector": sample["obs"]["vector"][0, 0]}
    action, state = algo.predict(obs)
    assert set(state) == {"h"} and int(action) in (0, 1)


def test_r2d2_refuses_images_without_an_image_encoder_naming_it():
    with pytest.raises(ConfigError, match=r"encoder 'mlp'.*encoder.*cnn"):
        r2d2({"type": "lstm", "units": 16, "seq_len": 4}, burn_in=1)
