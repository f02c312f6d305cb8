"""Learning test: DQN (torch, eager) solves CartPole-v1 from the default config with a fixed seed."""

import gymnasium as gym
import pytest

from rlgraph_core.config.run import DEFAULT_CONFIG, apply_overrides, validate_config
from rlgraph_core.assemble import make_agent
from rlgraph_core.assemble import train


@pytest.mark.learning
def test_dqn_default_config_reaches_475_on_cartpole(tmp_path):
    config = validate_config(
        apply_overrides(
            DEFAULT_CONFIG,
            ["train.total_timesteps=60000", "train.progress_bar=false", "train.seed=0", "train.loggers=[jsonl]"],
        )
    )
    summary = train(config, tmp_path)
    assert summary["target_reached"], summary
    assert summary["eval_return_mean"] >= 475.0
    assert summary["timesteps"] <= 60000

    # The checkpoint reproduces the return in a fresh agent.
    env = gym.make("CartPole-v1")
    agent = make_agent(config, env.observation_space, env.action_space)
    agent.load(tmp_path / "checkpoint")
    result = agent.evaluate(env, episodes=10, seed=10_000 + config.train.seed)
    assert result["eval_return_mean"] == pytest.approx(summary["eval_return_mean"])
    assert (tmp_path / "learning_curve.png").is_file()
