"""Recurrent DQN (R2D2) without a framework: sequence records cut from a vector env's steps,
n-step targets inside a window, the one-paragraph refusals of validation and the agent class
the assembly picks."""

from __future__ import annotations

import numpy as np
import pytest

from rlgraph_core.agents.dqn import DQNAgent
from rlgraph_core.agents.recurrent_dqn import RecurrentDQNAgent
from rlgraph_core.assemble import agent_class_for, assemble
from rlgraph_core.config.run import DEFAULT_CONFIG, apply_overrides, validate_config
from rlgraph_core.errors import ConfigError
from rlgraph_core.memories import PrioritizedReplay, ReplayMemory
from rlgraph_core.memories.sizing import estimate_replay_bytes
from rlgraph_core.memories.sequences import SequenceAssembler, sequence_targets, trained_rows
from rlgraph_core.plugins import PluginManager, hookimpl
from rlgraph_core.spaces import Discrete, FloatBox, IntBox
from rlgraph_core.testing import NumpyBackend


class _Numpy:
    @hookimpl
    def rlgraph_backends(self):
        return {"numpy": NumpyBackend}


PM = PluginManager(load_entry_points=False)
PM.register(_Numpy(), "rlgraph-r2d2-test", name="r2d2-test")
R2D2 = [
    "train.backend=numpy",
    "agent={type: dqn, burn_in: 4, n_step: 3, network: {type: lstm, units: 8, seq_len: 12}}",
    "env.num_envs=2",
]


def validate(*overrides):
    return validate_config(apply_overrides(DEFAULT_CONFIG, [*R2D2, *overrides]), PM)


def test_windows_overlap_by_the_burn_in_and_carry_the_state_of_their_first_step():
    """Each env's stream (step i of env n has obs 10 i + n) is cut into windows of seq_len = 5
    steps (+ the observation after them) every seq_len - burn_in = 3 steps; each window holds the
    state its first step acted from and the steps' fields in order."""
    n, burn_in, seq_len = 2, 2, 5
    assembler = SequenceAssembler(n, burn_in, seq_len)
    records = []
    for i in range(15):
        out = assembler.add(
            obs=np.array([[10.0 * i + e] for e in range(n)], np.float32),
            starts=np.array([i % 4 == 0, False]),
            state={"h": np.full((n, 1), float(i), np.float32)},
            actions=np.array([i, i + 100]),
            rewards=np.array([i, -i], np.float32),
            terminated=np.array([i % 4 == 3, False]),
            truncated=np.zeros(n, bool),
        )
        if out is not None:
            records.append((i, out))
    assert [i for i, _ in records] == [5, 8, 11, 14]  # first after seq_len + 1 steps, then every 3
    for k, (i, rec) in enumerate(records):
        first = 3 * k
        steps = np.arange(first, first + seq_len + 1)
        assert rec["obs"].shape == (n, seq_len + 1, 1) and rec["actions"].shape == (n, seq_len)
        np.testing.assert_array_equal(rec["obs"][1, :, 0], 10.0 * steps + 1)
        np.testing.assert_array_equal(rec["starts"][0], steps % 4 == 0)
        np.testing.assert_array_equal(rec["actions"][1], steps[:-1] + 100)
        np.testing.assert_array_equal(rec["rewards"][1], -steps[:-1])
        np.testing.assert_array_equal(rec["terminated"][0], steps[:-1] % 4 == 3)
        np.testing.assert_array_equal(rec["state"]["h"][:, 0], [first, first])
    # the trained steps (after the burn-in) tile the stream from step burn_in on
    trained = np.concatenate([3 * k + np.arange(burn_in, seq_len) for k in range(len(records))])
    np.testing.assert_array_equal(trained, np.arange(burn_in, burn_in + 3 * len(records)))
    # sequence records go into the prioritized replay as they are and come back with the state
    memory = PrioritizedReplay(100, alpha=0.9, seed=0)
    for _, rec in records:
        memory.insert(rec)
    sample = memory.sample(4)
    assert sample["state"]["h"].shape == (4, 1) and sample["obs"].shape == (4, seq_len + 1, 1)


def test_n_step_targets_inside_a_window():
    rewards = np.array([[1.0, 2.0, 3.0, 4.0, 5.0], [1.0, 1.0, 1.0, 1.0, 1.0]], np.float32)
    terminated = np.zeros((2, 5), bool)
    truncated = np.zeros((2, 5), bool)
    terminated[0, 3] = True
    truncated[1, 2] = True
    returns, discounts, mask = sequence_targets(rewards, terminated, truncated, burn_in=1, n_step=2, gamma=0.5)
    # env 0, trained steps 1..4: (2 + .5*3, .25), (3 + .5*4, 0: terminated at 3), (4, 0), (5, .5: window end)
    np.testing.assert_allclose(returns[0], [3.5, 5.0, 4.0, 5.0])
    np.testing.assert_allclose(discounts[0], [0.25, 0.0, 0.0, 0.5])
    np.testing.assert_array_equal(mask[0], [1, 1, 1, 1])
    # env 1: the truncation at step 2 leaves steps 1 and 2 out of the loss
    np.testing.assert_array_equal(mask[1], [0, 0, 1, 1])
    np.testing.assert_allclose(discounts[1, 2:], [0.25, 0.5])
    rows, boot = trained_rows(trained=4, batch=2, n_step=2)
    np.testing.assert_array_equal(rows, np.arange(8))
    np.testing.assert_array_equal(boot, [4, 5, 6, 7, 8, 9, 8, 9])


def test_dqn_with_a_recurrent_network_is_r2d2():
    agent = validate().agent
    assert agent.network.stateful and agent.burn_in == 4 and agent.priority_eta == 0.9
    assert agent_class_for(DQNAgent, agent) is RecurrentDQNAgent
    assert agent_class_for(DQNAgent, validate("agent.network={type: mlp}", "agent.burn_in=0").agent) is DQNAgent
    # a record is a window of 12 steps and 13 observations: the memory estimate counts 7 transitions each
    obs, actions = FloatBox(shape=(3,)), Discrete(2)
    capacity = validate().agent.memory.capacity
    assert assemble(validate(), PM).memory_bytes(obs, actions) == estimate_replay_bytes(7 * capacity, obs, actions)
    # uint8 frames are shared: a window adds the frames of its 12 - 4 = 8 new steps, the estimate of
    # 8 transitions; a memory filled with such windows of 84x84 frames holds about that per window
    image = IntBox(0, 255, shape=(84, 84, 1), dtype=np.uint8)
    estimate = assemble(validate(), PM).memory_bytes(image, actions)
    assert estimate == estimate_replay_bytes(8 * capacity, image, actions)
    memory, assembler, rng = ReplayMemory(64, seed=0), SequenceAssembler(2, 4, 12), np.random.default_rng(0)
    while len(memory) < 64:
        record = assembler.add(
            rng.integers(0, 256, (2, 84, 84, 1), dtype=np.uint8), np.zeros(2, bool), {"h": np.zeros((2, 8), np.float32)},
            np.zeros(2, np.int64), np.zeros(2, np.float32), np.zeros(2, bool), np.zeros(2, bool),
        )  # fmt: skip
        if record is not None:
            memory.insert(record)
    assert 0.8 < memory.nbytes() / 64 / (estimate / capacity) < 1.6, (memory.nbytes() / 64, estimate / capacity)


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (
            ["agent.burn_in=12"],
            [
                "'agent.burn_in' = 12 is not shorter than 'agent.network.seq_len' = 12",
                "no step would be trained",
                "e.g. 6",
            ],
        ),
        (["agent.burn_in=20"], ["'agent.burn_in' = 20 is not shorter than"]),
        (
            ["agent.n_step=9"],
            ["'agent.n_step' = 9 is longer than the 8 trained steps", "seq_len' = 12 minus 'agent.burn_in' = 4"],
        ),
        (["agent.network={type: mlp}"], ["'agent.burn_in' = 4 warms up a recurrent state", "'mlp' carries no state"]),
        (["agent.preprocessor=running_mean_std"], ["'agent.preprocessor' = 'running_mean_std'", "env wrapper"]),
        (
            ["agent={type: sac, actor_network: {type: gru}}"],
            [
                "'agent.actor_network.type' = 'gru' is a recurrent network",
                "'sac' does not",
                "recurrent networks: a2c, dqn, impala, ppo",
            ],
        ),
        (["agent.priority_eta=1.5"], ["priority_eta"]),
    ],
)
def test_bad_r2d2_settings_fail_validation_in_one_paragraph(overrides, expected):
    with pytest.raises(ConfigError) as info:
        validate(*overrides)
    msg = str(info.value)
    assert "\n" not in msg and all(part in msg for part in expected), msg
