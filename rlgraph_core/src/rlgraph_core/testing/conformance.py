"""The backend conformance suite: what every backend plugin runs on itself, in a few lines.

A backend plugin proves it fulfils the contract of :mod:`rlgraph_core.backend` by subclassing
:class:`BackendConformance` in its own tests::

    # tests/test_conformance.py of a backend plugin
    from rlgraph_core.testing.conformance import BackendConformance

    class TestConformance(BackendConformance):
        backend_name = "mybackend"          # its registry name; eager and static are both run

The suite checks, on the backend in each mode, against plain numpy: every op of
:data:`~rlgraph_core.backend.OPS_CONTRACT` (``CASES`` must cover the contract exactly, so a new op
cannot go untested) inside :meth:`Backend.function`, the in-place ops ``assign``/``polyak``
(float and tensor ``tau``), gradients through the differentiable ops, train steps against numpy
versions of torch's optimizer formulas (Adam, RMSprop, SGD, with and without momentum and
clipping), settable learning rates that never add a compiled program, optimizer state as numpy
under torch's key names (and a round trip through it), the split step (compute, then apply the
flat buffer) against the fused step, non-trainable variables never moving, and fused loops
against separate steps.

pytest is imported here (the module is a test harness); ``import rlgraph_core.testing`` does
not import this module.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlgraph_core.backend import OPS_CONTRACT, ops_contract_problems
from rlgraph_core.errors import NonFiniteError
from rlgraph_core.testing.harness import make_test_backend
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

OPT_RTOL, OPT_ATOL = 2e-5, 1e-6
rng3 = np.random.default_rng(3)
XS = rng3.standard_normal((16, 3)).astype(np.float32)
YS = rng3.standard_normal((16, 2)).astype(np.float32)
W0 = rng3.standard_normal((3, 2)).astype(np.float32)
B0 = rng3.standard_normal(2).astype(np.float32)


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


def spec(kind: str, **kw) -> dict:
    """An optimizer spec dict with every field set (defaults as the config's)."""
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


#: Optimizer specs the formula test runs (each with and without clipping).
SPECS = {
    "adam": spec("adam"),
    "adam-betas-eps": spec("adam", betas=(0.8, 0.95), eps=1e-3, learning_rate=0.1),
    "rmsprop": spec("rmsprop", alpha=0.9, eps=1e-3),
    "rmsprop-momentum": spec("rmsprop", momentum=0.9, learning_rate=0.01),
    "sgd": spec("sgd"),
    "sgd-momentum": spec("sgd", momentum=0.9),
}


def make_step(backend, opt_spec, counter=None):
    """A train step of ``mean((x w + b - y)^2)`` over fresh variables ``w``, ``b``."""
    w = backend.variable("w", W0)
    b = backend.variable("b", B0)
    ops = backend.ops

    def loss_fn(x, y):
        if counter is not None:
            counter.append(1)
        err = ops.dense(x, w, b) - y
        return ops.reduce_mean(ops.square(err)), ops.abs(err)

    return backend.train_step(loss_fn, [w, b], opt_spec), w, b


class BackendConformance:
    """The contract tests; subclass as ``Test...`` and set :attr:`backend_name`.

    Attributes:
        backend_name: the registry name of the backend under test.
        modes: the modes to run (both by default).
    """

    backend_name: str = ""
    modes: tuple[str, ...] = ("eager", "static")

    @pytest.fixture(params=["eager", "static"])
    def backend(self, request):
        """The backend under test on the CPU, in each of :attr:`modes`."""
        if request.param not in self.modes:
            pytest.skip(f"{self.backend_name} is not tested in {request.param} mode")
        return make_test_backend(self.backend_name, request.param, device="cpu", seed=0)

    @pytest.fixture
    def run(self, backend):
        """``run(fn, *numpy_inputs)``: ``fn`` on tensors through ``backend.function``, numpy out."""

        def _run(fn, *inputs):
            out = backend.function(fn)(*[backend.to_tensor(x) for x in inputs])
            if isinstance(out, (tuple, list)):
                return [backend.to_numpy(o) for o in out]
            return None if out is None else backend.to_numpy(out)

        return _run

    # --- ops ------------------------------------------------------------------------------
    def test_ops_fulfil_the_protocol(self, backend):
        assert set(CASES) == set(OPS_CONTRACT)
        assert ops_contract_problems(backend.ops) == []

    @pytest.mark.parametrize("name,i", FLAT)
    def test_op_matches_numpy(self, backend, run, name, i):
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

    def test_assign(self, backend):
        var = backend.variable("v", np.zeros((5, 3), np.float32))
        fn = backend.function(lambda x: backend.ops.assign(var, x * 2.0))
        fn(backend.to_tensor(X))
        np.testing.assert_allclose(backend.to_numpy(var), X * 2.0)
        fn(backend.to_tensor(Y))  # a second call reads the new input, not the first one
        np.testing.assert_allclose(backend.to_numpy(var), Y * 2.0)

    @pytest.mark.parametrize("tau", [1.0, 0.3])
    def test_polyak(self, backend, tau):
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

    def test_polyak_with_a_tensor_tau(self, backend):
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

    # --- gradients ------------------------------------------------------------------------
    def test_stop_gradient_and_huber_gradients(self, backend):
        v = backend.variable("x", BIG)
        ops = backend.ops

        def loss(scale):
            return (ops.reduce_sum(ops.huber(v * scale, 1.0)) + ops.reduce_sum(ops.stop_gradient(v) * 100.0),)

        _, (g,) = backend.gradients(loss, [v], backend.to_tensor(np.float32(1.0)))
        np.testing.assert_allclose(g, np.clip(BIG, -1.0, 1.0), rtol=RTOL, atol=ATOL)

    def test_gather_last_and_dense_gradients(self, backend):
        w = backend.variable("w", W)
        b = backend.variable("b", B)
        unused = backend.variable("unused", B)
        frozen = backend.variable("frozen", B, trainable=False)
        ops = backend.ops
        idx = np.array([0, 3, 1, 2, 3], np.int64)

        def loss(x, i):
            return (ops.reduce_mean(ops.gather_last(ops.dense(x, w, b + frozen * 0.0), i)),)

        value, (gw, gb, gu, gf) = backend.gradients(
            loss, [w, b, unused, frozen], backend.to_tensor(X), backend.to_tensor(idx)
        )
        onehot = np.eye(4, dtype=np.float32)[idx] / len(idx)
        np.testing.assert_allclose(value, np.mean((X @ W + B)[np.arange(5), idx]), rtol=RTOL)
        np.testing.assert_allclose(gw, X.T @ onehot, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(gb, onehot.sum(0), rtol=RTOL, atol=ATOL)
        np.testing.assert_array_equal(gu, 0.0)
        np.testing.assert_array_equal(gf, 0.0)

    @pytest.mark.parametrize("cell", ["lstm", "gru"])
    def test_recurrent_gradients_match_finite_differences(self, backend, cell):
        """Gradients of ``sum(y * R)`` through lstm / gru with resets, w.r.t. every weight and the
        initial state, against central differences of the float64 numpy reference."""
        weights = LSTM_W if cell == "lstm" else GRU_W
        state = [H0, C0] if cell == "lstm" else [H0]
        ref = reference_lstm if cell == "lstm" else reference_gru
        proj = np.random.default_rng(11).standard_normal((4, 3, 3))

        def ref_loss(values):
            return float(np.sum(ref(SEQ, *values, RESET)[0] * proj))

        values = [v.astype(np.float64) for v in (*state, *weights)]
        expected = []
        for k, value in enumerate(values):
            grad = np.zeros_like(value)
            for idx in np.ndindex(value.shape):
                plus = [v.copy() for v in values]
                minus = [v.copy() for v in values]
                plus[k][idx] += 1e-6
                minus[k][idx] -= 1e-6
                grad[idx] = (ref_loss(plus) - ref_loss(minus)) / 2e-6
            expected.append(grad)
        variables = [backend.variable(f"v{k}", v) for k, v in enumerate((*state, *weights))]
        ops = backend.ops

        def loss(x, reset, r):
            return (ops.reduce_sum(getattr(ops, cell)(x, *variables, reset=reset)[0] * r),)

        value, grads = backend.gradients(
            loss,
            variables,
            backend.to_tensor(SEQ),
            backend.to_tensor(RESET),
            backend.to_tensor(proj.astype(np.float32)),
        )
        np.testing.assert_allclose(value, ref_loss(values), rtol=1e-5)
        for k, (got, want) in enumerate(zip(grads, expected)):
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4, err_msg=f"gradient of input {k}")

    # --- train steps ----------------------------------------------------------------------
    @pytest.mark.parametrize("name", list(SPECS))
    @pytest.mark.parametrize("clip", [None, 0.5], ids=["noclip", "clip"])
    def test_steps_match_torch_formulas(self, backend, name, clip):
        if backend.mode == "static" and clip is None:
            pytest.skip("static mode compiles one step per case: the clipped cases cover its update code")
        opt_spec = dict(SPECS[name], max_grad_norm=clip)
        step, w, b = make_step(backend, opt_spec)
        ref = NumpyTorchOptimizer(opt_spec, [W0.astype(np.float64), B0.astype(np.float64)])
        params = [W0.astype(np.float64), B0.astype(np.float64)]
        for k in range(5):
            x, y = XS[k : k + 8], YS[k : k + 8]
            loss_ref, grads = np_loss_and_grads(params[0], params[1], x, y)
            params = ref.step(params, np_clip(grads, clip))
            loss, td = step(backend.to_tensor(x), backend.to_tensor(y))
            np.testing.assert_allclose(backend.to_numpy(loss), loss_ref, rtol=OPT_RTOL)
            assert backend.to_numpy(td).shape == (8, 2)
            np.testing.assert_allclose(backend.to_numpy(w), params[0], rtol=OPT_RTOL, atol=OPT_ATOL)
            np.testing.assert_allclose(backend.to_numpy(b), params[1], rtol=OPT_RTOL, atol=OPT_ATOL)

    def test_learning_rate_is_settable_and_never_recompiles(self, backend):
        step, w, b = make_step(backend, spec("sgd", learning_rate=0.1))
        assert step.learning_rate == pytest.approx(0.1)
        counts = []
        for lr in (0.1, 0.0, 0.2):
            step.learning_rate = lr
            before = [backend.to_numpy(w).astype(np.float64), backend.to_numpy(b).astype(np.float64)]
            _, grads = np_loss_and_grads(*before, XS, YS)
            step(backend.to_tensor(XS), backend.to_tensor(YS))
            counts.append(step.trace_count)
            np.testing.assert_allclose(backend.to_numpy(w), before[0] - lr * grads[0], rtol=OPT_RTOL, atol=OPT_ATOL)
            np.testing.assert_allclose(backend.to_numpy(b), before[1] - lr * grads[1], rtol=OPT_RTOL, atol=OPT_ATOL)
        if backend.mode == "static":
            assert counts[0] is not None and counts[0] >= 1 and len(set(counts)) == 1, counts

    @pytest.mark.parametrize("name", ["adam", "rmsprop-momentum", "sgd-momentum"])
    def test_state_roundtrip(self, backend, name):
        a, wa, ba = make_step(backend, SPECS[name])
        for k in range(3):
            a(backend.to_tensor(XS[k : k + 8]), backend.to_tensor(YS[k : k + 8]))
        state = a.get_state()
        assert all(isinstance(v, np.ndarray) for v in state.values())
        expected = {
            "adam": {"step", "exp_avg", "exp_avg_sq"},
            "rmsprop-momentum": {"step", "square_avg", "momentum_buffer"},
            "sgd-momentum": {"momentum_buffer"},
        }[name]
        assert {k.split("/", 1)[1] for k in state} == expected  # torch's state key names
        if "0/step" in state:
            assert float(state["0/step"]) == 3.0
        c, wc, bc = make_step(backend, SPECS[name])
        backend.assign_numpy(wc, backend.to_numpy(wa))
        backend.assign_numpy(bc, backend.to_numpy(ba))
        c.set_state(state)
        for s in (a, c):
            s(backend.to_tensor(XS[8:]), backend.to_tensor(YS[8:]))
        np.testing.assert_allclose(backend.to_numpy(wc), backend.to_numpy(wa), rtol=1e-6, atol=1e-7)
        with pytest.raises((ValueError, KeyError), match="not_a_slot"):
            c.set_state({"0/not_a_slot": np.zeros(2)})

    def test_split_step_equals_fused_step(self, backend):
        """compute_gradients, a hook that returns its input, apply_gradients == the fused step."""
        opt_spec = spec("adam", max_grad_norm=0.5)
        fused, wf, bf = make_step(backend, opt_spec)
        split, ws, bs = make_step(backend, opt_spec)
        seen = []
        split.gradient_hook = lambda flat: seen.append(flat.copy()) or flat
        for k in range(3):
            x, y = backend.to_tensor(XS[k : k + 8]), backend.to_tensor(YS[k : k + 8])
            lf = fused(x, y)[0]
            ls = split(x, y)[0]
            np.testing.assert_allclose(backend.to_numpy(ls), backend.to_numpy(lf), rtol=1e-6)
        assert len(seen) == 3 and seen[0].shape == (split.num_parameters,) == (8,)
        np.testing.assert_allclose(backend.to_numpy(ws), backend.to_numpy(wf), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(backend.to_numpy(bs), backend.to_numpy(bf), rtol=1e-5, atol=1e-6)

    def test_train_step_never_changes_non_trainable_or_unreached_variables(self, backend):
        w = backend.variable("w", W0)
        b = backend.variable("b", B0, trainable=False)
        unused = backend.variable("unused", B0)
        ops = backend.ops

        def loss_fn(x, y):
            return (ops.reduce_mean(ops.square(ops.dense(x, w, b) - y)),)

        step = backend.train_step(loss_fn, [w, b, unused], spec("adam"))
        for k in range(2):
            step(backend.to_tensor(XS[k : k + 8]), backend.to_tensor(YS[k : k + 8]))
        assert not np.allclose(backend.to_numpy(w), W0)
        np.testing.assert_array_equal(backend.to_numpy(b), B0)
        np.testing.assert_array_equal(backend.to_numpy(unused), B0)
        state = step.get_state()
        for key in ("1/exp_avg", "2/exp_avg", "2/exp_avg_sq"):  # absent (never updated) or zeros
            np.testing.assert_array_equal(state.get(key, 0.0), 0.0, err_msg=key)

    # --- fused loops ----------------------------------------------------------------------
    def test_fused_loop_equals_separate_steps(self, backend):
        """K steps in one loop (inline step + polyak with a per-step tau) == K separate calls."""
        ops = backend.ops

        def model():
            w = backend.variable("w", W0)
            b = backend.variable("b", B0)
            tw = backend.variable("tw", W0, trainable=False)

            def loss_fn(x, y):
                err = ops.dense(x, w, b) + 0.5 * ops.stop_gradient(ops.dense(x, tw, b)) - y
                return ops.reduce_mean(ops.square(err)), ops.reduce_sum(err)

            return backend.train_step(loss_fn, [w, b], spec("adam", max_grad_norm=0.5)), w, tw

        idx = np.stack([np.arange(k, k + 8) for k in range(4)]).astype(np.int64)
        due = np.array([0.0, 1.0, 0.0, 1.0], np.float32)
        x_all, y_all = backend.to_tensor(XS), backend.to_tensor(YS)

        step_a, wa, ta = model()
        losses = []
        for k in range(4):
            losses.append(backend.to_numpy(step_a(backend.to_tensor(XS[idx[k]]), backend.to_tensor(YS[idx[k]]))[0]))
            if due[k]:
                backend.function(lambda: ops.polyak([ta], [wa], 1.0))()

        step_b, wb, tb = model()

        def body(i, d, x, y):
            loss, s = step_b.inline(ops.take(x, i), ops.take(y, i))
            ops.polyak([tb], [wb], d)
            return loss, s

        loop = backend.fused_loop(body)
        out = loop([backend.to_tensor(idx), backend.to_tensor(due)], [x_all, y_all])
        assert backend.to_numpy(out[0]).shape == (4,) and backend.to_numpy(out[1]).shape == (4,)
        np.testing.assert_allclose(backend.to_numpy(out[0]), np.array(losses), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(backend.to_numpy(wb), backend.to_numpy(wa), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(backend.to_numpy(tb), backend.to_numpy(ta), rtol=1e-5, atol=1e-6)
        if backend.fuses_loops:
            count = loop.trace_count
            step_b.learning_rate = 0.01
            loop([backend.to_tensor(idx), backend.to_tensor(due)], [x_all, y_all])
            assert loop.trace_count == count  # a new learning rate is a value, never a program

    # --- non-finite updates (issue 19) ------------------------------------------------------
    @staticmethod
    def _snapshot(backend, step, variables):
        """Copies of the variables' values and the step's optimizer state (numpy)."""
        values = [np.array(backend.to_numpy(v), copy=True) for v in variables]
        return values, {k: np.array(v, copy=True) for k, v in step.get_state().items()}

    @staticmethod
    def _assert_unchanged(backend, step, variables, snapshot):
        values, state = snapshot
        for i, (v, before) in enumerate(zip(variables, values)):
            np.testing.assert_array_equal(backend.to_numpy(v), before, err_msg=f"variable {i} changed")
        after = step.get_state()
        assert sorted(after) == sorted(state)
        for key, before in state.items():
            np.testing.assert_array_equal(after[key], before, err_msg=f"optimizer state {key} changed")

    @pytest.mark.parametrize("name", ["adam-clip", "sgd-momentum"])
    @pytest.mark.parametrize("bad", ["loss", "gradient"])
    def test_a_non_finite_update_is_not_applied(self, backend, name, bad):
        """A NaN loss (a NaN input) or a NaN gradient (finite loss): the fused step raises
        NonFiniteError before anything moves: every variable and optimizer slot stays bit-identical,
        no program is added, and the next finite batch trains as usual."""

        opt_spec = spec("adam", max_grad_norm=0.5) if name == "adam-clip" else SPECS[name]
        w = backend.variable("w", W0)
        b = backend.variable("b", B0)
        ops = backend.ops

        def loss_fn(x, y, z):
            # d sqrt(z |b|) / db is finite for z = 1 and 0 * inf = NaN for z = 0 (the loss stays 0 there)
            err = ops.dense(x, w, b) - y
            return ops.reduce_mean(ops.square(err)) + ops.reduce_sum(ops.sqrt(ops.abs(b) * z)), ops.abs(err)

        step = backend.train_step(loss_fn, [w, b], opt_spec)
        ones, zeros = np.ones(2, np.float32), np.zeros(2, np.float32)

        def call(x, y, z):
            return step(backend.to_tensor(x), backend.to_tensor(y), backend.to_tensor(z))

        for k in range(2):
            call(XS[k : k + 8], YS[k : k + 8], ones)
        count = step.trace_count
        snapshot = self._snapshot(backend, step, [w, b])
        x_bad = XS[2:10].copy()
        if bad == "loss":
            x_bad[3, 1] = np.nan
        with pytest.raises(NonFiniteError, match="not applied"):
            call(x_bad, YS[2:10], ones if bad == "loss" else zeros)
        self._assert_unchanged(backend, step, [w, b], snapshot)
        assert step.trace_count == count  # the check is part of the program: no recompile
        loss = call(XS[2:10], YS[2:10], ones)[0]
        assert np.isfinite(backend.to_numpy(loss))
        assert not np.array_equal(backend.to_numpy(w), snapshot[0][0])
        assert np.isfinite(backend.to_numpy(w)).all() and np.isfinite(backend.to_numpy(b)).all()
        assert step.trace_count == count

    def test_a_non_finite_step_stops_a_fused_loop(self, backend):
        """In a fused loop the first non-finite step and every later one are not applied (the
        steps before it are), and the error names the step of the round."""

        ops = backend.ops
        xs = XS.copy()
        xs[12, 0] = np.nan  # in rows 8..15 only

        def model():
            w = backend.variable("w", W0)
            b = backend.variable("b", B0)

            def loss_fn(x, y):
                err = ops.dense(x, w, b) - y
                return ops.reduce_mean(ops.square(err)), ops.reduce_sum(err)

            return backend.train_step(loss_fn, [w, b], spec("adam", max_grad_norm=0.5)), w, b

        ref, wr, br = model()
        for k in range(2):
            ref(backend.to_tensor(xs[k : k + 8]), backend.to_tensor(YS[k : k + 8]))

        step, w, b = model()

        def body(i, x, y):
            return tuple(step.inline(ops.take(x, i), ops.take(y, i)))

        loop = backend.fused_loop(body)
        x_all, y_all = backend.to_tensor(xs), backend.to_tensor(YS)
        starts = [[8, 0, 1, 2], [0, 1, 8, 2]]  # bad at step 1, then at step 3 of 4
        snapshot = self._snapshot(backend, step, [w, b])
        idx = np.stack([np.arange(s, s + 8) for s in starts[0]]).astype(np.int64)
        with pytest.raises(NonFiniteError, match="step 1 of 4.*not applied"):
            loop([backend.to_tensor(idx)], [x_all, y_all])
        self._assert_unchanged(backend, step, [w, b], snapshot)
        count = loop.trace_count
        idx = np.stack([np.arange(s, s + 8) for s in starts[1]]).astype(np.int64)
        with pytest.raises(NonFiniteError, match="step 3 of 4.*not applied"):
            loop([backend.to_tensor(idx)], [x_all, y_all])
        assert loop.trace_count == count
        np.testing.assert_allclose(backend.to_numpy(w), backend.to_numpy(wr), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(backend.to_numpy(b), backend.to_numpy(br), rtol=1e-5, atol=1e-6)
        state, ref_state = step.get_state(), ref.get_state()
        assert sorted(state) == sorted(ref_state)
        for key, value in ref_state.items():
            np.testing.assert_allclose(state[key], value, rtol=1e-5, atol=1e-6, err_msg=key)
