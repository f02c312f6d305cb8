"""The jax backend's ``backend:`` settings: registered with the backend, validated without JAX, applied."""

import pytest

pytest.importorskip("jax")

from rlgraph_core.assemble import assemble  # noqa: E402
from rlgraph_core.backend.settings import backend_entry  # noqa: E402
from rlgraph_core.config.run import DEFAULT_CONFIG, apply_overrides, validate_config  # noqa: E402
from rlgraph_core.errors import ConfigError  # noqa: E402
from rlgraph_core.plugins import get_plugin_manager  # noqa: E402
from rlgraph_jax.backend import JaxBackend  # noqa: E402
from rlgraph_jax.settings import JaxSettings  # noqa: E402
from rlgraph_jax.state import StatefulFunction  # noqa: E402


def jax_config(*overrides: str):
    return validate_config(apply_overrides(DEFAULT_CONFIG, ["train.backend=jax", *overrides]))


def test_registered_with_its_settings_model():
    factory, model = backend_entry(get_plugin_manager().names("backends")["jax"].obj)
    assert factory.resolve() is JaxBackend and model is JaxSettings
    assert JaxSettings() == JaxSettings(enable_x64=False, jit_inference=True)


def test_the_section_reaches_the_backend():
    config = jax_config("train.mode=static", "backend.jit_inference=false")
    backend = assemble(config, get_plugin_manager()).backend
    assert backend.jit_inference is False and backend.function(len) is len  # op by op
    default = assemble(jax_config("train.mode=static"), get_plugin_manager()).backend
    assert isinstance(default.function(len), StatefulFunction)


def test_bad_settings_and_devices_fail_at_validation():
    with pytest.raises(ConfigError, match=r"'backend.jit_compile' is not a known field.*enable_x64, jit_inference"):
        jax_config("backend.jit_compile=false")
    with pytest.raises(ConfigError, match=r"'train.device' = \"tpu\".*gpu:N"):
        jax_config("train.device=tpu")
    assert jax_config("train.device=gpu:1").train.device == "gpu:1"  # whether JAX sees it: when built
