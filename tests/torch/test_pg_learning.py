"""PPO and A2C agents on the torch backend: rollout bookkeeping, and learning CartPole-v1.

The learning tests train from the shipped configs with fixed seeds under the unchanged local
executor and assert the mean evaluation return reaches 475 within a bounded number of env steps.
Torch runs single-threaded here: these networks are tiny, and on a small, busy machine torch's
intra-op threads mostly wait for each other (a 10-20x slowdown was measured on 2 loaded cores).
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rlgraph_core.agents.a2c import A2CAgent, A2CConfig  # noqa: E402
from rlgraph_core.agents.ppo import PPOAgent, PPOConfig  # noqa: E402
from rlgraph_core.config.run import apply_overrides, load_config_file, validate_config  # noqa: E402
from rlgraph_core.assemble import make_agent  # noqa: E402
from rlgraph_core.assemble import train  # noqa: E402
from rlgraph_core.spaces import Discrete, FloatBox  # noqa: E402
from rlgraph_torch.backend import TorchBackend  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
QUIET = ["train.progress_bar=false", "train.loggers=[jsonl]"]


def cartpole_spaces():
    """CartPole-v1's observation and action spaces."""
    return FloatBox(-np.inf, np.inf, shape=(4,)), Discrete(2)


def np_value(agent, obs: np.ndarray) -> np.ndarray:
    """V(obs) through the agent's graph, as numpy."""
    return agent.backend.to_numpy(agent.graph.value(agent.backend.to_tensor(np.asarray(obs, np.float32)))).copy()


# --------------------------------------------------------------------------- rollout bookkeeping
def test_rollout_bootstraps_truncation_not_termination():
    """next_values: V(s_{t+1}) where the episode goes on, V(true final obs) at truncation and at the
    rollout's end (GAE ignores it after termination); update() learns once n_steps are stored."""
    obs_space, act_space = cartpole_spaces()
    cfg = PPOConfig(n_steps=4, batch_size=12, n_epochs=1)
    agent = PPOAgent(cfg, obs_space, act_space, TorchBackend("eager", "cpu", seed=0), seed=0, num_envs=3)
    rng = np.random.default_rng(0)
    terminated = np.zeros((4, 3), bool)
    truncated = np.zeros((4, 3), bool)
    terminated[1, 0] = truncated[2, 1] = truncated[3, 2] = terminated[3, 0] = True
    obs = rng.standard_normal((4 + 1, 3, 4)).astype(np.float32)  # obs[t]: what act sees at step t
    finals = rng.standard_normal((4, 3, 4)).astype(np.float32)  # true final obs where an episode ended
    expected = np.zeros((4, 3), np.float32)
    for t in range(4):
        actions = agent.act(obs[t])
        assert actions.dtype == np.int64 and set(actions.tolist()) <= {0, 1}
        done = terminated[t] | truncated[t]
        next_obs_true = np.where(done[:, None], finals[t], obs[t + 1])
        agent.observe(obs[t], actions, np.ones(3, np.float32), next_obs_true, terminated[t], truncated[t])
        expected[t] = np_value(agent, next_obs_true)
    assert agent.buffer.full and agent.timesteps == 12
    rollout = agent.rollout()
    assert rollout["obs"].shape == (4, 3, 4) and rollout["next_values"].shape == (4, 3)
    relevant = ~terminated
    np.testing.assert_allclose(rollout["next_values"][relevant], expected[relevant], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rollout["values"], np.stack([np_value(agent, o) for o in obs[:4]]), rtol=1e-5, atol=1e-6)
    # The cached log-probabilities are those of the stored actions.
    lp, _, _ = agent.graph.evaluate_actions(
        torch.as_tensor(rollout["obs"].reshape(-1, 4)), torch.as_tensor(rollout["actions"].reshape(-1))
    )
    np.testing.assert_allclose(lp.detach().numpy(), rollout["log_probs"].reshape(-1), rtol=1e-5, atol=1e-6)
    metrics = agent.update()
    assert metrics is not None and len(agent.buffer) == 0 and agent.updates == 1
    assert all(np.isfinite(v) for v in metrics.values())
    assert agent.update() is None  # nothing new collected


def test_continuous_actions_are_scaled_and_clipped_but_stored_raw():
    obs_space = FloatBox(-8.0, 8.0, shape=(3,))
    act_space = FloatBox(-2.0, 2.0, shape=(1,))
    cfg = PPOConfig(n_steps=8, batch_size=8, log_std_init=1.0)  # std e^1: many samples leave [-1, 1]
    agent = PPOAgent(cfg, obs_space, act_space, TorchBackend("eager", "cpu", seed=0), seed=1, num_envs=2)
    rng = np.random.default_rng(0)
    for _ in range(8):
        obs = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
        actions = agent.act(obs)
        assert actions.dtype == np.float32 and actions.shape == (2, 1)
        assert np.all(actions >= -2.0) and np.all(actions <= 2.0)
        agent.observe(obs, actions, np.zeros(2, np.float32), obs, np.zeros(2, bool), np.zeros(2, bool))
    raw = agent.buffer.data()["actions"]
    assert np.abs(raw).max() > 1.0  # unclipped samples kept
    np.testing.assert_allclose(np.clip(2.0 * raw[-1], -2, 2), actions, rtol=1e-6)
    # Actions not produced by the last act() (e.g. given by a human) get their own log-probs.
    obs = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
    agent.buffer.reset()
    agent.act(obs)
    given = np.array([[1.0], [-0.5]], np.float32)
    agent.observe(obs, given, np.zeros(2, np.float32), obs, np.zeros(2, bool), np.zeros(2, bool))
    stored = agent.buffer.data()
    np.testing.assert_allclose(stored["actions"][0], given / 2.0)
    lp, _, _ = agent.graph.evaluate_actions(torch.as_tensor(obs), torch.as_tensor(given / 2.0))
    np.testing.assert_allclose(stored["log_probs"][0], lp.detach().numpy(), rtol=1e-5)
    greedy = agent.act(obs, explore=False)
    assert np.all(np.abs(greedy) <= 2.0)


def test_a2c_one_step_per_rollout_on_continuous_actions():
    obs_space, act_space = FloatBox(-8.0, 8.0, shape=(3,)), FloatBox(-2.0, 2.0, shape=(1,))
    agent = A2CAgent(
        A2CConfig(n_steps=5, ent_coef=0.01),
        obs_space,
        act_space,
        TorchBackend("eager", "cpu", seed=0),
        seed=0,
        num_envs=4,
    )
    before = agent.get_weights()
    rng = np.random.default_rng(0)
    results = []
    for _ in range(10):
        obs = rng.uniform(-1, 1, (4, 3)).astype(np.float32)
        agent.observe(
            obs,
            agent.act(obs),
            rng.standard_normal(4).astype(np.float32),
            obs,
            rng.random(4) < 0.2,
            rng.random(4) < 0.1,
        )
        results.append(agent.update())
    assert [r is not None for r in results] == [False] * 4 + [True] + [False] * 4 + [True]
    assert agent.updates == 2 and set(results[4]) == {"loss", "pg_loss", "vf_loss", "entropy"}
    after = agent.get_weights()
    assert any(not np.array_equal(before[k], after[k]) for k in before)


def test_target_kl_stops_epochs_early():
    obs_space, act_space = cartpole_spaces()
    rng = np.random.default_rng(0)
    steps = {}
    for target_kl in (None, 1e-6):
        cfg = PPOConfig(n_steps=16, batch_size=16, n_epochs=10, target_kl=target_kl, optimizer={"learning_rate": 0.01})
        agent = PPOAgent(cfg, obs_space, act_space, TorchBackend("eager", "cpu", seed=0), seed=0, num_envs=2)
        for _ in range(16):
            obs = rng.standard_normal((2, 4)).astype(np.float32)
            agent.observe(
                obs,
                agent.act(obs),
                rng.standard_normal(2).astype(np.float32),
                obs,
                np.zeros(2, bool),
                np.zeros(2, bool),
            )
        metrics = agent.update()
        steps[target_kl] = (metrics["gradient_steps"], metrics["early_stop"])
    assert steps[None] == (20, False)
    assert steps[1e-6][1] and steps[1e-6][0] < 20


def test_ppo_pendulum_config_runs(tmp_path):
    """The Pendulum config (Gaussian policy, running observation normalisation) trains and checkpoints."""
    raw = apply_overrides(
        load_config_file(CONFIGS / "ppo_pendulum.yaml"),
        QUIET
        + ["train.total_timesteps=2048", "agent.n_steps=256", "train.eval_interval=1024", "train.eval_episodes=1"],
    )
    config = validate_config(raw)
    summary = train(config, tmp_path)
    assert summary["timesteps"] == 2048 and summary["updates"] > 0
    assert np.isfinite(summary["eval_return_mean"])
    env = gym.make("Pendulum-v1")
    agent = make_agent(config, env.observation_space, env.action_space)
    agent.load(tmp_path / "checkpoint")
    w = agent.get_weights()
    # every env step's observation went into the running statistics once (the prior weighs 1e-4) ...
    assert w["policy/preprocessor/count"] == pytest.approx(2048, abs=1e-3)
    # ... which describe Pendulum's observations (cos, sin, angular velocity), not the prior (0, 1)
    low, high = env.observation_space.low, env.observation_space.high
    mean, var = w["policy/preprocessor/mean"], w["policy/preprocessor/var"]
    assert np.all(mean >= low) and np.all(mean <= high)
    assert np.all(var <= ((high - low) / 2) ** 2 + 1e-3) and not np.any(np.isclose(var, 1.0, atol=1e-3))


@pytest.mark.slow
def test_static_mode_matches_eager():
    """The same seed trains to the same weights eagerly and with torch.compile."""
    obs_space, act_space = cartpole_spaces()
    weights = {}
    for mode in ("eager", "static"):
        cfg = PPOConfig(n_steps=8, batch_size=16, n_epochs=2, optimizer={"learning_rate": 1e-3})
        agent = PPOAgent(cfg, obs_space, act_space, TorchBackend(mode, "cpu", seed=0), seed=0, num_envs=4)
        rng = np.random.default_rng(0)
        for _ in range(16):
            obs = rng.standard_normal((4, 4)).astype(np.float32)
            agent.observe(obs, agent.act(obs), np.ones(4, np.float32), obs, rng.random(4) < 0.1, np.zeros(4, bool))
            agent.update()
        assert agent.updates == 2 * 2 * 2
        weights[mode] = agent.get_weights()
    for k in weights["eager"]:
        np.testing.assert_allclose(weights["static"][k], weights["eager"][k], rtol=1e-4, atol=1e-5, err_msg=k)


# --------------------------------------------------------------------------- learning
def _train(tmp_path, config_name: str, overrides: list[str]):
    config = validate_config(apply_overrides(load_config_file(CONFIGS / config_name), QUIET + overrides))
    return config, train(config, tmp_path)


@pytest.mark.learning
def test_ppo_reaches_475_on_cartpole(tmp_path):
    config, summary = _train(
        tmp_path, "ppo_cartpole.yaml", ["train.seed=0", "train.total_timesteps=40000", "train.eval_interval=2048"]
    )
    assert summary["target_reached"], summary
    assert summary["eval_return_mean"] >= 475.0 and summary["timesteps"] <= 40000

    # The checkpoint reproduces the evaluation in a fresh agent.
    env = gym.make("CartPole-v1")
    agent = make_agent(config, env.observation_space, env.action_space)
    agent.load(tmp_path / "checkpoint")
    result = agent.evaluate(env, episodes=10, seed=10_000 + config.train.seed)
    assert result["eval_return_mean"] == pytest.approx(summary["eval_return_mean"])


@pytest.mark.learning
def test_a2c_reaches_475_on_cartpole(tmp_path):
    _, summary = _train(
        tmp_path, "a2c_cartpole.yaml", ["train.seed=1", "train.total_timesteps=100000", "train.eval_interval=5000"]
    )
    assert summary["target_reached"], summary
    assert summary["eval_return_mean"] >= 475.0 and summary["timesteps"] <= 100000
