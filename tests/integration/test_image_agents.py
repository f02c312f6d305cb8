"""Image observations through the agents, on every backend and mode.

* A Pong-like smoke: a synthetic gymnasium env with Atari's post-processing shapes (uint8
  84x84x4 frames, 6 actions; no ROM needed) through DQN and PPO with the Nature CNN: build, act,
  a few updates, a checkpoint round trip (the loaded agent acts exactly as the saved one).
* IMPALA (with the IMPALA residual network) and A2C take the same frames.
* CNN checkpoints cross backends: written on torch, the tf agent takes the same greedy actions,
  and back (weights are NHWC/HWIO numpy on every backend).

Torch static compiles each function (seconds on CPU): those cases are marked slow.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from parity_pairs import PAIRS, pair_id, slow_if_torch_static

from rlgraph_core.agents.a2c import A2CAgent, A2CConfig
from rlgraph_core.agents.dqn import DQNAgent, DQNConfig
from rlgraph_core.agents.impala import ImpalaAgent, ImpalaConfig
from rlgraph_core.agents.ppo import PPOAgent, PPOConfig
from rlgraph_core.assemble import make_backend
from rlgraph_core.components.cnn import CNNSettings
from rlgraph_core.spaces import Discrete, from_gym

pytestmark = pytest.mark.filterwarnings("error:torch.compile:RuntimeWarning")

FRAME = (84, 84, 4)


class PongLike(gym.Env):
    """Atari-shaped observations (uint8 84x84 frames, a stack of 4) and 6 actions: a moving bright
    square on a dark field, reward +1 when the action's parity matches the square's side."""

    observation_space = gym.spaces.Box(0, 255, FRAME, np.uint8)
    action_space = gym.spaces.Discrete(6)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.pos = 0, int(self.np_random.integers(0, 76))
        return self._frame(), {}

    def _frame(self):
        frame = np.full(FRAME, 20, np.uint8)
        frame[30:38, self.pos : self.pos + 8, :] = 236
        return frame

    def step(self, action):
        reward = float((int(action) % 2) == (self.pos >= 38))
        self.t += 1
        self.pos = (self.pos + 5) % 76
        return self._frame(), reward, False, self.t >= 16, {}


OBS_SPACE = from_gym(PongLike.observation_space)
NATURE = CNNSettings(preset="nature")


def dqn(pair, seed=0):
    cfg = DQNConfig(
        network=NATURE,
        batch_size=8,
        learning_starts=8,
        train_freq=4,
        gradient_steps=1,
        memory={"type": "replay", "capacity": 64},
        exploration=0.5,
    )
    return DQNAgent(cfg, OBS_SPACE, Discrete(6), make_backend(*pair, device="cpu", seed=seed), seed=seed)


def ppo(pair, seed=0):
    cfg = PPOConfig(network=NATURE, n_steps=8, batch_size=8, n_epochs=2)
    return PPOAgent(cfg, OBS_SPACE, Discrete(6), make_backend(*pair, device="cpu", seed=seed), seed=seed, num_envs=2)


def impala(pair, seed=0):
    cfg = ImpalaConfig(network=CNNSettings(preset="impala"), n_steps=4)
    return ImpalaAgent(cfg, OBS_SPACE, Discrete(6), make_backend(*pair, device="cpu", seed=seed), seed=seed, num_envs=2)


def a2c(pair, seed=0):
    cfg = A2CConfig(network=NATURE, n_steps=4)
    return A2CAgent(cfg, OBS_SPACE, Discrete(6), make_backend(*pair, device="cpu", seed=seed), seed=seed, num_envs=2)


def run_steps(agent, envs, steps):
    """Step ``envs`` with ``agent`` (acting, observing, updating when due); the updates' metrics."""
    obs, _ = envs.reset(seed=0)
    metrics = []
    for _ in range(steps):
        actions = agent.act(obs)
        next_obs, rewards, terminated, truncated, info = envs.step(actions)
        final = next_obs.copy()
        if "final_obs" in info:
            for i in np.flatnonzero(info["_final_obs"]):
                final[i] = info["final_obs"][i]
        agent.observe(obs, actions, rewards, final, terminated, truncated)
        out = agent.update()
        if out:
            metrics.append(out)
        obs = next_obs
    return obs, metrics


SMOKE = [
    pytest.param(algo, pair, id=f"{algo}-{pair_id(pair)}", marks=slow_if_torch_static(pair))
    for algo in ("dqn", "ppo")
    for pair in PAIRS
]


@pytest.mark.parametrize("algo,pair", SMOKE)
def test_pong_like_smoke(algo, pair, tmp_path):
    envs = gym.vector.SyncVectorEnv([PongLike, PongLike], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    agent = (dqn if algo == "dqn" else ppo)(pair)
    obs, metrics = run_steps(agent, envs, 16)
    assert agent.act(obs).dtype.kind == "i"
    assert len(metrics) >= 2 and all(np.isfinite(float(m["loss"])) for m in metrics)
    assert agent.get_weights()[next(k for k in agent.get_weights() if k.endswith("conv_0/W"))].shape == (8, 8, 4, 32)
    agent.save(tmp_path / "ckpt")
    again = (dqn if algo == "dqn" else ppo)(pair, seed=5)
    again.load(tmp_path / "ckpt")
    np.testing.assert_array_equal(again.act(obs, explore=False), agent.act(obs, explore=False))
    run_steps(again, envs, 4)  # training goes on from the loaded checkpoint


ROUTES = [(("torch", "eager"), ("tf", "eager")), (("tf", "static"), ("torch", "eager"))]


@pytest.mark.parametrize("src,dst", ROUTES, ids=[f"{pair_id(a)}->{pair_id(b)}" for a, b in ROUTES])
def test_cnn_checkpoint_crosses_backends(src, dst, tmp_path):
    if src not in PAIRS or dst not in PAIRS:
        pytest.skip(f"needs both {pair_id(src)} and {pair_id(dst)} installed")
    envs = gym.vector.SyncVectorEnv([PongLike, PongLike], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    writer = dqn(src, seed=1)
    run_steps(writer, envs, 8)  # trained a little: not the initial weights
    frames = np.random.default_rng(0).integers(0, 256, (16, *FRAME), dtype=np.uint8)
    writer.save(tmp_path / "ckpt")
    reader = dqn(dst, seed=2)
    reader.load(tmp_path / "ckpt", for_training=False)
    q_writer = writer.backend.to_numpy(writer.graph.q_values(writer.backend.to_tensor(frames)))
    q_reader = reader.backend.to_numpy(reader.graph.q_values(reader.backend.to_tensor(frames)))
    np.testing.assert_allclose(q_reader, q_writer, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(reader.act(frames, explore=False), writer.act(frames, explore=False))


OTHERS = [
    pytest.param(make, pair, id=f"{make.__name__}-{pair_id(pair)}")
    for make, pairs in ((impala, (("torch", "eager"), ("tf", "eager"))), (a2c, (("torch", "eager"), ("tf", "static"))))
    for pair in PAIRS
    if pair in pairs
]  # IMPALA's 15 convolutions at 84x84 take minutes of XLA compilation in tf static: eager only here


@pytest.mark.parametrize("make,pair", OTHERS)
def test_impala_cnn_and_a2c_take_images(make, pair):
    """IMPALA with its own residual network (time-major uint8 batches) and A2C with Nature's."""
    envs = gym.vector.SyncVectorEnv([PongLike, PongLike], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    agent = make(pair)
    _, metrics = run_steps(agent, envs, 8)
    assert len(metrics) == 2 and all(np.isfinite(float(m["loss"])) for m in metrics)
