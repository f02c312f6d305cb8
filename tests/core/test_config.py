"""Config validation, overrides and config files: every mistake is a ConfigError that says
which field, which value, and what would have been allowed.

No framework is needed: the default config names the ``torch`` backend, and where rlgraph-torch
is not installed (the core nox session) whole configs validate on the numpy test backend instead
(``core_backend``); only tests of the torch backend's own defaults skip there.
"""

from __future__ import annotations

import json

import pytest

from rlgraph_core.config.run import (
    RunConfig,
    apply_overrides,
    load_config_file,
    validate_config,
)
from rlgraph_core.errors import ConfigError
from rlgraph_core.install_hints import extra_install_command
from rlgraph_core.plugins import PluginManager, get_plugin_manager

from core_backend import BACKEND, DEFAULT_CONFIG

# Ask the registry, not importlib: from the repository root, ``rlgraph_torch/`` is importable as
# an (empty) namespace package even where the distribution is not installed.
BACKENDS = set(get_plugin_manager().names("backends"))
HAS_TORCH_BACKEND = "torch" in BACKENDS
needs_torch = pytest.mark.skipif(
    not HAS_TORCH_BACKEND, reason="needs the 'torch' backend name, registered by rlgraph-torch"
)


def config_error(overrides: list[str], base: dict | None = None) -> str:
    """Validate DEFAULT_CONFIG (or ``base``) with ``overrides``; return the ConfigError's message."""
    with pytest.raises(ConfigError) as info:
        validate_config(apply_overrides(DEFAULT_CONFIG if base is None else base, overrides))
    return str(info.value)


# --------------------------------------------------------------------------- valid configs
def test_default_config_validates_with_its_values():
    config = validate_config(DEFAULT_CONFIG)
    assert isinstance(config, RunConfig)
    assert config.agent.type == "dqn"
    assert config.agent.gamma == DEFAULT_CONFIG["agent"]["gamma"]
    assert config.agent.memory.type == "replay"
    assert config.env.id == "CartPole-v1"
    assert config.train.backend == BACKEND  # torch, or numpy where rlgraph-torch is absent (core_backend)
    assert config.train.total_timesteps == DEFAULT_CONFIG["train"]["total_timesteps"]
    # to_dict is plain JSON and validates to the same config again
    again = validate_config(json.loads(json.dumps(config.to_dict())))
    assert again.to_dict() == config.to_dict()


@needs_torch
def test_empty_config_gets_every_default():
    config = validate_config({})
    assert config.agent.type == "dqn"
    assert config.train.loggers == ["console", "jsonl"]


def test_overrides_reach_the_validated_config():
    config = validate_config(
        apply_overrides(
            DEFAULT_CONFIG,
            [
                "agent.memory.type=prioritized_replay",
                "agent.memory.capacity=5000",
                "agent.network.hidden=[32, 16]",
                "agent.optimizer.max_grad_norm=null",
                "env.num_envs=3",
            ],
        )
    )
    assert config.agent.memory.type == "prioritized_replay"
    assert config.agent.memory.capacity == 5000
    assert config.agent.network.hidden == [32, 16]
    assert config.agent.optimizer.max_grad_norm is None
    assert config.env.num_envs == 3


# --------------------------------------------------------------------------- error paths
def test_unknown_agent_type_lists_known_agents():
    msg = config_error(["agent.type=dqnn"])
    assert "agent.type" in msg and "'dqnn'" in msg and "dqn" in msg.split("Known agents")[1]


def test_agent_type_must_be_a_name():
    msg = config_error(["agent.type=[1, 2]"])
    assert "agent.type" in msg and "[1, 2]" in msg and "dqn" in msg


def test_unknown_memory_type_lists_the_memories():
    msg = config_error(["agent.memory.type=fifo_replay_typo"])
    assert "agent.memory.type" in msg and "fifo_replay_typo" in msg
    known = msg.split("Known memories:")[1]
    assert "replay" in known and "prioritized_replay" in known
    assert "dense" not in known and "mlp" not in known  # only memories are offered


def test_memory_type_naming_a_non_memory_component_is_refused():
    msg = config_error(["agent.memory.type=dense"])
    assert "agent.memory.type" in msg and "'dense'" in msg and "not a replay memory" in msg


def test_tf_backend_missing_hints_at_the_extra():
    # A registry of rlgraph-core's built-ins alone, as in a venv without rlgraph-tf.
    core_only = PluginManager(load_entry_points=False)
    with pytest.raises(ConfigError) as info:
        validate_config(apply_overrides(DEFAULT_CONFIG, ["train.backend=tf"]), plugin_manager=core_only)
    msg = str(info.value)
    assert "train.backend" in msg and "'tf'" in msg and "Known backends" in msg
    assert extra_install_command("tf", "rlgraph-tf") in msg  # pip install -e ./rlgraph_tf from a checkout


def test_unknown_backend_lists_known_backends():
    msg = config_error(["train.backend=jaxx"])
    assert "train.backend" in msg and "'jaxx'" in msg and "Known backends" in msg
    if HAS_TORCH_BACKEND:
        assert "torch" in msg.split("Known backends")[1]


@pytest.mark.parametrize(
    "override, field, bound",
    [
        ("agent.gamma=1.5", "agent.gamma", "less than or equal to 1"),
        ("agent.gamma=0", "agent.gamma", "greater than 0"),
        ("agent.memory.capacity=-5", "agent.memory.capacity", "greater than 0"),
        ("train.total_timesteps=0", "train.total_timesteps", "greater than 0"),
    ],
)
def test_bad_numbers_name_field_value_and_range(override, field, bound):
    msg = config_error([override])
    value = override.split("=")[1]
    assert f"'{field}' = {value}" in msg and bound in msg


def test_wrong_type_names_field_and_value():
    msg = config_error(["agent.batch_size=lots"])
    assert "'agent.batch_size' = \"lots\"" in msg and "integer" in msg


def test_unknown_field_suggests_the_close_one_and_lists_the_fields():
    msg = config_error(["agent.gama=0.9"])
    assert "'agent.gama' is not a known field" in msg and "0.9" in msg
    assert "did you mean 'gamma'" in msg
    assert "batch_size" in msg.split("Known fields of 'agent'")[1]


def test_a_field_of_a_sub_section_given_one_level_up_names_its_full_path():
    """``make("ppo", learning_rate=...)`` / ``--set agent.learning_rate=...``: it is the optimizer's."""
    msg = config_error(["agent.learning_rate=0.001"])
    assert "did you mean 'agent.optimizer.learning_rate'?" in msg
    assert "did you mean 'agent.optimizer.max_grad_norm'?" in config_error(["agent.max_grad_nrom=1"])


def test_unknown_nested_field_names_its_section():
    msg = config_error(["agent.network.hiden=[8]"])
    assert "'agent.network.hiden'" in msg and "did you mean 'hidden'" in msg
    assert "Known fields of 'agent.network': type, initializer, hidden, activation" in msg


def test_unknown_top_level_key():
    with pytest.raises(ConfigError, match="trian"):
        validate_config({"trian": {}})


def test_section_that_is_not_a_mapping():
    with pytest.raises(ConfigError, match="'agent' = 5: the agent section must be a mapping"):
        validate_config({"agent": 5})


def test_unknown_env_id_suggests_the_close_match():
    msg = config_error(["env.id=CartPol-v1"])
    assert "'env.id' = 'CartPol-v1'" in msg and "Did you mean CartPole-v1" in msg


def test_bad_activation_lists_the_activations():
    msg = config_error(["agent.network.activation=relu6x"])
    assert "'agent.network.activation' = \"relu6x\"" in msg
    assert "relu" in msg and "tanh" in msg


def test_literal_choices_are_listed():
    msg = config_error(["train.mode=graph"])
    assert "'train.mode' = \"graph\"" in msg and "'eager'" in msg and "'static'" in msg


def test_unknown_logger_lists_the_loggers():
    msg = config_error(["train.loggers=[console, tensorbored]"])
    assert "train.loggers" in msg and "'tensorbored'" in msg and "jsonl" in msg


def test_several_mistakes_are_reported_together():
    msg = config_error(["agent.gamma=2", "env.num_envs=0", "train.seed=x"])
    assert "agent.gamma" in msg and "env.num_envs" in msg and "train.seed" in msg


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("agent.gamma", "must look like key.path=value"),
        ("trainer.seed=1", "must start with agent, env, train, executor, backend or multi_agent"),
        ("agent..gamma=1", "has an empty part"),
        ("train.total_timesteps=[1, 2", "is not valid YAML"),
        ("agent.gamma.inner=1", "'gamma' holds a value, not a section"),
    ],
)
def test_malformed_overrides(override, fragment):
    with pytest.raises(ConfigError) as info:
        apply_overrides(DEFAULT_CONFIG, [override])
    assert fragment in str(info.value) and override in str(info.value)


# --------------------------------------------------------------------------- overrides
def test_apply_overrides_parses_values():
    out = apply_overrides(
        {"agent": {"type": "dqn"}},
        [
            "agent.gamma=0.95",
            "agent.batch_size=32",
            "agent.lr=1e-3",
            "agent.big=1e5",
            "agent.network.hidden=[64, 32]",
            "agent.optimizer.max_grad_norm=null",
            "agent.double_q=false",
            "env.id=CartPole-v1",
            "env.kwargs={max_episode_steps: 100}",
            "train.note=a=b",
        ],
    )
    assert out["agent"]["gamma"] == 0.95 and isinstance(out["agent"]["gamma"], float)
    assert out["agent"]["batch_size"] == 32 and isinstance(out["agent"]["batch_size"], int)
    assert out["agent"]["lr"] == pytest.approx(1e-3) and isinstance(out["agent"]["lr"], float)
    assert out["agent"]["big"] == 100_000 and isinstance(out["agent"]["big"], int)
    assert out["agent"]["network"] == {"hidden": [64, 32]}
    assert out["agent"]["optimizer"] == {"max_grad_norm": None}
    assert out["agent"]["double_q"] is False
    assert out["env"] == {"id": "CartPole-v1", "kwargs": {"max_episode_steps": 100}}
    assert out["train"]["note"] == "a=b"  # only the first '=' separates key and value


def test_apply_overrides_does_not_change_its_input():
    base = {"agent": {"network": {"hidden": [8]}}}
    out = apply_overrides(base, ["agent.network.hidden=[4]"])
    assert base == {"agent": {"network": {"hidden": [8]}}}
    assert out["agent"]["network"]["hidden"] == [4]


def test_word_values_stay_strings():
    out = apply_overrides({}, ["env.id=nan", "train.backend=torch", "train.device=cuda:0"])
    assert out["env"]["id"] == "nan" and out["train"]["backend"] == "torch"
    assert out["train"]["device"] == "cuda:0"


# --------------------------------------------------------------------------- files
YAML_TEXT = """\
agent:
  type: dqn
  gamma: 0.9
  memory: {type: replay, capacity: 2048}
env:
  id: CartPole-v1
train:
  total_timesteps: 500
  loggers: [jsonl]
"""


def test_yaml_file_loads(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(YAML_TEXT)
    raw = load_config_file(path)
    assert raw["agent"]["memory"] == {"type": "replay", "capacity": 2048}
    assert raw["train"]["loggers"] == ["jsonl"]
    if HAS_TORCH_BACKEND:
        config = validate_config(raw)
        assert config.agent.gamma == 0.9 and config.train.total_timesteps == 500


def test_json_file_loads(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"agent": {"type": "dqn", "n_step": 3}, "train": {"seed": 7}}))
    raw = load_config_file(path)
    assert raw == {"agent": {"type": "dqn", "n_step": 3}, "train": {"seed": 7}}
    if HAS_TORCH_BACKEND:
        assert validate_config(raw).agent.n_step == 3


def test_bad_yaml_names_the_file(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("agent:\n  type: dqn\n   gamma: [0.9\n")
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert str(path) in str(info.value) and "not valid YAML" in str(info.value)


def test_bad_json_names_the_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"agent": {"type": "dqn",}}')
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert str(path) in str(info.value) and "not valid JSON" in str(info.value)


def test_file_that_is_not_a_mapping_names_the_file(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- agent\n- env\n")
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert str(path) in str(info.value) and "not a mapping" in str(info.value)


def test_missing_file_names_the_file(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_config_file(path)
    assert str(path) in str(info.value) and "does not exist" in str(info.value)


@needs_torch
def test_the_default_configs_agent_is_the_agent_models_defaults():
    """One default: what ``rlgraph config`` prints for the agent (the shipped default config) is
    what ``DQNConfig()`` and ``rlgraph_core.make("dqn")`` get."""
    from rlgraph_core.agents.dqn import DQNConfig
    from rlgraph_core.config.run import DEFAULT_CONFIG

    printed = validate_config(DEFAULT_CONFIG).to_dict()["agent"]
    assert printed == validate_config({"agent": {"type": "dqn"}}).to_dict()["agent"]
    plain = DQNConfig().model_dump(mode="json")
    assert {k: v for k, v in printed.items() if k != "memory"} == {k: v for k, v in plain.items() if k != "memory"}
