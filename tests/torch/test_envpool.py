"""env.vectorization: envpool (needs the envpool extra): Pong frames as the gymnasium path gives
them (uint8 84x84x4, channels last), same-step autoreset, MuJoCo as float32, a DQN run on Pong."""

from __future__ import annotations

import numpy as np
import pytest

envpool = pytest.importorskip("envpool")
pytest.importorskip("rlgraph_torch")

from rlgraph_core.assemble import assemble, train  # noqa: E402
from rlgraph_core.config.run import validate_config  # noqa: E402
from rlgraph_core.envs import make_vector_env  # noqa: E402
from rlgraph_core.plugins import get_plugin_manager  # noqa: E402

PONG = {
    "id": "ALE/Pong-v5",
    "num_envs": 2,
    "vectorization": "envpool",
    "kwargs": {"frameskip": 1, "repeat_action_probability": 0.0},
    "wrappers": [{"type": "atari_preprocessing"}, {"type": "clip_reward"}, {"type": "frame_stack", "stack_size": 4}],
}


def _env_config(env: dict):
    return validate_config({"agent": {"type": "dqn"}, "env": env}, get_plugin_manager()).env


def test_pong_frames_are_uint8_channels_last():
    envs = make_vector_env(_env_config(PONG), seed=0)
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (2, 84, 84, 4) and obs.dtype == np.uint8
    assert envs.single_observation_space.shape == (84, 84, 4) and envs.single_action_space.n == 6
    obs, rewards, terminated, truncated, _ = envs.step(np.zeros(2, np.int64))
    assert obs.shape == (2, 84, 84, 4) and rewards.dtype == np.float32 and terminated.dtype == bool
    envs.close()


def test_same_step_autoreset_gives_the_final_observation():
    """CartPole ends within a few dozen steps of one action: the reset observation comes at once."""
    envs = make_vector_env(_env_config({"id": "CartPole-v1", "num_envs": 3, "vectorization": "envpool"}), seed=1)
    obs, _ = envs.reset(seed=1)
    for _ in range(100):
        obs, _, terminated, truncated, info = envs.step(np.ones(3, np.int64))
        if terminated.any():
            break
    done = np.flatnonzero(terminated | truncated)
    assert len(done) and info["_final_obs"][done].all()
    assert np.all(np.abs(obs[done, 2]) < 0.06) and np.all(np.abs(info["final_obs"][done, 2]) > 0.2)  # pole angle
    envs.close()


def test_halfcheetah_observations_are_float32():
    envs = make_vector_env(_env_config({"id": "HalfCheetah-v5", "num_envs": 2, "vectorization": "envpool"}), seed=0)
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (2, 17) and obs.dtype == np.float32 and envs.single_action_space.shape == (6,)
    obs, *_ = envs.step(np.zeros((2, 6), np.float32))
    assert obs.dtype == np.float32
    envs.close()


def test_dqn_trains_on_pong_through_envpool(tmp_path):
    cnn = {"type": "cnn", "preset": "custom", "conv": [{"filters": 8, "kernel": 8, "stride": 4}], "hidden": [32]}
    raw = {
        "agent": {
            "type": "dqn",
            "network": cnn,
            "batch_size": 16,
            "learning_starts": 64,
            "train_freq": 16,
            "memory": {"type": "replay", "capacity": 1000},
        },
        "env": PONG,
        "train": {
            "total_timesteps": 256,
            "eval_interval": 256,
            # no evaluation: a greedy game of Pong is ~800 agent steps of 21 points (20 s of CI's
            # time); this test is about training through envpool and the frames in the checkpoint
            "eval_episodes": 0,
            "log_interval": 256,
            "progress_bar": False,
            "loggers": ["jsonl"],
        },
    }
    pm = get_plugin_manager()
    config = validate_config(raw, pm)
    summary = train(config, tmp_path / "run", plugin_manager=pm)
    assert summary["timesteps"] >= 256 and summary["updates"] > 0, summary
    agent = assemble(config, pm).make_agent(*_spaces(), num_envs=2)
    agent.load(str(tmp_path / "run" / "checkpoint"))
    state = agent.memory.state_dict()
    assert state["frames/obs"].dtype == np.uint8 and "data/obs" not in state


def _spaces():
    envs = make_vector_env(_env_config(PONG), seed=0)
    try:
        return envs.single_observation_space, envs.single_action_space
    finally:
        envs.close()
