"""The shipped memory-task configs beyond CartPole (docs/recurrent.md): POPGym's RepeatPreviousEasy
(configs/ppo_gru_popgym_repeat_previous.yaml, extra ``popgym``) and MiniGrid-MemoryS7
(configs/ppo_cnn_lstm_minigrid_memory.yaml, extra ``minigrid``). CI checks that each builds a
recurrent agent on the observations its wrappers make (POPGym's float vectors, MiniGrid's uint8
7x7x3 view for the CNN in front of the LSTM), and that the POPGym config's GRU leaves guessing behind
within 8,192 env steps; POPGym's full learning run is heavy (MiniGrid-MemoryS7's takes about 1.6M env
steps: docs/recurrent.md and docs/zoo.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import rlgraph_core as rl
from rlgraph_core.agents.recurrent_ppo import RecurrentPPOAgent

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
MLP = "agent.network={type: mlp, hidden: [64, 64], activation: tanh}"


def _config(tmp_path, name: str, overrides: list[str]):
    from rlgraph_core.assemble import train
    from rlgraph_core.config.run import apply_overrides, load_config_file, validate_config

    quiet = ["train.progress_bar=false", "train.loggers=[jsonl]"]
    config = validate_config(apply_overrides(load_config_file(CONFIGS / f"{name}.yaml"), quiet + overrides))
    return config, (lambda: train(config, tmp_path))


@pytest.mark.parametrize(
    "name, module, dtype, obs_shape",
    [
        ("ppo_gru_popgym_repeat_previous", "popgym", np.float32, (4,)),
        ("ppo_cnn_lstm_minigrid_memory", "minigrid", np.uint8, (7, 7, 3)),
    ],
)
def test_memory_configs_build_a_recurrent_agent_on_their_observations(tmp_path, name, module, dtype, obs_shape):
    pytest.importorskip(module)
    config, _ = _config(tmp_path, name, ["env.num_envs=4"])
    algo = rl.make(config.to_dict(), eval_interval=10**9)
    assert isinstance(algo.agent, RecurrentPPOAgent)
    assert algo.observation_space.dtype == dtype and algo.observation_space.shape == obs_shape


def test_gru_leaves_guessing_behind_on_repeat_previous_within_8k_env_steps(tmp_path):
    """The CI variant of the heavy test below: the config's GRU, 8,192 env steps, 5 greedy episodes
    every 2,048. Guessing scores -0.5 on average (an MLP's best over 100k was -0.454); measured here
    0.217 (seed 0) and 0.175 (seed 1) at 8,192, 3.8 CPU-s (15-17 s wall at load ~19)."""
    pytest.importorskip("popgym")
    overrides = ["train.total_timesteps=8192", "train.eval_interval=2048", "train.eval_episodes=5"]
    summary = _config(tmp_path, "ppo_gru_popgym_repeat_previous", [*overrides, "train.target_return=null"])[1]()
    assert summary["timesteps"] == 8192 and summary["best_eval_return"] >= 0.0, summary


@pytest.mark.heavy
def test_gru_repeats_the_previous_suit_where_an_mlp_can_only_guess(tmp_path):
    """configs/ppo_gru_popgym_repeat_previous.yaml reaches its target (0.95) within 100k env steps
    (measured with rlgraph train: seeds 0 and 1 both 0.975 at 24,576, 10.3 CPU-s each); the same
    settings with a 64-64 tanh MLP stay at guessing (-0.5 expected; measured best -0.454 in 100k)."""
    pytest.importorskip("popgym")
    summary = _config(tmp_path / "gru", "ppo_gru_popgym_repeat_previous", [])[1]()
    assert summary["target_reached"] and summary["best_eval_return"] >= 0.95, summary
    assert _config(tmp_path / "mlp", "ppo_gru_popgym_repeat_previous", [MLP])[1]()["best_eval_return"] < 0.0
