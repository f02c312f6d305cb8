"""The agents and the fixed per-rank batches of the Horovod update tests (shared by the worker
that runs under horovodrun and by the test's single-process reference)."""

from __future__ import annotations

import numpy as np

from rlgraph_core.agents.dqn import DQNAgent, DQNConfig
from rlgraph_core.agents.ppo import PPOAgent, PPOConfig
from rlgraph_core.spaces import Discrete, FloatBox

OBS = FloatBox(-1.0, 1.0, shape=(4,))


def make_agent(algo: str, backend, seed: int):
    """A small DQN (3 actions) or PPO (2 actions, 4 envs) agent."""
    if algo == "dqn":
        cfg = DQNConfig(network={"hidden": [16]}, batch_size=8, target_update_interval=2)
        return DQNAgent(cfg, OBS, Discrete(3), backend, seed=seed)
    cfg = PPOConfig(network={"hidden": [16]}, n_steps=4, batch_size=8, n_epochs=2)
    return PPOAgent(cfg, OBS, Discrete(2), backend, seed=seed, num_envs=4)


def batch(algo: str, rank: int, step: int) -> dict[str, np.ndarray]:
    """The batch rank ``rank`` learns from at update ``step`` (different for every rank)."""
    rng = np.random.default_rng([100 + rank, step])
    if algo == "dqn":
        n = 8
        return {
            "obs": rng.uniform(-1, 1, (n, 4)).astype(np.float32),
            "actions": rng.integers(0, 3, n),
            "rewards": rng.standard_normal(n).astype(np.float32),
            "next_obs": rng.uniform(-1, 1, (n, 4)).astype(np.float32),
            "terminals": rng.random(n) < 0.2,
        }
    t, n = 4, 4
    return {
        "obs": rng.uniform(-1, 1, (t, n, 4)).astype(np.float32),
        "actions": rng.integers(0, 2, (t, n)),
        "log_probs": np.full((t, n), np.log(0.5), np.float32),
        "values": rng.standard_normal((t, n)).astype(np.float32),
        "rewards": rng.standard_normal((t, n)).astype(np.float32),
        "terminated": rng.random((t, n)) < 0.1,
        "truncated": np.zeros((t, n), bool),
        "next_values": rng.standard_normal((t, n)).astype(np.float32),
    }


def union(batches: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """One batch holding all of ``batches`` (DQN: the mean loss over it has the mean gradient)."""
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
