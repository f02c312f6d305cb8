"""Two agents learning on different data with an averaging gradient hook end with identical weights.

This is data parallelism in miniature: each agent runs in its own thread (as each rank runs in
its own process), and the hook is an allreduce built from a barrier: every agent deposits its
flat gradient buffer, waits for the other, and both apply the mean. Without the hook the same
two agents diverge, so the test can fail.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from rlgraph_core.agents.dqn import DQNAgent, DQNConfig
from rlgraph_core.agents.ppo import PPOAgent, PPOConfig
from rlgraph_core.agents.sac import SACAgent, SACConfig
from rlgraph_core.assemble import make_backend
from rlgraph_core.spaces import Discrete, FloatBox
from rlgraph_core.testing import backend_pairs

PAIRS = [p for p in backend_pairs() if p[0] != "numpy"]
OBS = FloatBox(-1.0, 1.0, shape=(4,))


class ThreadAllreduce:
    """An in-process allreduce over ``n`` participants: returns the mean of their buffers."""

    def __init__(self, n: int):
        self.n = n
        self.barrier = threading.Barrier(n, timeout=120)
        self.buffers: dict[int, np.ndarray] = {}
        self.calls = 0

    def hook_for(self, rank: int):
        """The gradient hook of participant ``rank``."""

        def hook(flat: np.ndarray) -> np.ndarray:
            assert flat.dtype == np.float32 and flat.ndim == 1
            self.buffers[rank] = flat.copy()
            self.barrier.wait()  # every rank has deposited its gradients
            mean = np.mean([self.buffers[r] for r in range(self.n)], axis=0).astype(np.float32)
            self.calls += rank == 0
            self.barrier.wait()  # every rank has read them: safe to reuse
            return mean

        return hook


def _run_in_threads(fns):
    errors = []

    def wrap(fn):
        try:
            fn()
        except BaseException as exc:  # surface a worker's failure in the test
            errors.append(exc)

    threads = [threading.Thread(target=wrap, args=(fn,)) for fn in fns]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _dqn(pair):
    cfg = DQNConfig(network={"hidden": [16]}, batch_size=8, target_update_interval=2)
    return DQNAgent(cfg, OBS, Discrete(3), make_backend(*pair, device="cpu", seed=0), seed=0)


def _dqn_batch(rng):
    n = 8
    return {
        "obs": rng.uniform(-1, 1, (n, 4)).astype(np.float32),
        "actions": rng.integers(0, 3, n),
        "rewards": rng.standard_normal(n).astype(np.float32),
        "next_obs": rng.uniform(-1, 1, (n, 4)).astype(np.float32),
        "terminals": rng.random(n) < 0.2,
    }


def _sac(pair):
    cfg = SACConfig(actor_network={"hidden": [16]}, critic_network={"hidden": [16]}, batch_size=8)
    return SACAgent(cfg, OBS, FloatBox(-2.0, 2.0, shape=(2,)), make_backend(*pair, device="cpu", seed=0), seed=0)


def _sac_batch(rng):
    batch = _dqn_batch(rng)
    batch["actions"] = rng.uniform(-1, 1, (8, 2)).astype(np.float32)
    return batch


def _ppo(pair):
    cfg = PPOConfig(network={"hidden": [16]}, n_steps=4, batch_size=8, n_epochs=2)
    return PPOAgent(cfg, OBS, Discrete(2), make_backend(*pair, device="cpu", seed=0), seed=0, num_envs=4)


def _ppo_batch(rng):
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


AGENTS = {"dqn": (_dqn, _dqn_batch), "sac": (_sac, _sac_batch), "ppo": (_ppo, _ppo_batch)}
# DQN on every backend and mode; SAC (three train steps per update) and PPO (minibatch epochs)
# on the eager pairs and tf static, to keep torch.compile time out of the default run.
CASES = [(a, p) for p in PAIRS for a in AGENTS if a == "dqn" or p != ("torch", "static")]


@pytest.mark.parametrize("algo,pair", CASES, ids=[f"{a}-{p[0]}-{p[1]}" for a, p in CASES])
def test_averaging_hook_keeps_two_agents_identical(algo, pair):
    make, make_batch = AGENTS[algo]
    agents = [make(pair), make(pair)]
    start = agents[0].get_weights()
    for name, value in agents[1].get_weights().items():
        np.testing.assert_array_equal(value, start[name])  # same seed: same initial weights
    reduce = ThreadAllreduce(2)
    for rank, agent in enumerate(agents):
        agent.set_gradient_hook(reduce.hook_for(rank))
    rngs = [np.random.default_rng(100 + rank) for rank in range(2)]  # each rank sees its own data

    def work(rank):
        def run():
            for _ in range(3):
                agents[rank].learn(make_batch(rngs[rank]))

        return run

    _run_in_threads([work(0), work(1)])
    steps_per_learn = {"dqn": 1, "sac": 3, "ppo": 4}[algo]  # PPO: 2 epochs x 2 minibatches
    assert reduce.calls == 3 * steps_per_learn
    w0, w1 = agents[0].get_weights(), agents[1].get_weights()
    assert any(not np.array_equal(w0[k], start[k]) for k in start)  # they did learn
    for name in w0:
        np.testing.assert_array_equal(w0[name], w1[name], err_msg=name)

    # The same two agents without the hook: each follows its own data and they diverge.
    for agent in agents:
        agent.set_gradient_hook(None)
    for rank, agent in enumerate(agents):
        agent.learn(make_batch(rngs[rank]))
    w0, w1 = agents[0].get_weights(), agents[1].get_weights()
    assert any(not np.allclose(w0[k], w1[k]) for k in w0)
