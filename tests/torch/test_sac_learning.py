"""Learning test: SAC (torch, eager) reaches a mean eval return of -200 on Pendulum-v1.

The shipped ``configs/sac_pendulum.yaml`` (RL-Zoo settings: lr 1e-3, batch 256, tau 0.005, learned
temperature, one gradient step per env step) with smaller [64, 64] trunks so the test fits a
couple of CPU minutes; with seed 0 it reaches the threshold at about 4k env steps (5 greedy
evaluation episodes every 1000 steps; the bound leaves room for slower seeds/platforms).
"""

from pathlib import Path

import gymnasium as gym
import pytest

pytest.importorskip("rlgraph_torch")

from rlgraph_core.config.run import apply_overrides, load_config_file, validate_config  # noqa: E402
from rlgraph_core.assemble import make_agent  # noqa: E402
from rlgraph_core.assemble import train  # noqa: E402

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "sac_pendulum.yaml"
MAX_STEPS = 10_000


@pytest.fixture
def one_torch_thread():
    """Run torch on one intra-op thread: [64, 64] nets gain nothing from more, and on a busy
    machine torch's spinning worker threads can slow each small op down many times over."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.learning
def test_sac_reaches_minus_200_on_pendulum(tmp_path, one_torch_thread):
    config = validate_config(
        apply_overrides(
            load_config_file(CONFIG),
            [
                "agent.actor_network.hidden=[64,64]",
                "agent.critic_network.hidden=[64,64]",
                f"train.total_timesteps={MAX_STEPS}",
                "train.target_return=-200",
                "train.eval_interval=1000",
                "train.eval_episodes=5",
                "train.seed=0",
                "train.backend=torch",
                "train.mode=eager",
                "train.device=cpu",
                "train.progress_bar=false",
                "train.loggers=[jsonl]",
            ],
        )
    )
    summary = train(config, tmp_path)
    assert summary["target_reached"], summary
    assert summary["eval_return_mean"] >= -200.0
    assert summary["timesteps"] <= MAX_STEPS

    # The final checkpoint reproduces the greedy return in a fresh agent.
    env = gym.make("Pendulum-v1")
    agent = make_agent(config, env.observation_space, env.action_space)
    agent.load(tmp_path / "checkpoint")
    result = agent.evaluate(env, episodes=5, seed=10_000 + config.train.seed)
    assert result["eval_return_mean"] == pytest.approx(summary["eval_return_mean"], rel=1e-4)
    assert (tmp_path / "learning_curve.png").is_file()
