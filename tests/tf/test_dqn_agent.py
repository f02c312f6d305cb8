"""The backend-neutral DQN agent on the tf backend, eager and static."""

import numpy as np
import pytest

from rlgraph_core.agents.dqn import DQNAgent, DQNConfig
from rlgraph_core.spaces import Discrete, FloatBox
from rlgraph_tf import TFBackend

OBS = FloatBox(shape=(4,))
ACTIONS = Discrete(2)


def make_batch(n=32, seed=1):
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.standard_normal((n, 4)).astype(np.float32),
        "actions": rng.integers(0, 2, n),
        "rewards": rng.random(n).astype(np.float32),
        "next_obs": rng.standard_normal((n, 4)).astype(np.float32),
        "terminals": rng.random(n) < 0.1,
        "discounts": np.full(n, 0.99, np.float32),
        "weights": np.ones(n, np.float32),
    }


@pytest.fixture(scope="module", params=["eager", "static"])
def agent(request):
    """One small DQN agent per mode (module scope: static mode compiles once)."""
    cfg = DQNConfig(
        network={"hidden": [32, 32]}, batch_size=32, dueling=True, preprocessor="box_normalize", exploration=0.5
    )
    obs_space = FloatBox(low=-np.ones(4, np.float32) * 5, high=np.ones(4, np.float32) * 5)
    return DQNAgent(cfg, obs_space, ACTIONS, TFBackend(mode=request.param, device="cpu"), seed=0)


def test_builds_with_expected_graph(agent):
    report = agent.build_report
    assert report.backend.startswith(f"tf ({agent.backend.mode}")
    text = report.render()
    for part in ("policy", "target", "dqn_loss", "epsilon_greedy", "advantage", "preprocessor"):
        assert part in text
    weights = agent.get_weights()
    assert weights["policy/trunk/dense_0/W"].shape == (4, 32)
    for key in weights:  # the target starts as a copy of the policy
        if key.startswith("policy/"):
            np.testing.assert_array_equal(weights[key], weights["target/" + key[len("policy/") :]])


def test_acts(agent):
    obs = np.random.default_rng(0).standard_normal((64, 4)).astype(np.float32)
    greedy = agent.act(obs, explore=False)
    assert greedy.shape == (64,) and greedy.dtype == np.int64 and set(greedy) <= {0, 1}
    np.testing.assert_array_equal(greedy, agent.act(obs, explore=False))
    q = agent.backend.to_numpy(agent.graph.q_values(agent.backend.to_tensor(obs)))
    np.testing.assert_array_equal(greedy, q.argmax(-1))
    explored = agent.act(obs)  # epsilon 0.5: some actions differ from greedy, all valid
    assert set(explored) <= {0, 1} and 0 < np.mean(explored != greedy) < 0.6
    assert agent.act(obs[:1], explore=False).shape == (1,)


def test_updates_reduce_loss_and_sync_target(agent):
    batch = make_batch()
    before = agent.loss_on(batch)
    for _ in range(30):
        metrics = agent.update(batch)
    assert agent.loss_on(batch) < before
    assert np.isfinite(float(agent.backend.to_numpy(metrics["loss"])))
    agent.graph.sync_target()
    weights = agent.get_weights()
    np.testing.assert_array_equal(weights["policy/head/value/W"], weights["target/head/value/W"])


def test_save_load_roundtrip(agent, tmp_path):
    obs = np.random.default_rng(5).standard_normal((16, 4)).astype(np.float32)
    agent.update(make_batch())
    agent.save(tmp_path / "ckpt")
    expected_actions = agent.act(obs, explore=False)
    expected_state = agent.train_step.get_state()
    clone = DQNAgent(
        agent.config, agent.observation_space, ACTIONS, TFBackend(mode=agent.backend.mode, device="cpu"), seed=123
    )
    clone.load(tmp_path / "ckpt")
    np.testing.assert_array_equal(clone.act(obs, explore=False), expected_actions)
    for key, value in expected_state.items():
        np.testing.assert_array_equal(clone.train_step.get_state()[key], value)


def test_executor_smoke(tmp_path):
    """A few hundred steps through the local executor (eager: no compile cost)."""
    from rlgraph_core.config.run import DEFAULT_CONFIG, apply_overrides, validate_config
    from rlgraph_core.assemble import train

    cfg = validate_config(
        apply_overrides(
            DEFAULT_CONFIG,
            [
                "train.backend=tf",
                "train.mode=eager",
                "train.progress_bar=false",
                "train.total_timesteps=400",
                "train.eval_interval=400",
                "train.eval_episodes=1",
                "train.loggers=[jsonl]",
                "agent.learning_starts=200",
                "agent.train_freq=50",
                "agent.gradient_steps=2",
                "agent.network.hidden=[16]",
            ],
        )
    )
    summary = train(cfg, tmp_path)
    assert summary["timesteps"] == 400 and summary["updates"] == 10  # rounds at 200, 250, ..., 400
    assert (tmp_path / "checkpoint" / "weights.npz").is_file()
