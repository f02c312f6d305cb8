"""Backend settings: registration format, the run config's ``backend:`` section, devices, assembly."""

from __future__ import annotations

import pytest
from pydantic import Field

from rlgraph_core.assemble import assemble
from rlgraph_core.backend.settings import BackendSettings, backend_entry, backend_entry_problem
from rlgraph_core.config.run import DEFAULT_CONFIG, apply_overrides, validate_config
from rlgraph_core.errors import ConfigError
from rlgraph_core.plugins import LazyObject, PluginManager, hookimpl
from rlgraph_core.plugins.manager import providing_extra
from rlgraph_core.testing.numpy_backend import NumpyBackend


class TileSettings(BackendSettings):
    """A pretend accelerator backend: its own device names and a compile flag."""

    DEVICES = r"auto|cpu|tile(?::\d+)?"
    DEVICE_HINT = "auto, cpu or tile:N"

    fuse_kernels: bool = True
    tile_size: int = Field(8, gt=0)


class TileBackend(NumpyBackend):
    """The numpy test backend, remembering the settings it was made with."""

    def __init__(self, mode="eager", device="auto", seed=None, settings=None):
        super().__init__(mode, "cpu", seed)
        self.settings = settings


class _Backends:
    @hookimpl
    def rlgraph_backends(self):
        return {
            "numpy": NumpyBackend,  # registered the old way: no settings model
            "tile": (TileBackend, TileSettings),
            "lazy_tile": (LazyObject("rlgraph_lazy_backend_never_imported:Backend"), TileSettings),
        }


PM = PluginManager()
PM.register(_Backends(), "tile-backends")
BASE = apply_overrides(DEFAULT_CONFIG, ["train.backend=tile"])


def validate(*overrides: str):
    return validate_config(apply_overrides(BASE, list(overrides)), PM)


def error(*overrides: str) -> str:
    with pytest.raises(ConfigError) as exc:
        validate(*overrides)
    return str(exc.value)


def test_the_backend_section_is_validated_by_the_backends_own_model():
    config = validate("backend.tile_size=16")
    assert isinstance(config.backend, TileSettings)
    assert config.backend.tile_size == 16 and config.backend.fuse_kernels is True
    assert config.to_dict()["backend"] == {"tile_size": 16}  # what differs from the defaults
    # round trip: the dumped config validates to the same settings
    assert validate_config(config.to_dict(), PM).backend == config.backend


def test_a_dumped_config_switches_backends_unless_it_chose_a_backend_option():
    """A checkpoint's config.json evaluates on another backend (``--backend``) as long as its
    backend section holds only defaults; a chosen option is named in the error."""
    dumped = validate().to_dict()
    assert dumped["backend"] == {}
    assert type(validate_config(apply_overrides(dumped, ["train.backend=numpy"]), PM).backend) is BackendSettings
    with pytest.raises(ConfigError, match="backend.tile_size.*remove or replace"):
        validate_config(apply_overrides(validate("backend.tile_size=2").to_dict(), ["train.backend=numpy"]), PM)


def test_a_bad_backend_field_names_the_field_the_value_and_the_backend():
    msg = error("backend.tile_size=0")
    assert "backend.tile_size" in msg and "greater than 0" in msg and "'tile'" in msg
    msg = error("backend.jit_compile=false")
    assert "backend.jit_compile" in msg and "fuse_kernels" in msg  # the known fields
    assert "remove or replace" in msg


def test_a_backend_without_a_model_takes_only_an_empty_section():
    assert type(validate("train.backend=numpy").backend) is BackendSettings
    msg = error("train.backend=numpy", "backend.tile_size=4")
    assert "backend.tile_size" in msg and "has no settings" in msg


def test_devices_are_checked_by_the_backend_that_resolves_them():
    assert validate("train.device=tile:3").train.device == "tile:3"
    msg = error("train.device=cuda:0")
    assert "train.device" in msg and "tile:N" in msg and "'tile'" in msg
    # a backend without a model accepts any device name at validation (it checks when built)
    assert validate("train.backend=numpy", "train.device=tile:3").train.device == "tile:3"
    assert "empty" in error("train.device=' '")


def test_validation_never_imports_a_lazy_backend():
    assert validate("train.backend=lazy_tile", "backend.fuse_kernels=false").backend.fuse_kernels is False


def test_assembly_hands_the_settings_to_the_backend_that_registered_a_model():
    config = validate("backend.fuse_kernels=false", "train.num_threads=null")
    backend = assemble(config, PM).backend
    assert isinstance(backend, TileBackend) and backend.settings == config.backend
    # a config built in code with the base section still gets the backend's defaults
    backend = assemble(config.model_copy(update={"backend": BackendSettings()}), PM).backend
    assert backend.settings == TileSettings()
    # an old-style backend is made without a settings argument
    assert type(assemble(validate("train.backend=numpy", "train.num_threads=null"), PM).backend) is NumpyBackend


def test_registration_format():
    assert backend_entry(NumpyBackend) == (NumpyBackend, None)
    assert backend_entry((TileBackend, TileSettings)) == (TileBackend, TileSettings)
    assert backend_entry_problem((TileBackend, TileSettings)) is None
    assert "not a subclass" in backend_entry_problem((TileBackend, dict))
    assert "not callable" in backend_entry_problem((3, TileSettings))
    assert "neither" in backend_entry_problem("tile")


def test_install_hints_come_from_the_core_distributions_extras():
    """The hint table is rlgraph-core's [project.optional-dependencies], not names in core code."""
    import importlib.metadata as md

    extras = {
        r.split("extra ==")[-1].strip().strip("\"'")
        for r in md.requires("rlgraph-core") or []
        if "extra ==" in r and r.startswith("rlgraph-")
    }
    for extra in extras - {"all"}:
        dist, got = providing_extra(f"{extra}_something")
        assert got == extra and dist.startswith("rlgraph-")
    assert providing_extra("no_such_plugin") is None
