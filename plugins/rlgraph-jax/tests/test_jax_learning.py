"""DQN and PPO learn CartPole-v1 on the jax backend in static mode (jit train step, lax.scan rounds).

The same configs, budgets and thresholds as the torch and tf learning tests; only the backend
differs. The DQN checkpoint is then evaluated on every other installed backend: the neutral npz
gives the same return there.
"""

from pathlib import Path

import gymnasium as gym
import pytest

pytest.importorskip("jax")

from rlgraph_core.assemble import make_agent, train  # noqa: E402
from rlgraph_core.config.run import DEFAULT_CONFIG, apply_overrides, load_config_file, validate_config  # noqa: E402
from rlgraph_core.testing import available_backends  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
QUIET = ["train.progress_bar=false", "train.loggers=[jsonl]", "train.backend=jax", "train.mode=static"]


@pytest.mark.learning
def test_dqn_cartpole_jax_static(tmp_path):
    """The default DQN config reaches 475; its checkpoint evaluates the same on other backends."""
    cfg = validate_config(
        apply_overrides(
            DEFAULT_CONFIG, QUIET + ["train.total_timesteps=60000", "train.target_return=475", "train.seed=0"]
        )
    )
    summary = train(cfg, tmp_path / "run")
    print(
        f"\njax static DQN: {summary['timesteps']} steps, {summary['wall_time']:.0f} s, eval {summary['eval_return_mean']}"
    )
    assert summary["target_reached"], summary
    assert summary["eval_return_mean"] >= 475
    env = gym.make("CartPole-v1")
    for name in [n for n in available_backends() if n not in ("numpy", "jax")][:2]:
        other = validate_config(
            apply_overrides(cfg.model_dump(mode="json"), [f"train.backend={name}", "train.mode=eager"])
        )
        agent = make_agent(other, env.observation_space, env.action_space)
        agent.load(tmp_path / "run" / "checkpoint")
        result = agent.evaluate(env, episodes=10, seed=10_000 + cfg.train.seed)
        assert result["eval_return_mean"] == pytest.approx(summary["eval_return_mean"]), name


@pytest.mark.learning
def test_ppo_cartpole_jax_static(tmp_path):
    """The shipped PPO config reaches 475 within the torch test's 40k env steps."""
    cfg = validate_config(
        apply_overrides(
            load_config_file(CONFIGS / "ppo_cartpole.yaml"),
            QUIET + ["train.seed=0", "train.total_timesteps=40000", "train.eval_interval=2048"],
        )
    )
    summary = train(cfg, tmp_path / "run")
    print(
        f"\njax static PPO: {summary['timesteps']} steps, {summary['wall_time']:.0f} s, eval {summary['eval_return_mean']}"
    )
    assert summary["target_reached"], summary
    assert summary["eval_return_mean"] >= 475


@pytest.mark.learning
def test_sac_pendulum_jax_static(tmp_path):
    """SAC with the torch test's settings ([64, 64] trunks, 10k-step bound) reaches -200."""
    cfg = validate_config(
        apply_overrides(
            load_config_file(CONFIGS / "sac_pendulum.yaml"),
            QUIET
            + [
                "agent.actor_network.hidden=[64,64]",
                "agent.critic_network.hidden=[64,64]",
                "train.total_timesteps=10000",
                "train.target_return=-200",
                "train.eval_interval=1000",
                "train.eval_episodes=5",
                "train.seed=0",
            ],
        )
    )
    summary = train(cfg, tmp_path / "run")
    print(
        f"\njax static SAC: {summary['timesteps']} steps, {summary['wall_time']:.0f} s, eval {summary['eval_return_mean']}"
    )
    assert summary["target_reached"], summary
    assert summary["eval_return_mean"] >= -200.0


@pytest.mark.learning
def test_impala_cartpole_jax_static(tmp_path):
    """IMPALA (V-trace) under the local executor reaches 475 within the torch test's 40k steps."""
    cfg = validate_config(
        apply_overrides(
            load_config_file(CONFIGS / "impala_cartpole.yaml"),
            QUIET + ["train.seed=0", "train.total_timesteps=40000", "train.eval_interval=2048"],
        )
    )
    summary = train(cfg, tmp_path / "run")
    print(
        f"\njax static IMPALA: {summary['timesteps']} steps, {summary['wall_time']:.0f} s, eval {summary['eval_return_mean']}"
    )
    assert summary["target_reached"], summary
    assert summary["eval_return_mean"] >= 475.0
