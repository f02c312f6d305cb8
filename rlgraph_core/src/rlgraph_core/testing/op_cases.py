"""The op cases of the backend conformance suite: inputs, numpy references and expected values.

``CASES`` maps every op of :data:`~rlgraph_core.backend.OPS_CONTRACT` to calls with fixed numpy
inputs and what plain numpy says they return (``FLAT`` is the same as pytest parameters);
:class:`~rlgraph_core.testing.conformance.BackendConformance` runs each inside a backend's
function in every mode. pytest is imported here (the parameters); ``import rlgraph_core.testing``
does not import this module.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlgraph_core.testing.recurrent_reference import reference_gru, reference_lstm

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

# Recurrent ops: T=4 steps, B=3 envs, F=2 features, H=3 units; weights as plain numpy [in, out].
rng_rnn = np.random.default_rng(7)
SEQ = rng_rnn.standard_normal((4, 3, 2)).astype(np.float32)
H0, C0 = (rng_rnn.standard_normal((2, 3, 3)) * 0.5).astype(np.float32)
LSTM_W = [(rng_rnn.standard_normal(shape) * 0.5).astype(np.float32) for shape in ((2, 12), (3, 12), (12,))]
GRU_W = [(rng_rnn.standard_normal(shape) * 0.5).astype(np.float32) for shape in ((2, 9), (3, 9), (9,), (9,))]
#: episode starts: env 0 at step 2, env 2 at steps 0 and 3 (as bool and as 0/1 float)
RESET = np.zeros((4, 3), bool)
RESET[2, 0] = RESET[0, 2] = RESET[3, 2] = True


def _flat(o, *xs):
    """Several outputs of an op as one flat vector (the op cases compare one array)."""
    return o.concat([o.reshape(x, (-1,)) for x in xs], axis=0)


def _flat_np(*xs):
    return np.concatenate([np.asarray(x, np.float32).reshape(-1) for x in xs])


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
    "lstm": [
        (lambda o, *a: _flat(o, *o.lstm(*a)), (SEQ, H0, C0, *LSTM_W), _flat_np(*reference_lstm(SEQ, H0, C0, *LSTM_W))),
        (
            lambda o, *a: _flat(o, *o.lstm(*a[:-1], reset=a[-1])),
            (SEQ, H0, C0, *LSTM_W, RESET),
            _flat_np(*reference_lstm(SEQ, H0, C0, *LSTM_W, RESET)),
        ),
        (  # a float 0/1 mask, one step (acting), nothing reset
            lambda o, *a: _flat(o, *o.lstm(*a[:-1], a[-1])),
            (SEQ[:1], H0, C0, *LSTM_W, np.zeros((1, 3), np.float32)),
            _flat_np(*reference_lstm(SEQ[:1], H0, C0, *LSTM_W)),
        ),
    ],
    "gru": [
        (lambda o, *a: _flat(o, *o.gru(*a)), (SEQ, H0, *GRU_W), _flat_np(*reference_gru(SEQ, H0, *GRU_W))),
        (
            lambda o, *a: _flat(o, *o.gru(*a[:-1], reset=a[-1])),
            (SEQ, H0, *GRU_W, RESET.astype(np.float32)),
            _flat_np(*reference_gru(SEQ, H0, *GRU_W, RESET)),
        ),
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
    "split_leading": [
        (lambda o, x, like: o.split_leading(x, like), (X3.reshape(8, 3), X3[..., 0]), X3),
        (lambda o, x, like: o.split_leading(x, like), (X, X[:, :1, None]), X[:, None]),
    ],
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
