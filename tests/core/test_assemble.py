"""The assembly step, the agent constructor contract and the self-describing run config."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import pytest
import yaml
from pydantic import ValidationError

from rlgraph_core.agents.base import AGENT_CONSTRUCTOR_KWARGS, Agent, check_agent_class
from rlgraph_core.agents.dqn import DQNConfig
from rlgraph_core.agents.ppo import PPOConfig
from rlgraph_core.assemble import assemble
from rlgraph_core.config.run import (
    DEFAULT_CONFIG,
    DEFAULT_CONFIG_NAME,
    apply_overrides,
    load_shipped_config,
    run_config_model,
    shipped_configs,
    validate_config,
)
from rlgraph_core.errors import ConfigError, PluginError
from rlgraph_core.plugins import PluginManager, hookimpl

REPO_CONFIGS = Path(__file__).resolve().parents[2] / "configs"


class _NumpyBackendPlugin:
    """Registers the framework-free test backend, so configs validate in a venv without torch."""

    @hookimpl
    def rlgraph_backends(self):
        from rlgraph_core.testing.numpy_backend import NumpyBackend

        return {"numpy": NumpyBackend}


PM = PluginManager()
PM.register(_NumpyBackendPlugin(), "numpy-backend")
BASE = apply_overrides(DEFAULT_CONFIG, ["train.backend=numpy"])


def validate(raw, overrides=()):
    """Validate ``raw`` with ``overrides`` against :data:`PM` (which knows the numpy backend)."""
    return validate_config(apply_overrides(raw, list(overrides)), PM)


def test_every_registered_agent_follows_the_constructor_contract():
    pm = PluginManager()
    agents = pm.names("agents")
    assert {"dqn", "ppo", "a2c", "sac"} <= set(agents)
    for name, entry in agents.items():
        check_agent_class(entry.obj[0], name)  # raises if a keyword of the contract is missing


class _OldStyleAgent(Agent):
    """An agent whose constructor predates the contract (no memory/components keywords)."""

    def __init__(self, config, observation_space, action_space, backend, seed=0):
        super().__init__(config, observation_space, action_space, backend, seed=seed)

    act = observe = update = variables = None


def test_an_agent_breaking_the_constructor_contract_is_refused_by_name():
    with pytest.raises(PluginError) as err:
        check_agent_class(_OldStyleAgent, "old_style")
    msg = str(err.value)
    lacking = msg.split("lacks the keyword argument(s) ")[1].split(".")[0]
    assert "'old_style'" in msg and lacking == "num_envs, memory, components"
    assert set(AGENT_CONSTRUCTOR_KWARGS) == {"seed", "num_envs", "memory", "components"}


class _OldStyleConfig(DQNConfig):
    type: Literal["old_style"] = "old_style"


class _OldStylePlugin:
    @hookimpl
    def rlgraph_agents(self):
        return {"old_style": (_OldStyleAgent, _OldStyleConfig)}


def test_assemble_refuses_a_plugin_agent_that_breaks_the_constructor_contract():
    pm = PluginManager(load_entry_points=False)
    pm.register(_OldStylePlugin(), "old-style-agents")
    config = run_config_model(pm).model_validate({"agent": {"type": "old_style"}})
    assert isinstance(config.agent, _OldStyleConfig)
    with pytest.raises(PluginError, match="'old_style'.*lacks the keyword argument"):
        assemble(config, pm)


def test_run_config_agent_is_a_discriminated_union_of_the_registry():
    pm = PluginManager()
    model = run_config_model(pm)
    assert run_config_model(pm) is model  # made once per registry
    dqn = model.model_validate({"agent": {"type": "dqn"}})
    ppo = model.model_validate({"agent": {"type": "ppo", "n_steps": 16}})
    assert isinstance(dqn.agent, DQNConfig) and isinstance(ppo.agent, PPOConfig) and ppo.agent.n_steps == 16
    with pytest.raises(ValidationError):
        model.model_validate({"agent": {"type": "dqn", "n_steps": 16}})  # a PPO field on DQN
    schema = model.model_json_schema()
    mapping = schema["properties"]["agent"]["discriminator"]["mapping"]
    assert set(mapping) == set(pm.names("agents"))


def test_to_dict_is_pydantic_and_round_trips():
    config = validate(BASE)
    assert config.to_dict() == config.model_dump(mode="json")
    again = validate(config.to_dict())
    assert again.to_dict() == config.to_dict()


def test_memory_section_is_validated_by_the_memory_settings_model():
    config = validate(BASE, ["agent.memory.type=prioritized_replay", "agent.memory.alpha=0.7"])
    assert config.agent.memory.alpha == 0.7 and config.to_dict()["agent"]["memory"]["alpha"] == 0.7
    with pytest.raises(ConfigError, match=r"agent\.memory\.alpha"):
        validate(BASE, ["agent.memory.alpha=0.7"])  # uniform replay has no alpha


def test_default_run_is_the_shipped_config():
    assert DEFAULT_CONFIG_NAME in shipped_configs()
    shipped = yaml.safe_load((REPO_CONFIGS / f"{DEFAULT_CONFIG_NAME}.yaml").read_text())
    assert DEFAULT_CONFIG == shipped == load_shipped_config(DEFAULT_CONFIG_NAME)
    assert {p.stem for p in REPO_CONFIGS.glob("*.yaml")} == set(shipped_configs())
    with pytest.raises(ConfigError, match="ppo_cartpole"):
        load_shipped_config("ppo_cartpol")


def test_unknown_preprocessor_component_fails_validation_with_known_names():
    with pytest.raises(ConfigError, match=r"agent\.preprocessor\.type.*box_normalize"):
        validate(BASE, ["agent.preprocessor=box_normalise"])
    config = validate(BASE, ["agent.preprocessor=box_normalize"])
    assert config.agent.preprocessor.type == "box_normalize"
    assert validate(BASE, ["agent.preprocessor=none"]).agent.preprocessor is None


def test_builtin_memory_is_made_without_a_registry_and_plugin_memory_is_refused_clearly():
    from rlgraph_core.agents.off_policy import builtin_memory
    from rlgraph_core.memories import PrioritizedReplay
    from rlgraph_core.memories.settings import MemorySettings, PrioritizedReplaySettings

    memory = builtin_memory(PrioritizedReplaySettings(capacity=8, alpha=0.5), seed=0)
    assert isinstance(memory, PrioritizedReplay) and memory.capacity == 8 and memory.alpha == 0.5
    with pytest.raises(ConfigError, match="assemble"):
        builtin_memory(MemorySettings(type="fifo_replay", capacity=8), seed=0)
    assert np.isfinite(memory.max_priority)


def test_agents_declare_what_executors_may_rely_on():
    from rlgraph_core.agents.support import CAPABILITIES, agent_capabilities

    declared = {name: agent_capabilities(entry.obj[1].model_construct()) for name, entry in PM.names("agents").items()}
    assert declared["ppo"] == declared["a2c"] == {"rollouts"}
    assert declared["impala"] == {"rollouts", "vtrace"}
    assert declared["dqn"] == {"replay", "exploration"} and declared["sac"] == {"replay"}
    assert set().union(*declared.values()) <= set(CAPABILITIES)
