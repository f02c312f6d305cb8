"""Recurrent policies without a framework: the ``lstm`` / ``gru`` network slot, the one-paragraph
refusals of validation, the agent class the assembly picks, the ``select_observation`` wrapper and
the memory env :class:`~rlgraph_core.testing.memory_env.RecallCue`."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlgraph_core.agents.a2c import A2CAgent
from rlgraph_core.agents.impala import ImpalaAgent
from rlgraph_core.agents.ppo import PPOAgent
from rlgraph_core.agents.recurrent_a2c import RecurrentA2CAgent
from rlgraph_core.agents.recurrent_impala import RecurrentImpalaAgent
from rlgraph_core.agents.recurrent_ppo import RecurrentPPOAgent
from rlgraph_core.assemble import agent_class_for
from rlgraph_core.components.recurrent import RecurrentSettings
from rlgraph_core.config.run import DEFAULT_CONFIG, apply_overrides, validate_config
from rlgraph_core.config.wrappers import resolve_wrappers, validate_wrappers
from rlgraph_core.errors import ConfigError
from rlgraph_core.plugins import PluginManager, hookimpl
from rlgraph_core.testing import NumpyBackend
from rlgraph_core.testing.memory_env import RecallCue


class _Numpy:
    @hookimpl
    def rlgraph_backends(self):
        return {"numpy": NumpyBackend}


PM = PluginManager(load_entry_points=False)
PM.register(_Numpy(), "rlgraph-recurrent-test", name="recurrent-test")
PPO_LSTM = [
    "train.backend=numpy",
    "agent={type: ppo, n_steps: 32, batch_size: 64, network: {type: lstm, units: 8, seq_len: 8}}",
    "env.num_envs=4",
]


def validate(*overrides):
    return validate_config(apply_overrides(DEFAULT_CONFIG, [*PPO_LSTM, *overrides]), PM)


def test_lstm_and_gru_fill_the_network_slot_of_ppo_and_pick_the_recurrent_agent():
    for cell in ("lstm", "gru"):
        agent = validate(f"agent.network.type={cell}").agent
        assert isinstance(agent.network, RecurrentSettings) and agent.network.type == cell
        assert agent.network.seq_len == 8 and agent.network.stateful
        assert agent_class_for(PPOAgent, agent) is RecurrentPPOAgent
        impala = validate(f"agent={{type: impala, n_steps: 16, network: {{type: {cell}, seq_len: 8}}}}").agent
        assert agent_class_for(ImpalaAgent, impala) is RecurrentImpalaAgent
        a2c = validate(f"agent={{type: a2c, n_steps: 8, network: {{type: {cell}, seq_len: 8}}}}").agent
        assert agent_class_for(A2CAgent, a2c) is RecurrentA2CAgent
    plain = validate("agent.network={type: mlp}").agent
    assert agent_class_for(PPOAgent, plain) is PPOAgent


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (
            ["agent={type: sac, actor_network: {type: lstm}}"],
            [
                "'agent.actor_network.type' = 'lstm' is a recurrent network",
                "'sac' does not",
                "recurrent networks: a2c, dqn, impala, ppo",
            ],
        ),
        (
            ["agent={type: a2c, network: {type: gru}}"],
            ["'agent.network.seq_len' = 16 does not divide 'agent.n_steps' = 5", "longer than the rollout", "(e.g. 5)"],
        ),
        (["agent.network.seq_len=12"], ["'agent.network.seq_len' = 12 does not divide 'agent.n_steps' = 32", "e.g. 8"]),
        (["agent.network.seq_len=64"], ["seq_len cannot be longer than the rollout"]),
        (["agent.batch_size=60"], ["'agent.batch_size' = 60 is not a whole number of sequences", "multiple of 8"]),
        (["agent.preprocessor=running_mean_std"], ["'agent.preprocessor' = 'running_mean_std'", "env wrapper"]),
        (["agent.network.units=0"], ["'agent.network.units' = 0"]),
        (
            ["agent={type: impala, n_steps: 20, network: {type: lstm}}"],
            ["'agent.network.seq_len' = 16 does not divide 'agent.n_steps' = 20", "(e.g. 10)"],
        ),
    ],
)
def test_bad_recurrent_settings_fail_validation_in_one_paragraph(overrides, expected):
    with pytest.raises(ConfigError) as info:
        validate(*overrides)
    msg = str(info.value)
    assert "\n" not in msg and all(part in msg for part in expected), msg


def test_select_observation_keeps_the_entries_it_names_and_refuses_others():
    settings = validate_wrappers(PM, [{"type": "select_observation", "indices": [0, 2]}])
    env = resolve_wrappers(PM, settings)[0](gym.make("CartPole-v1"))
    full = gym.make("CartPole-v1")
    assert env.observation_space.shape == (2,)
    np.testing.assert_array_equal(env.observation_space.high, full.observation_space.high[[0, 2]])
    obs, _ = env.reset(seed=3)
    ref, _ = full.reset(seed=3)
    for _ in range(5):
        np.testing.assert_array_equal(obs, ref[[0, 2]])
        obs, *_ = env.step(1)
        ref, *_ = full.step(1)
    bad = validate_wrappers(PM, [{"type": "select_observation", "indices": [1, 4]}])
    with pytest.raises(ConfigError) as info:
        resolve_wrappers(PM, bad)[0](gym.make("CartPole-v1"))
    msg = str(info.value)
    assert "\n" not in msg and "indices [4] are outside the observation's 4 entries" in msg, msg


def test_rescale_observation_maps_the_bounds_onto_its_range_and_refuses_unbounded_entries():
    wrappers = [{"type": "select_observation", "indices": [0, 2]}, {"type": "rescale_observation"}]
    env = gym.make("CartPole-v1")
    for make in resolve_wrappers(PM, validate_wrappers(PM, wrappers)):
        env = make(env)
    full = gym.make("CartPole-v1")
    high = full.observation_space.high[[0, 2]]
    np.testing.assert_array_equal(env.observation_space.low, [-1.0, -1.0])
    np.testing.assert_array_equal(env.observation_space.high, [1.0, 1.0])
    obs, _ = env.reset(seed=3)
    ref, _ = full.reset(seed=3)
    for _ in range(5):
        np.testing.assert_allclose(obs, ref[[0, 2]] / high, rtol=1e-6)
        obs, *_ = env.step(1)
        ref, *_ = full.step(1)
    unbounded = validate_wrappers(PM, [{"type": "rescale_observation"}])
    with pytest.raises(ConfigError) as info:
        resolve_wrappers(PM, unbounded)[0](gym.make("CartPole-v1"))
    msg = str(info.value)
    assert "\n" not in msg and "entries [1, 3] have infinite bounds" in msg and "select_observation" in msg, msg
    with pytest.raises(ConfigError) as info:
        validate_wrappers(PM, [{"type": "rescale_observation", "min_obs": 1.0, "max_obs": 0.0}])
    assert "min_obs (1.0) must be below max_obs (0.0)" in str(info.value)


def test_recall_cue_pays_only_a_policy_that_remembers():
    env = RecallCue(delay=2)
    rng = np.random.default_rng(0)
    remember, guess = [], []
    for seed in range(200):
        obs, _ = env.reset(seed=seed)
        cue, total, guessed, done, steps = int(np.argmax(obs[:2])), 0.0, 0.0, False, 0
        assert obs[:2].sum() == 1.0 and obs[2] == 0.0
        while not done:
            asked = obs[2] == 1.0
            assert asked or steps == 0 or not obs.any()  # blank steps between cue and question
            obs, reward, done, truncated, _ = env.step(cue)
            total += reward
            steps += 1
        remember.append(total)
        obs, _ = env.reset(seed=seed)
        for _ in range(3):
            obs, reward, done, _, _ = env.step(0)
        guessed = env.step(int(rng.integers(2)))[1]
        guess.append(guessed)
        assert steps == 4 and not truncated
    assert np.mean(remember) == 1.0 and 0.4 < np.mean(guess) < 0.6
