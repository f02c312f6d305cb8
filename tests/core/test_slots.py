"""Component slots (network, exploration, preprocessor) without a framework: defaults and
shorthands, validation against the settings models plugins register, the one-paragraph errors,
and an agent graph built on the numpy harness with a plugin's network and exploration."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pytest
from pydantic import Field

from rlgraph_core.agents.dqn import DQNConfig, DQNGraph
from rlgraph_core.agents.on_policy import ActorCriticNetworkSpec
from rlgraph_core.agents.ppo import PPOConfig
from rlgraph_core.agents.sac import SACConfig
from rlgraph_core.assemble import assemble
from rlgraph_core.components.exploration import EpsilonGreedySettings, Exploration
from rlgraph_core.components.network import MLP, NetworkMaker, NetworkSpec
from rlgraph_core.components.q_head import QNetwork, QValueHead
from rlgraph_core.components.schedules import ConstantSchedule, LinearSchedule
from rlgraph_core.components.settings import ComponentSpec, ExplorationSettings, NetworkSettings
from rlgraph_core.config.run import DEFAULT_CONFIG, apply_overrides, validate_config
from rlgraph_core.errors import ConfigError
from rlgraph_core.graph import Component, api
from rlgraph_core.plugins import PluginManager, hookimpl
from rlgraph_core.spaces import BoolBox, FloatBox, IntBox
from rlgraph_core.testing import ComponentTest, NumpyBackend


# --------------------------------------------------------------------------- a test plugin
class ScaledMLPSettings(NetworkSettings):
    """``scale * MLP(x)``: a network a third party might register."""

    type: Literal["scaled_mlp"] = "scaled_mlp"
    hidden: list[int] = Field(default_factory=lambda: [4])
    scale: float = Field(2.0, gt=0)


class ScaledMLP(Component):
    def __init__(self, settings: ScaledMLPSettings, rng, name: str):
        super().__init__(name)
        self.scale = settings.scale
        self.mlp = MLP(NetworkSpec(hidden=settings.hidden, initializer=settings.initializer), rng, name="mlp")
        self.add_components(self.mlp)

    @classmethod
    def from_settings(cls, settings, *, name, rng):
        return cls(settings, rng, name)

    @api
    def call(self, x):
        return self.mlp.call(x) * self.scale


class GreedySettings(ExplorationSettings):
    type: Literal["always_greedy"] = "always_greedy"


class AlwaysGreedy(Exploration):
    """No exploration at all: ``argmax Q`` (noise of one ignored column)."""

    parameter = "nothing"

    @classmethod
    def from_settings(cls, settings, *, name, num_actions):
        return cls(num_actions, 0.0, name=name)

    @property
    def noise_shape(self):
        return (1,)

    def draw_noise(self, rng, batch_size):
        return np.zeros((batch_size, 1), np.float32)

    @api
    def explore(self, q_values, noise, value):
        return self.ops.argmax(q_values, axis=-1)


class _SlotPlugin:
    @hookimpl
    def rlgraph_backends(self):
        return {"numpy": NumpyBackend}

    @hookimpl
    def rlgraph_components(self):
        return {
            "scaled_mlp": (ScaledMLP, ScaledMLPSettings),
            "always_greedy": (AlwaysGreedy, GreedySettings),
            "broken_entry": (ScaledMLP, dict),  # not a ComponentSettings model: reported, left out
        }


PM = PluginManager(load_entry_points=False)
with pytest.warns(RuntimeWarning, match="broken_entry"):
    PM.register(_SlotPlugin(), "rlgraph-slot-test", name="slot-test")
    PM.names("components")
BASE = apply_overrides(DEFAULT_CONFIG, ["train.backend=numpy"])


def validate(*overrides):
    return validate_config(apply_overrides(BASE, list(overrides)), PM)


# --------------------------------------------------------------------------- defaults and shorthands
def test_defaults_and_older_forms_read_as_before():
    dqn = DQNConfig(network={"hidden": [8]}, exploration=0.3)
    assert isinstance(dqn.network, NetworkSpec) and dqn.network.type == "mlp" and dqn.network.hidden == [8]
    assert isinstance(dqn.exploration, EpsilonGreedySettings) and dqn.exploration.epsilon == 0.3
    sched = DQNConfig(exploration={"type": "linear", "start": 1.0, "end": 0.1, "steps": 5}).exploration
    assert isinstance(sched.epsilon, LinearSchedule)
    assert DQNConfig(exploration=ConstantSchedule(value=0.2)).exploration.epsilon == ConstantSchedule(value=0.2)
    assert DQNConfig(network=NetworkSpec(hidden=[3])).network.hidden == [3]
    # an algorithm keeps its own defaults for its default component, with or without type
    for network in ({"hidden": [8]}, {"type": "mlp", "hidden": [8]}, "mlp"):
        ppo = PPOConfig(network=network)
        assert isinstance(ppo.network, ActorCriticNetworkSpec) and ppo.network.activation == "tanh"
    assert SACConfig().actor_network.hidden == [256, 256] and SACConfig().critic_network.type == "mlp"
    # another type is kept for the registry to validate
    assert isinstance(DQNConfig(network={"type": "scaled_mlp", "scale": 3}).network, ComponentSpec)


def test_config_dump_names_every_slot_component():
    agent = validate().to_dict()["agent"]
    assert agent["network"]["type"] == "mlp" and agent["network"]["hidden"] == [256, 256]
    assert agent["exploration"] == {
        "type": "epsilon_greedy",
        "epsilon": {"type": "linear", "start": 1.0, "end": 0.04, "steps": 16000},
    }
    assert validate_config(validate().to_dict(), PM).to_dict() == validate().to_dict()


# --------------------------------------------------------------------------- registry validation
def test_plugin_slot_components_are_validated_by_their_models():
    config = validate("agent.network={type: scaled_mlp, scale: 0.5}", "agent.exploration=always_greedy")
    assert isinstance(config.agent.network, ScaledMLPSettings) and config.agent.network.scale == 0.5
    assert isinstance(config.agent.exploration, GreedySettings)
    assert "broken_entry" not in PM.names("components")
    assert any("broken_entry" in f.error for f in PM.failed)


@pytest.mark.parametrize(
    "override, expected",
    [
        (
            "agent.network.type=scaled_mpl",
            "Unknown network 'scaled_mpl' (in field 'agent.network.type'). Known "
            "networks: cnn, dict_encoder, gru, lstm, mlp, scaled_mlp. Did you mean 'scaled_mlp'?",
        ),
        (
            "agent.exploration=epsilon_gredy",
            "Unknown exploration 'epsilon_gredy' (in field 'agent.exploration.type'). "
            "Known explorations: always_greedy, epsilon_greedy. Did you mean 'epsilon_greedy'?",
        ),
        ("agent.network.type=dqn_loss", "'agent.network.type' = 'dqn_loss' is a component, but not a network"),
        (
            "agent.exploration.type=scaled_mlp",
            "'agent.exploration.type' = 'scaled_mlp' is a component, but not an exploration",
        ),
        ("agent.network={type: scaled_mlp, scale: -1}", "'agent.network.scale' = -1: Input should be greater than 0"),
        (
            "agent.network={type: scaled_mlp, scael: 1}",
            "'agent.network.scael' is not a known field (value 1); did you "
            "mean 'scale'? Known fields of 'agent.network': type, initializer, hidden, scale",
        ),
        ("agent.network.activation=swish", "'agent.network.activation' = \"swish\": unknown activation 'swish'"),
        ("agent.exploration.epsilon=1.5", "'agent.exploration.epsilon' = 1.5: epsilon (the probability"),
        ("agent.network=[64, 64]", "'agent.network' = [64, 64]: a network is a registry name or a mapping"),
    ],
)
def test_bad_slot_sections_are_one_paragraph(override, expected):
    with pytest.raises(ConfigError) as info:
        validate(override)
    msg = str(info.value)
    assert expected in msg
    assert "\n" not in msg


def test_assembly_checks_slots_of_a_config_built_in_code():
    config = validate()
    config.agent = config.agent.model_copy(update={"network": ComponentSpec(type="scaled_mlp", scale=0.0)})
    with pytest.raises(ConfigError, match=r"'agent\.network\.scale' = 0"):
        assemble(config, PM)
    config.agent = config.agent.model_copy(update={"network": ComponentSpec(type="scaled_mlp", scale=4.0)})
    assembly = assemble(config, PM)
    assert isinstance(assembly.config.agent.network, ScaledMLPSettings) and assembly.config.agent.network.scale == 4


# --------------------------------------------------------------------------- graphs on the numpy harness
def f(*shape):
    return FloatBox(shape=shape).with_batch_rank()


def dqn_spaces(noise: int) -> dict:
    return {
        "act": {"obs": f(3), "noise": f(noise), "value": FloatBox(shape=())},
        "greedy": {"obs": f(3)},
        "q_values": {"obs": f(3)},
        "loss": {
            "obs": f(3),
            "actions": IntBox(0, 1, shape=()).with_batch_rank(),
            "rewards": f(),
            "next_obs": f(3),
            "terminals": BoolBox().with_batch_rank(),
            "discounts": f(),
            "weights": f(),
        },
        "sync_target": {},
    }


def test_dqn_graph_uses_the_plugin_network_and_exploration():
    config = validate("agent.network={type: scaled_mlp, hidden: [5], scale: 3.0}", "agent.exploration=always_greedy")
    assembly = assemble(config, PM)
    graph = DQNGraph(config.agent, FloatBox(shape=(3,)), 2, seed=0, components=assembly.resolve_component)
    assert isinstance(graph.policy.trunk, ScaledMLP) and isinstance(graph.exploration, AlwaysGreedy)
    test = ComponentTest(graph, dqn_spaces(1), NumpyBackend())
    w = test.get_weights()
    assert {"policy/trunk/mlp/dense_0/W", "target/trunk/mlp/dense_0/W"} <= set(w)
    obs = np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32)
    h = np.maximum(obs @ w["policy/trunk/mlp/dense_0/W"] + w["policy/trunk/mlp/dense_0/b"], 0) * 3.0
    q = h @ w["policy/head/q/W"] + w["policy/head/q/b"]
    np.testing.assert_allclose(test.call("q_values", obs), q, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(test.call("act", obs, np.zeros((6, 1), np.float32), np.float32(0)), q.argmax(-1))


class OldQNetwork(Component):
    """The Q-network as it was built before slots: one generator, MLP trunk, then the head."""

    def __init__(self, spec, num_actions, seed, name="policy"):
        super().__init__(name)
        rng = np.random.default_rng(seed)
        self.trunk = MLP(spec, rng, name="trunk")
        self.head = QValueHead(num_actions, True, spec.initializer, rng, name="head")
        self.add_components(self.trunk, self.head)

    @api
    def call(self, obs):
        return self.head.call(self.trunk.call(obs))


def test_the_default_network_gets_exactly_the_weights_it_always_had():
    spec = NetworkSpec(hidden=[7, 5], activation="tanh", initializer="glorot_uniform")
    spaces = {"call": {"obs": f(3)}}
    new = ComponentTest(QNetwork(NetworkMaker(MLP, spec), 2, dueling=True, seed=4), spaces, NumpyBackend())
    old = ComponentTest(OldQNetwork(spec, 2, seed=4), spaces, NumpyBackend())
    new_w, old_w = new.get_weights(), old.get_weights()
    assert list(new_w) == list(old_w)
    for name in old_w:
        np.testing.assert_array_equal(new_w[name], old_w[name])
    obs = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_array_equal(new.call("call", obs), old.call("call", obs))


def test_a_non_mlp_setting_cannot_be_built_without_a_resolver():
    with pytest.raises(ConfigError, match=r"agent\.network\.type.*not a component built into rlgraph-core"):
        DQNGraph(DQNConfig(network={"type": "scaled_mlp"}), FloatBox(shape=(3,)), 2, seed=0)
