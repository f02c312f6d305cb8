"""The per-env-step acting path (act -> observe) against plain numpy references of what it must do.

These pin the behaviour the act-path shortcuts keep: epsilon-greedy noise drawn in the same
order, DQN actions from the same noise and epsilon (with the epsilon tensor reused once the
schedule ends), SAC acting without log-probabilities, and PPO's observe taking the values cached
by act whether it is handed the acted arrays themselves or equal copies.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from rlgraph_core.agents.dqn import DQNAgent, DQNConfig
from rlgraph_core.agents.ppo import PPOAgent, PPOConfig
from rlgraph_core.agents.sac import SACAgent, SACConfig
from rlgraph_core.components.distributions import scale_action
from rlgraph_core.components.exploration import EpsilonGreedy
from rlgraph_core.spaces import Discrete, FloatBox
from rlgraph_core.testing import available_backends, backend_params, make_test_backend


def _autodiff_params() -> list:
    return [p for p in backend_params() if getattr(available_backends()[p.values[0][0]], "supports_autodiff", True)]


@pytest.fixture(params=_autodiff_params())
def grad_backend(request):
    """A ``(backend_name, mode)`` pair of a backend agents can train on."""
    return request.param


OBS = FloatBox(-np.inf, np.inf, shape=(4,))


def test_epsilon_greedy_noise_is_the_stacked_draws_of_the_same_generator():
    """``[draw, random_action]`` per sample, the action drawn first (seeded runs explore as always)."""
    explore = EpsilonGreedy(num_actions=5, epsilon=0.3)
    for batch in (1, 7):
        rng, ref_rng = np.random.default_rng(3), np.random.default_rng(3)
        noise = explore.draw_noise(rng, batch)
        actions = ref_rng.integers(0, 5, batch)
        draws = ref_rng.random(batch, dtype=np.float32)
        expected = np.stack([draws, actions.astype(np.float32)], axis=-1)
        assert noise.dtype == np.float32 and noise.shape == (batch, 2)
        np.testing.assert_array_equal(noise, expected)
        assert rng.random() == ref_rng.random()  # the generator advanced by the same draws


def test_dqn_act_is_epsilon_greedy_over_the_q_values_across_the_schedule(grad_backend):
    name, mode = grad_backend
    cfg = DQNConfig(
        network={"hidden": [8]}, exploration={"type": "linear", "start": 0.9, "end": 0.2, "steps": 6}, batch_size=4
    )
    agent = DQNAgent(cfg, OBS, Discrete(3, start=1), make_test_backend(name, mode), seed=0, num_envs=3)
    obs = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    to_t, to_np = agent.backend.to_tensor, agent.backend.to_numpy
    q = to_np(agent.graph.q_values(to_t(obs)))
    greedy_runs = 0
    for t in range(12):  # epsilon decays over 6 steps, then stays at 0.2 (its tensor is reused)
        agent.timesteps = t
        rng = copy.deepcopy(agent.rng)
        noise = agent.exploration.draw_noise(rng, 3)
        epsilon = np.float32(cfg.exploration.epsilon(t))
        expected = np.where(noise[:, 0] < epsilon, noise[:, 1].astype(np.int64), q.argmax(axis=1)) + 1
        actions = agent.act(obs)
        np.testing.assert_array_equal(actions, expected)
        greedy_runs += bool((noise[:, 0] >= epsilon).any())
    assert greedy_runs >= 3  # the network path ran, not only the all-explore shortcut


def test_sac_act_samples_the_squashed_gaussian_scaled_to_the_box(grad_backend):
    name, mode = grad_backend
    cfg = SACConfig(actor_network={"hidden": [8]}, critic_network={"hidden": [8]}, batch_size=4, learning_starts=0)
    low, high = np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32)
    agent = SACAgent(cfg, OBS, FloatBox(low, high), make_test_backend(name, mode), seed=0, num_envs=2)
    obs = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    to_t, to_np = agent.backend.to_tensor, agent.backend.to_numpy
    for _ in range(3):
        noise = copy.deepcopy(agent.rng).standard_normal((2, 2), dtype=np.float32)
        unit, _ = agent.graph.actor.sample(to_t(obs), to_t(noise))  # the training-time sample
        expected = scale_action(to_np(unit), low.astype(np.float64), high.astype(np.float64)).astype(np.float32)
        np.testing.assert_allclose(agent.act(obs), expected, rtol=1e-6, atol=1e-6)


def _ppo(name: str, mode: str) -> PPOAgent:
    cfg = PPOConfig(network={"hidden": [8]}, n_steps=4, batch_size=8, n_epochs=1)
    return PPOAgent(cfg, OBS, Discrete(2), make_test_backend(name, mode), seed=0, num_envs=3)


def test_ppo_observe_takes_the_cached_values_for_the_acted_arrays_or_equal_copies(grad_backend):
    name, mode = grad_backend
    same, copies, other = _ppo(name, mode), _ppo(name, mode), _ppo(name, mode)
    rng = np.random.default_rng(4)
    for _ in range(4):
        obs = rng.standard_normal((3, 4)).astype(np.float32)
        rewards = rng.standard_normal(3)
        next_obs = rng.standard_normal((3, 4)).astype(np.float32)
        done = np.zeros(3, bool)
        actions = same.act(obs)
        np.testing.assert_array_equal(copies.act(obs), actions)
        other.act(obs)
        same.observe(obs, actions, rewards, next_obs, done, done)
        copies.observe(obs.copy(), actions.copy(), rewards, next_obs, done, done)
        other.observe(obs, 1 - actions, rewards, next_obs, done, done)  # not what act returned
    a, b, c = same.buffer.data(), copies.buffer.data(), other.buffer.data()
    assert set(a) == set(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    np.testing.assert_array_equal(c["actions"], 1 - a["actions"])
    # the other actions' log-probabilities were computed afresh: log p(1 - a) = log(1 - p(a))
    np.testing.assert_allclose(np.exp(c["log_probs"]), 1.0 - np.exp(a["log_probs"]), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(c["values"], a["values"], rtol=1e-5, atol=1e-6)
