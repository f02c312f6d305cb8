"""Schedules never recompile: a static agent compiles once per distinct input shape.

PPO runs with a linear learning-rate schedule and a linear clip-range schedule and DQN with a
linear learning-rate schedule (and its epsilon schedule), so every update round sees new
scheduled values. Over 100 gradient steps the agent's compiled update program (its fused round,
or its train step when rounds are not fused) must have been traced exactly once; a second input
shape adds exactly one more. The schedules are checked to have really moved.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlgraph_core.agents.dqn import DQNAgent, DQNConfig
from rlgraph_core.agents.ppo import PPOAgent, PPOConfig
from rlgraph_core.spaces import Discrete, FloatBox
from rlgraph_core.testing import backend_pairs, make_test_backend

STATIC = [p for p in backend_pairs() if p[1] == "static" and p[0] != "numpy"]
OBS = FloatBox(-1.0, 1.0, shape=(4,))
T = 4  # env steps per env in a PPO rollout


def _ids(pair) -> str:
    return f"{pair[0]}-{pair[1]}"


def _rollout(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    return {
        "obs": rng.uniform(-1, 1, (T, n, 4)).astype(np.float32),
        "actions": rng.integers(0, 2, (T, n)),
        "log_probs": np.full((T, n), np.log(0.5), np.float32),
        "values": rng.standard_normal((T, n)).astype(np.float32),
        "rewards": rng.standard_normal((T, n)).astype(np.float32),
        "terminated": rng.random((T, n)) < 0.1,
        "truncated": np.zeros((T, n), bool),
        "next_values": rng.standard_normal((T, n)).astype(np.float32),
    }


def _ppo(pair, fuse: bool, batch_size: int) -> PPOAgent:
    cfg = PPOConfig(
        network={"hidden": [16]},
        n_steps=T,
        batch_size=batch_size,
        n_epochs=2,
        fuse_rounds=fuse,
        clip_range={"type": "linear", "start": 0.3, "end": 0.1, "steps": 1000},
        optimizer={"learning_rate": {"type": "linear", "start": 3e-3, "end": 1e-4, "steps": 1000}},
    )
    return PPOAgent(cfg, OBS, Discrete(2), make_test_backend(*pair, device="cpu", seed=0), seed=0, num_envs=4)


def _compiled(agent, fuse: bool):
    """The object holding the agent's compiled update program."""
    return agent._epoch_loop if fuse else agent.train_step  # noqa: SLF001 (the test inspects it)


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "stepwise"])
@pytest.mark.parametrize("pair", STATIC, ids=_ids)
def test_ppo_with_schedules_compiles_once_per_shape(pair, fuse):
    agent = _ppo(pair, fuse, batch_size=8)  # 16 samples: 2 epochs x 2 minibatches = 4 steps a rollout
    rng = np.random.default_rng(0)
    rates, clips = set(), set()
    for _ in range(25):  # 100 gradient steps
        agent.timesteps += 16
        metrics = agent.update(_rollout(rng, 4))
        rates.add(agent.train_step.learning_rate)
        clips.add(metrics["clip_range"])
    assert agent.updates == 100
    assert len(rates) == 25 and len(clips) == 25  # every rollout saw new scheduled values
    assert _compiled(agent, fuse).trace_count == 1
    # 32 samples per rollout: a new shape for the fused round (its constants and K), the same
    # minibatch shape for a single step.
    agent.update(_rollout(rng, 8))
    assert _compiled(agent, fuse).trace_count == (2 if fuse else 1)
    if fuse:
        assert agent.train_step.trace_count == 0  # the step ran only inside the fused round


@pytest.mark.parametrize("pair", STATIC, ids=_ids)
def test_dqn_with_schedules_compiles_once_per_shape(pair):
    cfg = DQNConfig(
        network={"hidden": [16]},
        batch_size=8,
        learning_starts=0,
        train_freq=1,
        gradient_steps=4,
        target_update_interval=6,
        exploration={"type": "linear", "start": 1.0, "end": 0.05, "steps": 100},
        optimizer={"learning_rate": {"type": "linear", "start": 1e-2, "end": 1e-4, "steps": 100}},
    )
    agent = DQNAgent(cfg, OBS, Discrete(2), make_test_backend(*pair, device="cpu", seed=0), seed=0)
    rng = np.random.default_rng(1)
    n = 64
    agent.memory.insert(
        {
            "obs": rng.uniform(-1, 1, (n, 4)).astype(np.float32),
            "actions": rng.integers(0, 2, n).astype(np.int64),
            "rewards": rng.standard_normal(n).astype(np.float32),
            "next_obs": rng.uniform(-1, 1, (n, 4)).astype(np.float32),
            "terminals": rng.random(n) < 0.2,
            "discounts": np.full(n, 0.99, np.float32),
        }
    )
    rates = set()
    for _ in range(25):  # 25 rounds of 4 gradient steps
        agent.timesteps += 1
        agent.act(rng.uniform(-1, 1, (1, 4)).astype(np.float32))  # epsilon follows its schedule too
        assert agent.update() is not None
        rates.add(agent.train_steps()["q"].learning_rate)
    assert agent.updates == 100 and len(rates) == 25
    assert agent._round_loop.trace_count == 1  # noqa: SLF001
