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
from rlgraph_core.config.common import OptimizerConfig
from rlgraph_core.config.sections import TrainConfig
from rlgraph_core.config.run import (
    apply_overrides,
    shipped_configs,
    validate_config,
)
from rlgraph_core.errors import ConfigError
from rlgraph_core.memories.settings import PrioritizedReplaySettings
from rlgraph_core.plugins import get_plugin_manager

from core_backend import DEFAULT_CONFIG, load_shipped_config

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
@pytest.mark.parametrize("value", ["-0.001", "0", "0.0"])
def test_a_float_learning_rate_must_be_positive(value):
    msg = config_error([f"agent.optimizer.learning_rate={value}"])
    assert "'agent.optimizer.learning_rate'" in msg and "> 0" in msg and "Value error" not in msg


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_a_learning_rate_of_nan_or_inf_is_refused(value):
    msg = config_error([f"agent.optimizer.learning_rate={value}"])
    assert "'agent.optimizer.learning_rate'" in msg and "finite" in msg


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
        lambda: TrainConfig(device=" "),  # the form of a device name is checked by the backend settings
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


@pytest.mark.parametrize("name", shipped_configs())
def test_shipped_configs_validate_and_refuse_nan_or_inf_in_every_float_field(name):
    raw = load_shipped_config(name)
    executor = raw.get("train", {}).get("executor", "local")
    if executor not in get_plugin_manager().names("executors"):
        pytest.skip(f"the config's executor '{executor}' is not installed here (tests/ray validates it)")
    try:
        full = validate_config(raw).to_dict()
    except ConfigError as exc:
        # the env extras (atari, minigrid, mujoco, box2d) are installed in the torch session, which runs
        # this test too; the core session has none of them
        if "needs the optional package" not in str(exc):
            raise
        pytest.skip(f"the config's env needs an extra that is not installed here: {str(exc)[:120]}")
    paths = [p for p in _float_paths(full) if not p.startswith("env.kwargs")]
    assert paths, "each shipped config has float fields (gamma, learning rate ...)"
    for path in paths:
        for bad in (".nan", ".inf", "-.inf"):
            msg = config_error([f"{path}={bad}"], full)
            assert f"'{path}'" in msg and "finite" in msg, (path, msg)


# --------------------------------------------------------------------------- replay and batches
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


def test_a_ppo_minibatch_larger_than_a_rollout_is_refused():
    ppo = load_shipped_config("ppo_cartpole")  # 8 envs x 32 steps = batch 256
    assert validate_config(ppo).agent.batch_size == 256
    msg = config_error(["env.num_envs=4"], ppo)
    assert "'agent.batch_size' = 256" in msg and "32 x 4 = 128" in msg and "at most 128" in msg
    msg = config_error(["agent.batch_size=100000000"], ppo)
    assert "'agent.batch_size' = 100000000" in msg


# --------------------------------------------------------------------------- epsilon
@pytest.mark.parametrize("value", ["2.0", "-0.1", "{type: linear, start: 1.5, end: 0.05, steps: 100}"])
def test_epsilon_must_be_a_probability(value):
    msg = config_error([f"agent.exploration={value}"])
    assert "'agent.exploration.epsilon'" in msg and "epsilon" in msg
    assert "between 0 and 1" in msg or "in [0, 1]" in msg


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


# --------------------------------------------------------------------------- replay memory size
def test_replay_size_estimate_counts_obs_twice_action_reward_terminal_discount():
    import gymnasium as gym

    from rlgraph_core.memories.sizing import estimate_replay_bytes, record_bytes

    obs, act = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)
    # 2 x 4 float32 + int64 action + float32 reward + bool terminal + float32 discount
    assert record_bytes(obs, act) == 2 * 16 + 8 + 4 + 1 + 4 == 49
    image, box = gym.spaces.Box(0, 255, (84, 84, 4), dtype="uint8"), gym.spaces.Box(-1, 1, (3,))
    # uint8 kept: stored as given, twice
    assert record_bytes(image, box, frames="off") == 2 * 84 * 84 * 4 + 12 + 9
    # shared frames: 4 new planes (unknown stack), their table entries, 2 x 4 int32 slots
    assert record_bytes(image, box) == 4 * (84 * 84 + 116) + 2 * 4 * 4 + 12 + 9
    # a stack of 4: one new frame per record (Pong: about 7.2 KB, against 225 KB as float32 twice)
    assert record_bytes(image, box, frame_stack=4) == 84 * 84 + 116 + 2 * 4 * 4 + 12 + 9 == 7225
    assert estimate_replay_bytes(1000, obs, act) == 49_000
    # two float64 trees of 2 x 1024 nodes for 1000 leaves
    assert estimate_replay_bytes(1000, obs, act, prioritized=True) == 49_000 + 2 * 2 * 1024 * 8


def test_a_replay_memory_that_cannot_fit_is_refused_naming_size_and_available_memory():
    import gymnasium as gym

    from rlgraph_core.memories.sizing import available_memory_bytes, check_replay_fits

    obs, act = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)
    assert check_replay_fits(1000, obs, act, available=10**6) == 49_000
    with pytest.raises(ConfigError) as info:
        check_replay_fits(10**13, obs, act, available=8 * 2**30)
    msg = str(info.value)
    assert "'agent.memory.capacity' = 10000000000000" in msg
    assert "445.7 TiB" in msg and "8.0 GiB" in msg and "49 bytes per record" in msg
    available = available_memory_bytes()
    assert available is None or available > 0


# --------------------------------------------------------------------------- --out
def test_check_out_dir_accepts_new_and_existing_writable_folders_and_creates_nothing(tmp_path):
    from rlgraph_core.execution.out_dir import check_out_dir

    assert check_out_dir(tmp_path) == tmp_path
    assert check_out_dir(str(tmp_path / "a" / "b")) == tmp_path / "a" / "b"
    assert list(tmp_path.iterdir()) == []  # the write probe leaves nothing behind


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda d: (d / "file").write_text("x") and d / "file", "is an existing file"),
        (lambda d: (d / "file").write_text("x") and d / "file" / "sub", "is not a folder"),
        (lambda d: d / ("x" * 300), "longer than"),
        (lambda d: f"{d}/a\0b", "NUL"),
        (lambda d: "", "empty"),
    ],
)
def test_check_out_dir_refuses_impossible_paths(tmp_path, make, fragment):
    from rlgraph_core.execution.out_dir import check_out_dir

    with pytest.raises(ConfigError, match="--out") as info:
        check_out_dir(make(tmp_path))
    assert fragment in str(info.value)


def test_check_out_dir_refuses_a_folder_it_cannot_write(tmp_path):
    import os

    from rlgraph_core.execution.out_dir import check_out_dir

    targets = [p for p in ("/proc/rlgraph-out", "/sys/rlgraph-out") if os.path.isdir(os.path.dirname(p))]
    if hasattr(os, "geteuid") and os.geteuid() != 0:  # permissions do not stop root
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        targets += [str(locked), str(locked / "new")]
    if not targets:
        pytest.skip("no unwritable folder to try (root, and no /proc or /sys)")
    for target in targets:
        with pytest.raises(ConfigError, match="not writable"):
            check_out_dir(target)


# --------------------------------------------------------------------------- env ids
EXAMPLE_ENV_DIR = __import__("pathlib").Path(__file__).resolve().parents[2] / "examples" / "custom_env"


@pytest.fixture
def example_env_on_path(monkeypatch):
    """``examples/custom_env`` importable; its module and registration are removed afterwards."""
    import sys

    import gymnasium as gym

    monkeypatch.syspath_prepend(str(EXAMPLE_ENV_DIR))
    sys.modules.pop("my_env", None)
    gym.registry.pop("Corridor-v0", None)
    yield
    sys.modules.pop("my_env", None)
    gym.registry.pop("Corridor-v0", None)


def test_custom_env_ids_resolve_as_class_and_as_registered_id(example_env_on_path):
    import gymnasium as gym

    from rlgraph_core.config.sections import EnvConfig
    from rlgraph_core.envs import make_eval_env, make_vector_env, resolve_env_id

    spec = resolve_env_id("my_env:Corridor")
    assert isinstance(spec, gym.envs.registration.EnvSpec) and spec.entry_point == "my_env:Corridor"
    assert resolve_env_id("my_env:Corridor-v0") == "my_env:Corridor-v0"
    assert resolve_env_id("CartPole-v1") == "CartPole-v1"
    for env_id in ("my_env:Corridor", "my_env:Corridor-v0"):
        cfg = EnvConfig(id=env_id, num_envs=2, kwargs={"length": 3})
        env = make_eval_env(cfg)
        obs, _ = env.reset(seed=0)
        assert obs.shape == (3,) and env.action_space == gym.spaces.Discrete(2)
        env.close()
        envs = make_vector_env(cfg, seed=0)
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (2, 3)
        envs.step([1, 1])
        envs.close()


@pytest.mark.parametrize(
    "env_id, fragments",
    [
        ("no_such_module_xyz:Env", ["no module named 'no_such_module_xyz'", "PYTHONPATH"]),
        ("my_env:Corridr", ["no attribute 'Corridr'", "did you mean 'my_env:Corridor'", "Corridor-v0"]),
        ("collections:OrderedDict", ["not a subclass of gymnasium.Env"]),
        ("os:getcwd", ["not a subclass of gymnasium.Env"]),
        ("a:b:c", ["one colon"]),
        ("CartPol-v1", ["not a registered gymnasium environment", "CartPole-v1", "module.path:ClassName"]),
    ],
)
def test_bad_custom_env_ids_are_clear_config_errors(example_env_on_path, env_id, fragments):
    from rlgraph_core.envs import resolve_env_id

    with pytest.raises(ConfigError) as info:
        resolve_env_id(env_id)
    msg = str(info.value)
    assert msg.startswith(f"'env.id' = '{env_id}'")
    for fragment in fragments:
        assert fragment in msg, msg


def test_a_module_that_fails_to_import_is_named(tmp_path, monkeypatch):
    from rlgraph_core.envs import resolve_env_id

    (tmp_path / "broken_env_mod.py").write_text("import not_installed_dependency_xyz\n")
    (tmp_path / "raising_env_mod.py").write_text("raise RuntimeError('boom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="needs 'not_installed_dependency_xyz'"):
        resolve_env_id("broken_env_mod:Env")
    with pytest.raises(ConfigError, match="RuntimeError: boom"):
        resolve_env_id("raising_env_mod:Env")


def test_bad_env_kwargs_are_a_config_error_naming_the_env_and_the_kwargs():
    from rlgraph_core.config.sections import EnvConfig
    from rlgraph_core.envs import make_eval_env, make_vector_env

    for vectorization in ("sync", "async"):
        cfg = EnvConfig(id="CartPole-v1", num_envs=2, vectorization=vectorization, kwargs={"foo": 1})
        with pytest.raises(ConfigError) as info:
            make_vector_env(cfg, seed=0)
        assert "'env.id' = 'CartPole-v1'" in str(info.value) and "{'foo': 1}" in str(info.value)
    with pytest.raises(ConfigError, match="unexpected keyword argument 'foo'"):
        make_eval_env(EnvConfig(id="CartPole-v1", kwargs={"foo": 1}))
