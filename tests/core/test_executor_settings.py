"""Executor settings: registration format, the run config's ``executor:`` section, assembly."""

from __future__ import annotations

import sys
import warnings

import pytest
from pydantic import Field

from rlgraph_core.assemble import assemble
from rlgraph_core.config.run import DEFAULT_CONFIG, apply_overrides, validate_config
from rlgraph_core.errors import ConfigError
from rlgraph_core.execution.base import Executor
from rlgraph_core.execution.local import LocalExecutor
from rlgraph_core.execution.settings import ExecutorSettings, LocalExecutorSettings, executor_entry
from rlgraph_core.plugins import LazyObject, PluginManager, hookimpl


class _NumpyBackendPlugin:
    """The framework-free test backend, so configs validate and assemble without torch."""

    @hookimpl
    def rlgraph_backends(self):
        from rlgraph_core.testing.numpy_backend import NumpyBackend

        return {"numpy": NumpyBackend}


class PoolSettings(ExecutorSettings):
    """A pretend distributed executor's settings."""

    num_workers: int = Field(2, gt=0)
    cpus_per_worker: float = Field(1.0, gt=0)


class PoolExecutor(Executor):
    """Records what it was given instead of training."""

    def run(self) -> dict:
        return {"workers": self.config.executor.num_workers}


class PlainExecutor(PoolExecutor):
    """Registered the old way: a bare class, no settings."""


class _ExecutorsPlugin:
    @hookimpl
    def rlgraph_executors(self):
        return {
            "pool": (PoolExecutor, PoolSettings),
            "plain": PlainExecutor,
            "lazy_pool": (LazyObject("rlgraph_lazy_executor_never_imported:Executor"), PoolSettings),
        }


def _pm() -> PluginManager:
    pm = PluginManager()
    pm.register(_NumpyBackendPlugin(), "numpy-backend")
    pm.register(_ExecutorsPlugin(), "pool-executors")
    return pm


PM = _pm()
BASE = apply_overrides(DEFAULT_CONFIG, ["train.backend=numpy"])


def validate(*overrides: str, pm: PluginManager = PM):
    return validate_config(apply_overrides(BASE, list(overrides)), pm)


def error(*overrides: str) -> str:
    with pytest.raises(ConfigError) as exc:
        validate(*overrides)
    return str(exc.value)


def test_local_executor_registers_an_empty_settings_model():
    entry = PluginManager().names("executors")["local"].obj
    assert entry == (LocalExecutor, LocalExecutorSettings)
    config = validate()
    assert isinstance(config.executor, LocalExecutorSettings)
    assert config.to_dict()["executor"] == {}


def test_a_plain_executor_class_is_still_accepted_and_has_no_settings():
    assert executor_entry(PlainExecutor) == (PlainExecutor, ExecutorSettings)
    config = validate("train.executor=plain")
    assert type(config.executor) is ExecutorSettings
    parts = assemble(config, PM)
    assert parts.executor_class is PlainExecutor


def test_the_executor_section_is_validated_by_the_selected_executors_model():
    config = validate("train.executor=pool", "executor.num_workers=4", "executor.cpus_per_worker=0.5")
    assert isinstance(config.executor, PoolSettings)
    assert (config.executor.num_workers, config.executor.cpus_per_worker) == (4, 0.5)
    assert config.to_dict()["executor"] == {"num_workers": 4, "cpus_per_worker": 0.5}
    again = validate_config(config.to_dict(), PM)  # round trip through the plain dict
    assert again.to_dict() == config.to_dict()
    assert validate("train.executor=pool").executor.num_workers == 2  # a missing section means every default
    assembly = assemble(config, PM)
    assert assembly.executor_class is PoolExecutor
    summary = assembly.executor_class(config, "unused", assembly=assembly).run()
    assert summary == {"workers": 4}  # executors receive the validated settings as config.executor


def test_bad_executor_settings_name_the_field_value_and_constraint():
    msg = error("train.executor=pool", "executor.num_workers=0")
    assert "'executor.num_workers' = 0" in msg and "greater than 0" in msg and "'pool'" in msg
    assert "\n" not in msg
    msg = error("train.executor=pool", "executor.num_wokers=3")
    assert "'executor.num_wokers' is not a known field" in msg and "did you mean 'num_workers'?" in msg
    msg = error("executor.num_workers=2")  # the local executor has no settings
    assert "'executor.num_workers' is not a known field" in msg and "train.executor 'local'" in msg
    msg = error("train.executor=pool", "executor=[1, 2]")
    assert "'executor'" in msg and "mapping" in msg
    msg = error("train.executor=pool", "executor.cpus_per_worker=.inf")
    assert "'executor.cpus_per_worker' = inf" in msg and "finite" in msg


def test_validating_never_imports_a_lazily_registered_executor():
    config = validate("train.executor=lazy_pool", "executor.num_workers=3")
    assert config.executor.num_workers == 3
    assert "rlgraph_lazy_executor_never_imported" not in sys.modules


def test_a_bad_settings_model_is_reported_and_only_that_entry_skipped():
    class _BadPlugin:
        @hookimpl
        def rlgraph_executors(self):
            return {"bad": (PoolExecutor, dict), "good": (PoolExecutor, PoolSettings)}

    pm = PluginManager(load_entry_points=False)
    pm.register(_BadPlugin(), "bad-executors")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        names = pm.names("executors")
    assert "good" in names and "bad" not in names
    assert any("ExecutorSettings" in f.error for f in pm.failed)


def test_executor_overrides_need_the_executor_prefix():
    raw = apply_overrides({}, ["executor.num_workers=3"])
    assert raw == {"executor": {"num_workers": 3}}


class PickySettings(ExecutorSettings):
    """Settings that check the rest of the run."""

    def validate_run(self, agent, env, train) -> None:
        if agent.type != "ppo":
            raise ConfigError(f"'train.executor' = 'picky' runs only PPO; agent.type is '{agent.type}'.")


def test_an_executor_settings_model_may_check_the_whole_run():
    class _PickyPlugin:
        @hookimpl
        def rlgraph_executors(self):
            return {"picky": (PoolExecutor, PickySettings)}

    pm = _pm()
    pm.register(_PickyPlugin(), "picky-executors")
    with pytest.raises(ConfigError, match="runs only PPO; agent.type is 'dqn'"):
        validate("train.executor=picky", pm=pm)


def test_a_ray_executor_without_rlgraph_ray_says_what_to_install():
    pm = PluginManager(load_entry_points=False)
    pm.register(_NumpyBackendPlugin(), "numpy-backend")
    with pytest.raises(
        ConfigError, match=r"'ray_sync'.*rlgraph-ray.*pip install (-e \S*rlgraph_ray|\"rlgraph-core\[ray\]\")"
    ):
        validate_config(apply_overrides(BASE, ["train.executor=ray_sync"]), pm)
