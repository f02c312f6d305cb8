"""The tf train step's own behaviour: clipping, optimizer state checks, XLA compilation and its fallback.

The update formulas (against numpy versions of torch's optimizers and clipping), settable
learning rates and optimizer-state round trips are checked by the core's conformance suite,
which tests/tf/test_tf_conformance.py runs on tf in both modes; this module reuses its data.
"""

import warnings

import numpy as np
import pytest
import tensorflow as tf

from rlgraph_core.testing.optimizer_reference import B0, SPECS, W0, XS, YS, make_step, spec
from rlgraph_core.testing.optimizer_reference import OPT_RTOL as RTOL


def test_clipping_actually_clips(backend):
    """With a tiny max norm an SGD step moves the parameters by exactly lr * max_norm."""
    step, w, b = make_step(backend, spec("sgd", learning_rate=1.0, max_grad_norm=1e-3))
    before = np.concatenate([backend.to_numpy(w).ravel(), backend.to_numpy(b).ravel()])
    step(backend.to_tensor(XS), backend.to_tensor(YS))
    after = np.concatenate([backend.to_numpy(w).ravel(), backend.to_numpy(b).ravel()])
    assert np.linalg.norm(after - before) == pytest.approx(1e-3, rel=1e-3)


@pytest.mark.parametrize("name", ["adam", "rmsprop-momentum", "sgd-momentum"])
def test_unknown_state_slot_is_a_value_error(backend, name):
    """The conformance suite's state round trip accepts a ValueError or a KeyError for a slot the
    optimizer does not have; tf raises a ValueError that names the key."""
    step, _, _ = make_step(backend, SPECS[name])
    step(backend.to_tensor(XS[:8]), backend.to_tensor(YS[:8]))
    with pytest.raises(ValueError, match="'0/not_a_slot'"):
        step.set_state({"0/not_a_slot": np.zeros(2)})


def test_unknown_optimizer_type(backend):
    with pytest.raises(ValueError, match="adam, rmsprop or sgd"):
        make_step(backend, spec("adagrad"))


def test_static_step_is_xla_compiled_or_falls_back():
    """Static mode compiles with XLA; an op XLA cannot compile falls back with a warning."""
    from rlgraph_tf import TFBackend

    backend = TFBackend(mode="static", device="cpu")
    step, w, _ = make_step(backend, spec("sgd"))
    step(backend.to_tensor(XS), backend.to_tensor(YS))
    assert step.jit_compiled

    v = backend.variable("v", W0)

    def loss_fn(x):
        host = tf.numpy_function(lambda a: a, [x], tf.float32, stateful=False)  # not XLA-compilable
        return (backend.ops.reduce_sum(backend.ops.dense(tf.reshape(host, (-1, 3)), v, B0)),)

    step = backend.train_step(loss_fn, [v], spec("sgd", learning_rate=0.1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step(backend.to_tensor(XS))
    assert any("XLA compilation of the train step failed" in str(c.message) for c in caught)
    assert not step.jit_compiled
    expected = W0 - 0.1 * np.broadcast_to(XS.sum(0)[:, None], W0.shape)
    np.testing.assert_allclose(backend.to_numpy(v), expected, rtol=RTOL, atol=1e-5)
    step(backend.to_tensor(XS))  # later calls run the plain graph without warning again


def test_eager_step_runs_python_each_call():
    from rlgraph_tf import TFBackend

    backend = TFBackend(mode="eager", device="cpu")
    counter = []
    step, _, _ = make_step(backend, spec("adam"), counter)
    for _ in range(4):
        step(backend.to_tensor(XS), backend.to_tensor(YS))
    assert len(counter) == 4 and not step.jit_compiled


def _runtime_warnings(caught):
    return [str(c.message) for c in caught if issubclass(c.category, RuntimeWarning)]


def test_shape_bug_in_a_static_loss_raises_the_tf_error_without_an_xla_warning():
    """[B, 3] * [B, 4] in a static (XLA) step: TensorFlow's shape error, no compile warning."""
    from rlgraph_tf import TFBackend

    backend = TFBackend(mode="static", device="cpu")
    v = backend.variable("v", W0)

    def loss_fn(x, y):
        return (backend.ops.reduce_mean(backend.ops.dense(x, v, B0) * y),)  # [B, 2] * [B, 3]

    step = backend.train_step(loss_fn, [v], spec("sgd"))
    x, y = backend.to_tensor(XS), backend.to_tensor(XS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for run in (lambda: step(x, y), lambda: step.compute_gradients(x, y)):
            with pytest.raises((ValueError, tf.errors.InvalidArgumentError), match=r"2 and 3|\[16,2\] vs. \[16,3\]"):
                run()
    assert not _runtime_warnings(caught)
    np.testing.assert_array_equal(backend.to_numpy(v), W0)


def test_xla_failure_then_plain_failure_raises_the_plain_error_without_a_warning():
    """XLA cannot compile the step (a host callback) and the step itself is wrong (its shapes
    only meet at run time): the plain graph's error is raised, with no XLA warning."""
    from rlgraph_tf import TFBackend

    backend = TFBackend(mode="static", device="cpu")
    v = backend.variable("v", W0)

    def loss_fn(x):
        wide = tf.numpy_function(lambda a: np.concatenate([a, a], -1), [x], tf.float32, stateful=False)
        return (backend.ops.reduce_sum(backend.ops.dense(x, v, B0) * wide),)  # [B, 2] * [B, 6]

    step = backend.train_step(loss_fn, [v], spec("sgd"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(tf.errors.InvalidArgumentError, match="Incompatible shapes") as info:
            step(backend.to_tensor(XS))
    assert not _runtime_warnings(caught)
    assert info.value.__context__ is None
    assert step._step.jit_compile  # XLA was not to blame, so it is kept
    np.testing.assert_array_equal(backend.to_numpy(v), W0)
