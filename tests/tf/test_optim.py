"""The tf train step against numpy versions of torch's optimizer and clipping formulas.

The numpy reference below is written from the PyTorch documentation of ``torch.optim.Adam``,
``RMSprop`` and ``SGD`` (no weight decay, no amsgrad/centered/nesterov) and of
``torch.nn.utils.clip_grad_norm_``, in float64. The tf step must follow it step by step.
"""

import warnings

import numpy as np
import pytest
import tensorflow as tf

RTOL, ATOL = 2e-5, 1e-6

rng = np.random.default_rng(3)
XS = rng.standard_normal((16, 3)).astype(np.float32)
YS = rng.standard_normal((16, 2)).astype(np.float32)
W0 = rng.standard_normal((3, 2)).astype(np.float32)
B0 = rng.standard_normal(2).astype(np.float32)


def np_loss_and_grads(w, b, x, y):
    """``mean((x w + b - y)^2)`` and its gradients w.r.t. ``w`` and ``b``."""
    err = x @ w + b - y
    g = 2.0 * err / err.size
    return float(np.mean(err**2)), [x.T @ g, g.sum(0)]


def np_clip(grads, max_norm):
    """torch.nn.utils.clip_grad_norm_: scale by min(1, max_norm / (norm + 1e-6))."""
    if max_norm is None:
        return grads
    total = np.sqrt(sum(float(np.sum(g**2)) for g in grads))
    coef = min(1.0, max_norm / (total + 1e-6))
    return [g * coef for g in grads]


class NumpyTorchOptimizer:
    """torch.optim update rules in numpy (float64)."""

    def __init__(self, spec, params):
        self.spec = spec
        self.t = 0
        self.state = [dict(m=np.zeros_like(p), v=np.zeros_like(p), buf=np.zeros_like(p)) for p in params]

    def step(self, params, grads):
        s = self.spec
        lr = s["learning_rate"]
        self.t += 1
        out = []
        for p, g, st in zip(params, grads, self.state):
            if s["type"] == "adam":
                b1, b2 = s["betas"]
                st["m"] = b1 * st["m"] + (1 - b1) * g
                st["v"] = b2 * st["v"] + (1 - b2) * g * g
                denom = np.sqrt(st["v"]) / np.sqrt(1 - b2**self.t) + s["eps"]
                p = p - lr / (1 - b1**self.t) * st["m"] / denom
            elif s["type"] == "rmsprop":
                st["v"] = s["alpha"] * st["v"] + (1 - s["alpha"]) * g * g
                avg = np.sqrt(st["v"]) + s["eps"]
                if s["momentum"] > 0:
                    st["buf"] = s["momentum"] * st["buf"] + g / avg
                    p = p - lr * st["buf"]
                else:
                    p = p - lr * g / avg
            else:
                if s["momentum"] > 0:
                    st["buf"] = s["momentum"] * st["buf"] + g if self.t > 1 else g.copy()
                    p = p - lr * st["buf"]
                else:
                    p = p - lr * g
            out.append(p)
        return out


def spec(kind, **kw):
    base = {
        "type": kind,
        "learning_rate": 0.05,
        "max_grad_norm": None,
        "eps": 1e-8,
        "betas": (0.9, 0.999),
        "alpha": 0.99,
        "momentum": 0.0,
    }
    base.update(kw)
    return base


SPECS = {
    "adam": spec("adam"),
    "adam-betas-eps": spec("adam", betas=(0.8, 0.95), eps=1e-3, learning_rate=0.1),
    "rmsprop": spec("rmsprop", alpha=0.9, eps=1e-3),
    "rmsprop-momentum": spec("rmsprop", momentum=0.9, learning_rate=0.01),
    "sgd": spec("sgd"),
    "sgd-momentum": spec("sgd", momentum=0.9),
}


def make_step(backend, opt_spec, counter=None):
    w = backend.variable("w", W0)
    b = backend.variable("b", B0)
    ops = backend.ops

    def loss_fn(x, y):
        if counter is not None:
            counter.append(1)
        err = ops.dense(x, w, b) - y
        return ops.reduce_mean(ops.square(err)), ops.abs(err)

    return backend.train_step(loss_fn, [w, b], opt_spec), w, b


# Every spec with and without clipping eagerly; in static mode (one XLA compile per case, the
# same update code) every spec once, with clipping.
FORMULA_CASES = [
    pytest.param("eager", name, clip, id=f"eager-{name}-{'clip' if clip else 'noclip'}")
    for name in SPECS
    for clip in (None, 0.5)
]
FORMULA_CASES += [pytest.param("static", name, 0.5, id=f"static-{name}-clip") for name in SPECS]


@pytest.mark.parametrize("mode,name,clip", FORMULA_CASES)
def test_steps_match_torch_formulas(mode, name, clip):
    from rlgraph_tf import TFBackend

    backend = TFBackend(mode=mode, device="cpu")
    opt_spec = dict(SPECS[name], max_grad_norm=clip)
    step, w, b = make_step(backend, opt_spec)
    ref = NumpyTorchOptimizer(opt_spec, [W0.astype(np.float64), B0.astype(np.float64)])
    params = [W0.astype(np.float64), B0.astype(np.float64)]
    for k in range(5):
        x, y = XS[k : k + 8], YS[k : k + 8]
        loss_ref, grads = np_loss_and_grads(params[0], params[1], x, y)
        params = ref.step(params, np_clip(grads, clip))
        loss, td = step(backend.to_tensor(x), backend.to_tensor(y))
        np.testing.assert_allclose(backend.to_numpy(loss), loss_ref, rtol=RTOL)
        assert backend.to_numpy(td).shape == (8, 2)
        np.testing.assert_allclose(backend.to_numpy(w), params[0], rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(backend.to_numpy(b), params[1], rtol=RTOL, atol=ATOL)


def test_clipping_actually_clips(backend):
    """With a tiny max norm an SGD step moves the parameters by exactly lr * max_norm."""
    step, w, b = make_step(backend, spec("sgd", learning_rate=1.0, max_grad_norm=1e-3))
    before = np.concatenate([backend.to_numpy(w).ravel(), backend.to_numpy(b).ravel()])
    step(backend.to_tensor(XS), backend.to_tensor(YS))
    after = np.concatenate([backend.to_numpy(w).ravel(), backend.to_numpy(b).ravel()])
    assert np.linalg.norm(after - before) == pytest.approx(1e-3, rel=1e-3)


def test_learning_rate_is_settable(backend):
    """Each SGD step moves the weights by exactly the learning rate in force times the gradient."""
    step, w, b = make_step(backend, spec("sgd", learning_rate=0.1))
    assert step.learning_rate == pytest.approx(0.1)
    for lr in (0.1, 0.0, 0.2):
        if lr != 0.1:
            step.learning_rate = lr
        before = [backend.to_numpy(w).astype(np.float64), backend.to_numpy(b).astype(np.float64)]
        _, grads = np_loss_and_grads(*before, XS, YS)
        step(backend.to_tensor(XS), backend.to_tensor(YS))
        np.testing.assert_allclose(
            backend.to_numpy(w), before[0] - lr * grads[0], rtol=RTOL, atol=ATOL, err_msg=f"lr={lr}"
        )
        np.testing.assert_allclose(
            backend.to_numpy(b), before[1] - lr * grads[1], rtol=RTOL, atol=ATOL, err_msg=f"lr={lr}"
        )


@pytest.mark.parametrize(
    "mode,name", [("eager", "adam"), ("eager", "rmsprop-momentum"), ("eager", "sgd-momentum"), ("static", "adam")]
)
def test_state_roundtrip(mode, name):
    """Optimizer state moved (as numpy) into a fresh step continues exactly like the original."""
    from rlgraph_tf import TFBackend

    backend = TFBackend(mode=mode, device="cpu")
    a, wa, ba = make_step(backend, SPECS[name])
    for k in range(3):
        a(backend.to_tensor(XS[k : k + 8]), backend.to_tensor(YS[k : k + 8]))
    state = a.get_state()
    assert all(isinstance(v, np.ndarray) for v in state.values())
    expected_slots = {
        "adam": {"step", "exp_avg", "exp_avg_sq"},
        "rmsprop-momentum": {"step", "square_avg", "momentum_buffer"},
        "sgd-momentum": {"momentum_buffer"},
    }[name]
    assert {k.split("/", 1)[1] for k in state} == expected_slots  # torch's state key names
    if "0/step" in state:
        assert float(state["0/step"]) == 3.0

    c, wc, bc = make_step(backend, SPECS[name])
    backend.assign_numpy(wc, backend.to_numpy(wa))
    backend.assign_numpy(bc, backend.to_numpy(ba))
    c.set_state(state)
    for s in (a, c):
        s(backend.to_tensor(XS[8:]), backend.to_tensor(YS[8:]))
    np.testing.assert_allclose(backend.to_numpy(wc), backend.to_numpy(wa), rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError):
        c.set_state({"0/not_a_slot": np.zeros(2)})


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
