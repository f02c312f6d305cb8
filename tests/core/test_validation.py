"""Values that used to pass validation and then failed or misbehaved at run time are refused
when the config is validated, with one message naming the field, the value and what is allowed.

(Checks that need the environment's spaces, a backend or the file system are in
``tests/torch/test_validation.py``.)
"""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from rlgraph_core.agents.dqn import DQNConfig
from rlgraph_core.components.schedules import LinearSchedule, check_schedule_range
from rlgraph_core.config.common import OptimizerConfig, TrainConfig
from rlgraph_core.config.run import (
    DEFAULT_CONFIG,
    apply_overrides,
    load_shipped_config,
    shipped_configs,
    validate_config,
)
from rlgraph_core.errors import ConfigError
from rlgraph_core.memories.settings import PrioritizedReplaySettings
from rlgraph_core.plugins import get_plugin_manager

needs_torch = pytest.mark.skipif(
    "torch" not in get_plugin_manager().names("backends"),
    reason="whole configs name the 'torch' backend, registered by rlgraph-torch",
)


def config_error(overrides: list[str], base: dict | None = None) -> str:
    """The ConfigError message of DEFAULT_CONFIG (or ``base``) with ``overrides``."""
    with pytest.raises(ConfigError) as info:
        validate_config(apply_overrides(DEFAULT_CONFIG if base is None else base, overrides))
    return str(info.value)


# --------------------------------------------------------------------------- learning rates
@needs_torch
@pytest.mark.parametrize("value", ["-0.001", "0", "0.0"])
def test_a_float_learning_rate_must_be_positive(value):
    msg = config_error([f"agent.optimizer.learning_rate={value}"])
    assert "'agent.optimizer.learning_rate'" in msg and "> 0" in msg and "Value error" not in msg


@needs_torch
@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_a_learning_rate_of_nan_or_inf_is_refused(value):
    msg = config_error([f"agent.optimizer.learning_rate={value}"])
    assert "'agent.optimizer.learning_rate'" in msg and "finite" in msg


@needs_torch
def test_a_learning_rate_schedule_may_decay_to_zero_but_not_below():
    ok = validate_config(
        apply_overrides(
            DEFAULT_CONFIG, ["agent.optimizer.learning_rate={type: linear, start: 1.0e-3, end: 0, steps: 10}"]
        )
    )
    assert ok.agent.optimizer.learning_rate.end == 0
    msg = config_error(["agent.optimizer.learning_rate={type: linear, start: 1.0e-3, end: -1.0e-4, steps: 10}"])
    assert "'agent.optimizer.learning_rate'" in msg and "from 0.001 to -0.0001" in msg
    msg = config_error(["agent.optimizer.learning_rate={type: constant, value: 0}"])
    assert "> 0" in msg
    msg = config_error(["agent.optimizer.learning_rate={type: linear, start: 0, end: 0, steps: 10}"])
    assert "rise above 0" in msg
    msg = config_error(["agent.optimizer.learning_rate={type: exponential, start: 0, end: 1.0e-3, steps: 10}"])
    assert "start above 0" in msg
    msg = config_error(["agent.optimizer.learning_rate={type: linear, start: 1.0e-3, end: .nan, steps: 10}"])
    assert "'agent.optimizer.learning_rate.end'" in msg and "finite" in msg


@needs_torch
@pytest.mark.parametrize("name", ["ppo_cartpole", "a2c_cartpole", "sac_pendulum"])
def test_every_agent_checks_its_learning_rate(name):
    msg = config_error(["agent.optimizer.learning_rate=-1.0e-3"], load_shipped_config(name))
    assert "'agent.optimizer.learning_rate' = -0.001" in msg


def test_config_models_refuse_nan_and_inf_when_built_directly():
    for make in (
        lambda: OptimizerConfig(learning_rate=math.nan),
        lambda: OptimizerConfig(learning_rate=-1e-3),
        lambda: OptimizerConfig(betas=(0.9, math.inf)),
        lambda: DQNConfig(gamma=math.nan),
        lambda: DQNConfig(exploration=1.5),
        lambda: PrioritizedReplaySettings(alpha=math.inf),
        lambda: LinearSchedule(start=math.nan, end=0.0, steps=10),
        lambda: TrainConfig(target_return=math.inf),
        lambda: TrainConfig(device="banana"),
    ):
        with pytest.raises(ValidationError):
            make()


# --------------------------------------------------------------------------- NaN/inf anywhere
def _float_paths(node, path=()):
    if isinstance(node, float):
        yield ".".join(path)
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from _float_paths(v, (*path, k))


@needs_torch
@pytest.mark.parametrize("name", shipped_configs())
def test_shipped_configs_validate_and_refuse_nan_or_inf_in_every_float_field(name):
    raw = load_shipped_config(name)
    full = validate_config(raw).to_dict()
    paths = [p for p in _float_paths(full) if not p.startswith("env.kwargs")]
    assert paths, "each shipped config has float fields (gamma, learning rate ...)"
    for path in paths:
        for bad in (".nan", ".inf", "-.inf"):
            msg = config_error([f"{path}={bad}"], full)
            assert f"'{path}'" in msg and "finite" in msg, (path, msg)


# --------------------------------------------------------------------------- replay and batches
@needs_torch
def test_a_replay_memory_smaller_than_a_batch_is_refused():
    msg = config_error(["agent.memory.capacity=10"])
    assert "'agent.memory.capacity' = 10 is smaller than 'agent.batch_size' = 64" in msg
    assert "at least 64" in msg
    msg = config_error(["agent.batch_size=100000000"])
    assert "'agent.batch_size' = 100000000" in msg
    msg = config_error(["agent.memory.capacity=100"], load_shipped_config("sac_pendulum"))  # SAC batch 256
    assert "'agent.batch_size' = 256" in msg
    # equal is enough: the memory holds one batch
    assert validate_config(apply_overrides(DEFAULT_CONFIG, ["agent.memory.capacity=64"])).agent.memory.capacity == 64


@needs_torch
def test_a_ppo_minibatch_larger_than_a_rollout_is_refused():
    ppo = load_shipped_config("ppo_cartpole")  # 8 envs x 32 steps = batch 256
    assert validate_config(ppo).agent.batch_size == 256
    msg = config_error(["env.num_envs=4"], ppo)
    assert "'agent.batch_size' = 256" in msg and "32 x 4 = 128" in msg and "at most 128" in msg
    msg = config_error(["agent.batch_size=100000000"], ppo)
    assert "'agent.batch_size' = 100000000" in msg


# --------------------------------------------------------------------------- epsilon
@needs_torch
@pytest.mark.parametrize("value", ["2.0", "-0.1", "{type: linear, start: 1.5, end: 0.05, steps: 100}"])
def test_epsilon_must_be_a_probability(value):
    msg = config_error([f"agent.exploration={value}"])
    assert "'agent.exploration'" in msg and "epsilon" in msg
    assert "between 0 and 1" in msg or "in [0, 1]" in msg


@needs_torch
def test_epsilon_at_the_bounds_is_fine():
    for value in ("0", "1.0", "{type: exponential, start: 1.0, end: 0.0, steps: 100}"):
        validate_config(apply_overrides(DEFAULT_CONFIG, [f"agent.exploration={value}"]))


def test_check_schedule_range_names_the_parameter():
    with pytest.raises(ValueError, match="the thing must be a finite number between 0 and 1, got 2"):
        check_schedule_range(2.0, "the thing", 0.0, 1.0)
    assert check_schedule_range(0.5, "the thing", 0.0, 1.0) == 0.5


# --------------------------------------------------------------------------- device names
@needs_torch
@pytest.mark.parametrize("device", ["banana", "cuda:-1", "cuda:x", "tpu", "cpu:1"])
def test_an_unknown_device_name_is_refused_before_anything_is_built(device):
    msg = config_error([f"train.device={device}"])
    assert "'train.device'" in msg and device in msg and "cuda:N" in msg


@needs_torch
@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:1", "gpu", "gpu:0", "CUDA:0"])
def test_known_device_names_validate(device):
    assert validate_config(apply_overrides(DEFAULT_CONFIG, [f"train.device={device}"])).train.device == device
