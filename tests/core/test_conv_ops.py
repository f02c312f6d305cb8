"""The image ops of the backend contract (conv2d, max_pool2d, flatten, image_to_float) on every
backend and mode, against a naive loop-by-loop numpy reference.

Values are checked on the numpy harness and on every installed framework backend in both modes;
gradients (of the input, the kernels and the biases) on the framework backends in both modes, with
the static mode's compiled forward (one function and one train step cover every case, so torch
compiles twice per run). Strides, ``same`` (symmetric and asymmetric padding) and ``valid``
padding are all covered, on a tiny 11x12 image.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from rlgraph_core.config.common import OptimizerConfig
from rlgraph_core.testing import backend_params, make_test_backend

RTOL, ATOL = 1e-5, 1e-5

rng = np.random.default_rng(17)
X = rng.standard_normal((2, 11, 12, 3)).astype(np.float32)
IMAGE = rng.integers(0, 256, (2, 11, 12, 3), dtype=np.uint8)

#: (kernel (kh, kw), strides, padding): stride 1 and 2 'same' (the latter pads asymmetrically),
#: 'valid' with a stride that does not divide the size, unequal kernel sides and strides.
CONV_CASES = [
    ((3, 3), 1, "same"),
    ((3, 3), 2, "same"),
    ((4, 4), 2, "valid"),
    ((3, 2), (1, 2), "valid"),
    ((5, 5), 3, "same"),
]
#: (size, strides, padding) of max_pool2d (strides None: the size).
POOL_CASES = [(3, 2, "same"), (2, None, "valid"), ((3, 2), (2, 1), "valid"), (3, 1, "same")]
FILTERS = 4
KERNELS = [rng.standard_normal((*k, 3, FILTERS)).astype(np.float32) * 0.3 for k, _, _ in CONV_CASES]
BIASES = [rng.standard_normal(FILTERS).astype(np.float32) for _ in CONV_CASES]


# --------------------------------------------------------------------------- naive reference
def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def _padding(size, k, s, padding):
    """(before, after) of one axis: none for 'valid'; TensorFlow's split for 'same'."""
    if padding == "valid":
        return 0, 0
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


def _padded(x, k, s, padding, value):
    (kh, kw), (sh, sw) = k, s
    ph, pw = _padding(x.shape[1], kh, sh, padding), _padding(x.shape[2], kw, sw, padding)
    return np.pad(x.astype(np.float64), ((0, 0), ph, pw, (0, 0)), constant_values=value), (ph[0], pw[0])


def _out_size(n, k, s):
    return (n - k) // s + 1


def ref_conv(x, w, b, strides, padding, cotangent=None):
    """Output (and, given a cotangent, the gradients dx, dw, db) by explicit loops over windows."""
    k, s = w.shape[:2], _pair(strides)
    xp, (top, left) = _padded(x, k, s, padding, 0.0)
    ho, wo = _out_size(xp.shape[1], k[0], s[0]), _out_size(xp.shape[2], k[1], s[1])
    out = np.zeros((x.shape[0], ho, wo, w.shape[3]))
    dxp, dw = np.zeros_like(xp), np.zeros(w.shape)
    for i in range(ho):
        for j in range(wo):
            win = xp[:, i * s[0] : i * s[0] + k[0], j * s[1] : j * s[1] + k[1], :]
            out[:, i, j] = np.einsum("byxc,yxcf->bf", win, w) + b
            if cotangent is not None:
                g = cotangent[:, i, j]
                dw += np.einsum("byxc,bf->yxcf", win, g)
                dxp[:, i * s[0] : i * s[0] + k[0], j * s[1] : j * s[1] + k[1], :] += np.einsum("bf,yxcf->byxc", g, w)
    if cotangent is None:
        return out
    dx = dxp[:, top : top + x.shape[1], left : left + x.shape[2]]
    return out, (dx, dw, cotangent.sum((0, 1, 2)))


def ref_pool(x, size, strides, padding, cotangent=None):
    """Max pooling (and, given a cotangent, dx: each window's gradient goes to its maximum)."""
    k = _pair(size)
    s = k if strides is None else _pair(strides)
    xp, (top, left) = _padded(x, k, s, padding, -np.inf)
    ho, wo = _out_size(xp.shape[1], k[0], s[0]), _out_size(xp.shape[2], k[1], s[1])
    out = np.zeros((x.shape[0], ho, wo, x.shape[3]))
    dxp = np.zeros_like(xp)
    for n in range(x.shape[0]):
        for i in range(ho):
            for j in range(wo):
                for c in range(x.shape[3]):
                    win = xp[n, i * s[0] : i * s[0] + k[0], j * s[1] : j * s[1] + k[1], c]
                    out[n, i, j, c] = win.max()
                    if cotangent is not None:
                        y, x_ = np.unravel_index(np.argmax(win), win.shape)
                        dxp[n, i * s[0] + y, j * s[1] + x_, c] += cotangent[n, i, j, c]
    if cotangent is None:
        return out
    return out, dxp[:, top : top + x.shape[1], left : left + x.shape[2]]


CONV_REF = [ref_conv(X, w, b, s, p) for w, b, (_, s, p) in zip(KERNELS, BIASES, CONV_CASES)]
POOL_REF = [ref_pool(X, k, s, p) for k, s, p in POOL_CASES]


def test_reference_shapes_follow_the_padding_rules():
    """'same' keeps ceil(size / stride); 'valid' drops what the windows do not cover."""
    assert [r.shape[1:3] for r in CONV_REF] == [(11, 12), (6, 6), (4, 5), (9, 6), (4, 4)]
    assert [r.shape[1:3] for r in POOL_REF] == [(6, 6), (5, 6), (5, 11), (11, 12)]


# --------------------------------------------------------------------------- every backend
@pytest.fixture(params=backend_params())
def backend(request):
    """Every available ``(backend, mode)``: numpy eager, each framework eager and static."""
    return make_test_backend(*request.param)


def _all_ops(ops, x, image, *params):
    ws, bs = params[: len(CONV_CASES)], params[len(CONV_CASES) :]
    convs = [ops.conv2d(x, w, b, s, p) for w, b, (_, s, p) in zip(ws, bs, CONV_CASES)]
    pools = [ops.max_pool2d(x, k, s, p) if s is not None else ops.max_pool2d(x, k, padding=p) for k, s, p in POOL_CASES]
    return (*convs, *pools, ops.flatten(convs[1]), ops.flatten(x, 2), ops.image_to_float(image))


def test_image_ops_match_the_reference(backend):
    t = backend.to_tensor
    fn = backend.function(lambda *args: _all_ops(backend.ops, *args))
    assert backend.to_numpy(t(IMAGE)).dtype == np.uint8  # images stay uint8 until the graph
    outs = [backend.to_numpy(o) for o in fn(t(X), t(IMAGE), *map(t, KERNELS), *map(t, BIASES))]
    expected = [
        *CONV_REF,
        *POOL_REF,
        CONV_REF[1].reshape(2, -1),
        X.reshape(2, 11, 36),
        IMAGE.astype(np.float64) / 255.0,
    ]
    assert len(outs) == len(expected)
    for i, (got, want) in enumerate(zip(outs, expected)):
        assert got.dtype == np.float32 and got.shape == want.shape, (i, got.dtype, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"output {i}")


def test_bad_padding_is_refused_by_name(backend):
    with pytest.raises(ValueError, match="padding must be 'same' or 'valid', got 'full'"):
        backend.ops.conv2d(backend.to_tensor(X), backend.to_tensor(KERNELS[0]), backend.to_tensor(BIASES[0]), 1, "full")
    with pytest.raises(ValueError, match="strides must be positive"):
        backend.ops.max_pool2d(backend.to_tensor(X), 2, 0)


_grng = np.random.default_rng(3)
#: random cotangents of every conv and pool output, and of the flattened input
COTANGENTS = (
    [_grng.standard_normal(r.shape).astype(np.float32) for r in (*CONV_REF, *POOL_REF)],
    _grng.standard_normal((2, 11 * 36)).astype(np.float32),
)


@functools.cache
def reference_gradients():
    """``(dx, [dw], [db])`` of the loss of the gradient test, by the loop reference (once per run)."""
    cot, flat_cot = COTANGENTS
    dx = flat_cot.reshape(X.shape).astype(np.float64)
    dws, dbs = [], []
    for (w, b, (_, s, p)), g in zip(zip(KERNELS, BIASES, CONV_CASES), cot):
        _, (gx, gw, gb) = ref_conv(X, w, b, s, p, g)
        dx, dws, dbs = dx + gx, dws + [gw], dbs + [gb]
    for (k, s, p), g in zip(POOL_CASES, cot[len(CONV_CASES) :]):
        dx = dx + ref_pool(X, k, s, p, g)[1]
    return dx, dws, dbs


def test_image_op_gradients_match_the_reference(backend):
    """d(sum of out_i * G_i)/d(input, kernels, biases) through every case at once."""
    if not backend.supports_autodiff:
        pytest.skip("the numpy harness has no automatic differentiation")
    cot, flat_cot = COTANGENTS
    variables = [backend.variable(n, v) for n, v in [("x", X)] + [(f"w{i}", w) for i, w in enumerate(KERNELS)]]
    variables += [backend.variable(f"b{i}", b) for i, b in enumerate(BIASES)]
    ops = backend.ops

    def loss(image, flat_g, *gs):
        outs = _all_ops(ops, variables[0], image, *variables[1:])
        total = ops.reduce_sum(ops.flatten(outs[-2], 1) * flat_g)
        for out, g in zip(outs, gs):
            total = total + ops.reduce_sum(out * g)
        return (total,)

    spec = OptimizerConfig(type="sgd", learning_rate=0.1).backend_spec(0.1)
    step = backend.train_step(loss, variables, spec)
    t = backend.to_tensor
    _, flat = step.compute_gradients(t(IMAGE), t(flat_cot), *map(t, cot))
    sizes = [int(np.prod(np.shape(backend.to_numpy(v)))) for v in variables]
    got = [g.reshape(np.shape(backend.to_numpy(v))) for g, v in zip(np.split(flat, np.cumsum(sizes)[:-1]), variables)]

    dx, dws, dbs = reference_gradients()
    for name, g, want in zip(["x"] + [f"w{i}" for i in range(5)] + [f"b{i}" for i in range(5)], got, [dx, *dws, *dbs]):
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-4, err_msg=name)
