"""TFBackend basics: registry, tensors, variables, devices, gradients, no global state."""

import numpy as np
import pytest
import tensorflow as tf

from rlgraph_core.backend import Backend
from rlgraph_core.backend.settings import backend_entry
from rlgraph_core.assemble import make_backend
from rlgraph_core.errors import ConfigError
from rlgraph_core.plugins import get_plugin_manager
from rlgraph_tf import TFBackend
from rlgraph_tf.settings import TFSettings


def test_registered_as_tf_plugin():
    entry = get_plugin_manager().names("backends")["tf"]
    factory, settings_model = backend_entry(entry.obj)
    assert factory.resolve() is TFBackend and entry.distribution == "rlgraph-tf"
    assert settings_model is TFSettings and settings_model().jit_compile is True
    assert TFBackend(settings=TFSettings(jit_compile=False)).jit_compile is False
    for mode in ("eager", "static"):
        backend = make_backend("tf", mode=mode, device="cpu", seed=1)
        assert isinstance(backend, Backend) and backend.name == "tf" and backend.mode == mode
        assert backend.describe() == f"tf ({mode}, cpu)"


def test_bad_mode_and_device_are_config_errors():
    with pytest.raises(ConfigError, match="eager"):
        TFBackend(mode="graph")
    with pytest.raises(ConfigError, match="not known to the tf backend"):
        TFBackend(device="tpu-ish")
    if not tf.config.list_physical_devices("GPU"):
        with pytest.raises(ConfigError, match="sees 0 GPU"):
            TFBackend(device="cuda:0")
        assert TFBackend(device="auto").device == "cpu"


@pytest.mark.parametrize(
    "value,dtype,expected",
    [
        (np.zeros(3, np.float64), None, tf.float32),
        (np.zeros(3, np.float32), None, tf.float32),
        (np.zeros(3, np.int32), None, tf.int64),
        (np.zeros(3, np.int64), None, tf.int64),
        (np.zeros(3, bool), None, tf.bool),
        (np.zeros(3, np.uint8), None, tf.uint8),
        (1.5, None, tf.float32),
        (3, None, tf.int64),
        (True, None, tf.bool),
        (np.zeros(3, np.int64), "float32", tf.float32),
        (np.ones(3, np.float32), "bool", tf.bool),
    ],
)
def test_to_tensor_dtypes(backend, value, dtype, expected):
    t = backend.to_tensor(value, dtype)
    assert t.dtype == expected
    np.testing.assert_array_equal(backend.to_numpy(t), np.asarray(value).astype(expected.as_numpy_dtype))
    assert backend.to_tensor(t) is t


def test_variables(backend):
    v = backend.variable("dqn/policy/dense_0/W", np.arange(6, dtype=np.float64).reshape(2, 3))
    assert isinstance(v, tf.Variable) and v.dtype == tf.float32 and v.trainable
    assert "dqn/policy/dense_0/W" in v.name
    snapshot = backend.to_numpy(v)
    backend.assign_numpy(v, np.ones((2, 3)))
    np.testing.assert_array_equal(snapshot, np.arange(6).reshape(2, 3))  # to_numpy copied
    np.testing.assert_array_equal(backend.to_numpy(v), np.ones((2, 3)))
    frozen = backend.variable("scale", np.ones(2, np.float32), trainable=False)
    assert not frozen.trainable
    ints = backend.variable("count", np.zeros(2, np.int32))
    assert ints.dtype == tf.int64


def test_gradients(backend):
    w = backend.variable("w", np.array([1.0, -2.0], np.float32))
    unused = backend.variable("u", np.zeros(3, np.float32))

    def loss(x):
        return (backend.ops.reduce_sum(w * w * x), w)

    value, (gw, gu) = backend.gradients(loss, [w, unused], backend.to_tensor(np.array([3.0, 0.5], np.float32)))
    assert isinstance(value, np.ndarray) and float(value) == pytest.approx(3.0 + 2.0)
    np.testing.assert_allclose(gw, [6.0, -2.0])
    np.testing.assert_array_equal(gu, np.zeros(3))


def test_listing_plugins_does_not_import_tensorflow():
    """Registration is lazy: collecting the registry in a fresh process leaves TF unimported."""
    import subprocess
    import sys

    code = (
        "import sys; from rlgraph_core.plugins import get_plugin_manager; "
        "names = get_plugin_manager().names('backends'); assert 'tf' in names, names; "
        "print('tensorflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_no_global_tensorflow_state_changed():
    """Building backends and agents leaves TF's process-wide settings at their defaults."""
    keras = pytest.importorskip("keras")
    before = (
        keras.mixed_precision.global_policy().name,
        tf.config.functions_run_eagerly(),
        tf.config.threading.get_intra_op_parallelism_threads(),
    )
    for mode in ("eager", "static"):
        b = TFBackend(mode=mode, device="cpu")
        b.function(lambda x: x + 1.0)(b.to_tensor(np.zeros(2, np.float32)))
    after = (
        keras.mixed_precision.global_policy().name,
        tf.config.functions_run_eagerly(),
        tf.config.threading.get_intra_op_parallelism_threads(),
    )
    assert before[:2] == ("float32", False)  # the defaults, untouched by earlier tests
    assert after == before


@pytest.mark.parametrize("mode", ["eager", "static"])
def test_device_pinning_path(mode):
    """The tf.device path taken when a GPU is visible, exercised here on the CPU."""
    from rlgraph_core.agents.dqn import DQNAgent, DQNConfig
    from rlgraph_core.spaces import Discrete, FloatBox

    backend = TFBackend(mode=mode, device="cpu")
    backend._pin = True  # what a host with a visible GPU does, for any requested device
    t = backend.to_tensor(np.ones(3, np.float32))
    assert t.device.endswith("CPU:0")
    v = backend.variable("v", np.zeros(3, np.float32))
    assert v.device.endswith("CPU:0")
    agent = DQNAgent(
        DQNConfig(network={"hidden": [8]}, batch_size=4, exploration=0.0),
        FloatBox(shape=(4,)),
        Discrete(2),
        backend,
        seed=0,
    )
    obs = np.zeros((4, 4), np.float32)
    assert agent.act(obs).shape == (4,)
    batch = {
        "obs": obs,
        "actions": np.zeros(4, np.int64),
        "rewards": np.ones(4, np.float32),
        "next_obs": obs,
        "terminals": np.zeros(4, bool),
    }
    loss = agent.update(batch)["loss"]
    assert np.isfinite(backend.to_numpy(loss))
    assert agent.train_step.jit_compiled == (mode == "static")
