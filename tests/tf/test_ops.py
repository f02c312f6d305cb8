"""Every entry of OPS_CONTRACT on the tf backend against a numpy reference, eager and traced.

``CASES`` maps each contract name to cases ``(fn(ops, *tensors), numpy inputs, expected)``; a
test checks that ``CASES`` covers the contract exactly, so a new contract op cannot go untested.
In-place ops (``assign``, ``polyak``) and gradient behaviour have their own tests below.
"""

import numpy as np
import pytest

from rlgraph_core.backend import OPS_CONTRACT

RTOL, ATOL = 1e-5, 1e-6

rng = np.random.default_rng(0)
X = rng.standard_normal((5, 3)).astype(np.float32)
Y = rng.standard_normal((5, 3)).astype(np.float32)
X3 = rng.standard_normal((2, 4, 3)).astype(np.float32)
POS = rng.uniform(0.1, 3.0, (5, 3)).astype(np.float32)
W = rng.standard_normal((3, 4)).astype(np.float32)
B = rng.standard_normal(4).astype(np.float32)
IDX = np.array([0, 2, 1, 2, 0], np.int64)
COND = rng.random((5, 3)) < 0.5
BIG = np.array([[-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 4.0]], np.float32)


def _np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _np_huber(x, delta):
    a = np.abs(x)
    return np.where(a <= delta, 0.5 * x * x, delta * (a - 0.5 * delta))


NP_ACTIVATIONS = {
    "relu": lambda x: np.maximum(x, 0),
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
    "softplus": lambda x: np.logaddexp(0, x),
    "leaky_relu": lambda x: np.where(x >= 0, x, 0.2 * x),
    "linear": lambda x: x,
}

CASES = {
    "dense": [
        (lambda o, x, w, b: o.dense(x, w, b), (X, W, B), X @ W + B),
        (lambda o, x, w, b: o.dense(x, w, b), (X3, W, B), X3 @ W + B),
    ],
    "activation": [
        (lambda o, x, _n=name: o.activation(_n, x), (BIG * 2,), fn(BIG * 2).astype(np.float32))
        for name, fn in NP_ACTIVATIONS.items()
    ],
    "reduce_sum": [
        (lambda o, x: o.reduce_sum(x), (X,), X.sum()),
        (lambda o, x: o.reduce_sum(x, axis=0), (X,), X.sum(0)),
        (lambda o, x: o.reduce_sum(x, axis=-1, keepdims=True), (X,), X.sum(-1, keepdims=True)),
        (lambda o, x: o.reduce_sum(x, axis=(0, 2)), (X3,), X3.sum((0, 2))),
    ],
    "reduce_mean": [
        (lambda o, x: o.reduce_mean(x), (X,), X.mean()),
        (lambda o, x: o.reduce_mean(x, axis=1), (X,), X.mean(1)),
        (lambda o, x: o.reduce_mean(x, axis=-1, keepdims=True), (X3,), X3.mean(-1, keepdims=True)),
    ],
    "reduce_max": [
        (lambda o, x: o.reduce_max(x), (X,), X.max()),
        (lambda o, x: o.reduce_max(x, axis=0), (X,), X.max(0)),
        (lambda o, x: o.reduce_max(x, axis=-1, keepdims=True), (X,), X.max(-1, keepdims=True)),
    ],
    "argmax": [
        (lambda o, x: o.argmax(x), (X,), X.argmax(-1)),
        (lambda o, x: o.argmax(x, axis=0), (X,), X.argmax(0)),
        (lambda o, x: o.argmax(x), (np.array([[1.0, 3.0, 3.0]], np.float32),), np.array([1])),  # first on ties
    ],
    "gather_last": [
        (lambda o, x, i: o.gather_last(x, i), (X, IDX), X[np.arange(5), IDX]),
        (
            lambda o, x, i: o.gather_last(x, i),
            (X3, np.array([[0, 1, 2, 0], [2, 2, 1, 0]])),
            np.take_along_axis(X3, np.array([[0, 1, 2, 0], [2, 2, 1, 0]])[..., None], -1)[..., 0],
        ),
        (  # -inf entries (masked logits) neither leak into other rows nor turn into nan
            lambda o, x, i: o.gather_last(x, i),
            (np.array([[0.0, -np.inf, 1.0], [-np.inf, 2.0, 3.0]], np.float32), np.array([1, 1], np.int64)),
            np.array([-np.inf, 2.0], np.float32),
        ),
    ],
    "take": [
        (lambda o, x, i: o.take(x, i), (X, np.array([4, 0, 0, 2], np.int64)), X[[4, 0, 0, 2]]),
        (lambda o, x, i: o.take(x, i), (X3, np.array([1], np.int64)), X3[[1]]),
        (lambda o, x, i: o.take(x, i), (IDX, np.array([2, 1], np.int64)), IDX[[2, 1]]),
    ],
    "one_hot": [(lambda o, i: o.one_hot(i, 3), (IDX,), np.eye(3, dtype=np.float32)[IDX])],
    "where": [
        (lambda o, c, a, b: o.where(c, a, b), (COND, X, Y), np.where(COND, X, Y)),
        (lambda o, c, a, b: o.where(c, a, b), (COND[:, 0], IDX, IDX * 0 + 7), np.where(COND[:, 0], IDX, 7)),
    ],
    "abs": [(lambda o, x: o.abs(x), (X,), np.abs(X))],
    "square": [(lambda o, x: o.square(x), (X,), X * X)],
    "sqrt": [(lambda o, x: o.sqrt(x), (POS,), np.sqrt(POS))],
    "exp": [(lambda o, x: o.exp(x), (X,), np.exp(X))],
    "log": [(lambda o, x: o.log(x), (POS,), np.log(POS))],
    "minimum": [
        (lambda o, a, b: o.minimum(a, b), (X, Y), np.minimum(X, Y)),
        (lambda o, a: o.minimum(a, 0.5), (X,), np.minimum(X, 0.5)),
    ],
    "maximum": [
        (lambda o, a, b: o.maximum(a, b), (X, Y), np.maximum(X, Y)),
        (lambda o, a: o.maximum(a, -0.5), (X,), np.maximum(X, -0.5)),
    ],
    "clip": [(lambda o, x: o.clip(x, -0.5, 0.7), (X,), np.clip(X, -0.5, 0.7))],
    "stop_gradient": [(lambda o, x: o.stop_gradient(x), (X,), X)],
    "cast": [
        (lambda o, x: o.cast(x * 3, "int64"), (X,), (X * 3).astype(np.int64)),
        (lambda o, i: o.cast(i, "float32"), (IDX,), IDX.astype(np.float32)),
        (lambda o, c: o.cast(c, "float32"), (COND,), COND.astype(np.float32)),
        (lambda o, i: o.cast(i, "bool"), (IDX,), IDX.astype(bool)),
    ],
    "huber": [
        (lambda o, x: o.huber(x, 1.0), (BIG,), _np_huber(BIG, 1.0)),
        (lambda o, x: o.huber(x, 2.0), (BIG,), _np_huber(BIG, 2.0)),
    ],
    "softmax": [
        (lambda o, x: o.softmax(x), (X,), _np_softmax(X)),
        (lambda o, x: o.softmax(x, axis=0), (X,), _np_softmax(X, 0)),
    ],
    "log_softmax": [
        (lambda o, x: o.log_softmax(x), (X * 10,), np.log(_np_softmax(X * 10))),
    ],
    "concat": [
        (lambda o, a, b: o.concat([a, b]), (X, Y), np.concatenate([X, Y], -1)),
        (lambda o, a, b: o.concat([a, b], axis=0), (X, Y), np.concatenate([X, Y], 0)),
    ],
    "stack": [
        (lambda o, a, b: o.stack([a, b]), (X, Y), np.stack([X, Y])),
        (lambda o, a, b: o.stack([a, b], axis=-1), (X, Y), np.stack([X, Y], -1)),
    ],
    "reshape": [
        (lambda o, x: o.reshape(x, (3, 5)), (X,), X.reshape(3, 5)),
        (lambda o, x: o.reshape(x, (-1,)), (X3,), X3.reshape(-1)),
    ],
    "transpose": [(lambda o, x: o.transpose(x, (2, 0, 1)), (X3,), X3.transpose(2, 0, 1))],
    "expand_dims": [
        (lambda o, x: o.expand_dims(x, 0), (X,), X[None]),
        (lambda o, x: o.expand_dims(x, -1), (X,), X[..., None]),
    ],
    "squeeze": [(lambda o, x: o.squeeze(x, 1), (X[:, :1],), X[:, 0])],
    "zeros_like": [
        (lambda o, x: o.zeros_like(x), (X,), np.zeros_like(X)),
        (lambda o, i: o.zeros_like(i), (IDX,), np.zeros_like(IDX)),
    ],
    "constant": [
        (lambda o, x: x + o.constant(2.5), (X,), X + 2.5),
        (lambda o, i: i + o.constant([1, 2, 3, 4, 5], "int64"), (IDX,), IDX + np.arange(1, 6)),
        (lambda o, x: o.constant(True, "bool"), (X,), np.array(True)),
    ],
    # The image ops: tests/core/test_conv_ops.py checks them in depth (strides, padding, gradients).
    "conv2d": [
        (
            lambda o, x, w, b: o.conv2d(x, w, b, 2, "same"),
            (X3[..., None].repeat(2, -1), np.ones((1, 1, 2, 1), np.float32), np.zeros(1, np.float32)),
            X3[:, ::2, ::2, None] * 2,
        )
    ],
    "max_pool2d": [
        (
            lambda o, x: o.max_pool2d(x[..., None], 2),
            (X3,),
            X3[:, :, :2, None].reshape(2, 2, 2, 1, 2).max((2, 4))[..., None],
        )
    ],
    "flatten": [(lambda o, x: o.flatten(x), (X3,), X3.reshape(2, 12))],
    "image_to_float": [
        (
            lambda o, i: o.image_to_float(i),
            (np.array([[0, 51, 255]], np.uint8),),
            np.array([[0.0, 0.2, 1.0]], np.float32),
        )
    ],
    # In-place ops: checked by test_assign / test_polyak (they need variables).
    "assign": [],
    "polyak": [],
}

FLAT = [pytest.param(name, i, id=f"{name}-{i}") for name, cases in CASES.items() for i in range(len(cases))]


def test_cases_cover_the_contract(backend):
    """Every contract op has cases here and exists on the tf ops namespace."""
    assert set(CASES) == set(OPS_CONTRACT)
    missing = [name for name in OPS_CONTRACT if not callable(getattr(backend.ops, name, None))]
    assert not missing


@pytest.mark.parametrize("name,i", FLAT)
def test_op_matches_numpy(backend, run, name, i):
    fn, inputs, expected = CASES[name][i]
    out = run(lambda *ts: fn(backend.ops, *ts), *inputs)
    expected = np.asarray(expected)
    assert out.shape == expected.shape
    if expected.dtype.kind == "f":
        assert out.dtype == np.float32
        np.testing.assert_allclose(out, expected, rtol=RTOL, atol=ATOL)
    else:
        assert out.dtype == {"i": np.int64, "b": np.bool_}[expected.dtype.kind]
        np.testing.assert_array_equal(out, expected)


def test_assign(backend):
    var = backend.variable("v", np.zeros((5, 3), np.float32))
    fn = backend.function(lambda x: backend.ops.assign(var, x * 2.0))
    fn(backend.to_tensor(X))
    np.testing.assert_allclose(backend.to_numpy(var), X * 2.0)


@pytest.mark.parametrize("tau", [1.0, 0.3])
def test_polyak(backend, tau):
    targets = [backend.variable("t0", X.copy()), backend.variable("t1", B.copy())]
    sources = [backend.variable("s0", Y.copy()), backend.variable("s1", -B)]
    fn = backend.function(lambda: backend.ops.polyak(targets, sources, tau))
    fn()
    fn()
    exp0, exp1 = X.copy(), B.copy()
    for _ in range(2):
        exp0 = (1 - tau) * exp0 + tau * Y
        exp1 = (1 - tau) * exp1 + tau * (-B)
    np.testing.assert_allclose(backend.to_numpy(targets[0]), exp0, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(backend.to_numpy(targets[1]), exp1, rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(backend.to_numpy(sources[0]), Y)


def test_polyak_with_a_tensor_tau(backend):
    """A 0-d tensor tau (a fused loop's per-step tau): 0 keeps, 1 copies (both exactly), 0.3 mixes."""
    targets = [backend.variable("t0", X.copy()), backend.variable("t1", B.copy())]
    sources = [backend.variable("s0", Y.copy()), backend.variable("s1", -B)]
    fn = backend.function(lambda tau: backend.ops.polyak(targets, sources, tau))
    fn(backend.to_tensor(np.float32(0.0)))
    np.testing.assert_array_equal(backend.to_numpy(targets[0]), X)
    fn(backend.to_tensor(np.float32(0.3)))
    np.testing.assert_allclose(backend.to_numpy(targets[0]), X + 0.3 * (Y - X), rtol=RTOL, atol=ATOL)
    fn(backend.to_tensor(np.float32(1.0)))
    np.testing.assert_array_equal(backend.to_numpy(targets[0]), Y)
    np.testing.assert_array_equal(backend.to_numpy(targets[1]), -B)


def test_stop_gradient_and_huber_gradients(backend):
    """Gradients through the contract's differentiable ops match their numpy derivatives."""
    v = backend.variable("x", BIG)
    ops = backend.ops

    def loss(scale):
        return (ops.reduce_sum(ops.huber(v * scale, 1.0)) + ops.reduce_sum(ops.stop_gradient(v) * 100.0),)

    _, (g,) = backend.gradients(loss, [v], backend.to_tensor(np.float32(1.0)))
    np.testing.assert_allclose(g, np.clip(BIG, -1.0, 1.0), rtol=RTOL, atol=ATOL)


def test_gather_last_and_dense_gradients(backend):
    w = backend.variable("w", W)
    b = backend.variable("b", B)
    ops = backend.ops
    idx = np.array([0, 3, 1, 2, 3], np.int64)

    def loss(x, i):
        return (ops.reduce_mean(ops.gather_last(ops.dense(x, w, b), i)),)

    value, (gw, gb) = backend.gradients(loss, [w, b], backend.to_tensor(X), backend.to_tensor(idx))
    onehot = np.eye(4, dtype=np.float32)[idx] / len(idx)
    np.testing.assert_allclose(value, np.mean((X @ W + B)[np.arange(5), idx]), rtol=RTOL)
    np.testing.assert_allclose(gw, X.T @ onehot, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(gb, onehot.sum(0), rtol=RTOL, atol=ATOL)
