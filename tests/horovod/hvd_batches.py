"""The agents and the fixed per-rank batches of the Horovod update tests (shared by the worker
that runs under horovodrun and by the test's single-process reference)."""

from __future__ import annotations

import numpy as np

from rlgraph_core.agents.dqn import DQNAgent, DQNConfig
from rlgraph_core.agents.ppo import PPOAgent, PPOConfig
from rlgraph_core.agents.recurrent_ppo import RecurrentPPOAgent
from rlgraph_core.components.recurrent import RecurrentSettings
from rlgraph_core.spaces import Discrete, FloatBox

OBS = FloatBox(-1.0, 1.0, shape=(4,))


#: recurrent PPO ("rppo"): rollouts of T steps on N envs, cut into sequences of SEQ steps
T, N, SEQ = 8, 4, 4


def make_agent(algo: str, backend, seed: int, num_envs: int = N):
    """A small DQN (3 actions), PPO (2 actions, 4 envs) or recurrent PPO (an LSTM of 8 units, 2
    actions, ``num_envs`` envs; its minibatch is the whole rollout, advantages not normalised, so
    the mean loss over the ranks' rollouts together has the mean of their gradients)."""
    if algo == "rppo":
        network = RecurrentSettings(type="lstm", units=8, encoder={"hidden": []}, seq_len=SEQ)
        cfg = PPOConfig(network=network, n_steps=T, batch_size=T * num_envs, n_epochs=2, normalize_advantage=False)
        return RecurrentPPOAgent(cfg, OBS, Discrete(2), backend, seed=seed, num_envs=num_envs)
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
    if algo == "rppo":
        return {
            **_rollout(rng, T, N),
            "episode_starts": rng.random((T, N)) < 0.2,
            "sequence_states": {k: rng.standard_normal((T // SEQ, N, 8)).astype(np.float32) for k in STATE},
        }
    return _rollout(rng, 4, 4)


#: the keys of recurrent PPO's state (separate LSTM cores for actor and critic)
STATE = ("pi_h", "pi_c", "vf_h", "vf_c")


def _rollout(rng, t: int, n: int) -> dict[str, np.ndarray]:
    """A random on-policy rollout of ``t`` steps on ``n`` envs, time-major."""
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


def union(batches: list[dict[str, np.ndarray]], axis: int = 0) -> dict:
    """One batch holding all of ``batches`` (DQN: the mean loss over it has the mean gradient);
    rollouts are joined along the env axis (``axis=1``), their stored states too."""

    def join(values):
        if isinstance(values[0], dict):
            return {k: join([v[k] for v in values]) for k in values[0]}
        return np.concatenate(values, axis=axis)

    return {k: join([b[k] for b in batches]) for k in batches[0]}
