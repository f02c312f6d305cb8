"""The neutral ops namespace implemented with ``jax.numpy`` (see rlgraph_core.backend.Ops).

Every op works eagerly (op by op) and under ``jax.jit`` / ``lax.scan``: no op converts to numpy or
branches on tensor values in Python. Variables (:class:`~rlgraph_jax.state.JaxVariable`) are
accepted wherever a tensor is and unwrapped to their current array; ``assign`` and ``polyak``
swap a variable's array for a new one (the variable-ownership contract of
:mod:`rlgraph_jax.state`).

Integers: JAX runs with 32-bit types unless ``jax_enable_x64`` is set (this plugin leaves that
process-wide switch alone). The contract's ``int64`` is therefore ``int32`` inside programs when
x64 is off and ``int64`` when it is on; at the numpy boundary
(:meth:`~rlgraph_jax.backend.JaxBackend.to_numpy`) integers are always ``int64``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jax import lax
from rlgraph_core.backend import activation_fn, binary_op, sequence_op, unary_op
from rlgraph_core.backend.conv import check_padding, pair, same_padding

from rlgraph_jax.state import JaxVariable, _unwrap

#: Negative slope of ``leaky_relu``; the same on every rlgraph backend.
LEAKY_RELU_SLOPE = 0.2


def int_dtype():
    """The dtype that stands for the contract's int64: int64 with x64 enabled, else int32."""
    return jnp.int64 if jax.config.jax_enable_x64 else jnp.int32


def dtype_of(name: str):
    """The jnp dtype for a contract dtype name (``float32``, ``int64``, ``bool``, ``uint8``)."""
    if name == "int64":
        return int_dtype()
    try:
        return {"float32": jnp.float32, "bool": jnp.bool_, "uint8": jnp.uint8}[name]
    except KeyError:
        raise ValueError(f"Unknown dtype '{name}'; use float32, int64 or bool.") from None


_ACTIVATIONS = {
    "relu": jax.nn.relu,
    "tanh": jnp.tanh,
    "sigmoid": jax.nn.sigmoid,
    "elu": jax.nn.elu,
    "softplus": jax.nn.softplus,
    "leaky_relu": lambda x: jax.nn.leaky_relu(x, negative_slope=LEAKY_RELU_SLOPE),
    "linear": lambda x: x,
}


def _axis(axis):
    return tuple(axis) if isinstance(axis, (list, tuple)) else axis


u = _unwrap


def _keep_mask(reset, x):
    """``[T, B, 1]`` float32: 0 where ``reset`` (bool or 0/1) starts an episode, else 1 (all
    ones when ``reset`` is None)."""
    if reset is None:
        return jnp.ones_like(x[..., :1])
    return 1.0 - jnp.asarray(u(reset), jnp.float32)[..., None]


def _window_padding(x, kh, kw, sh, sw, padding):
    """``((top, bottom), (left, right))`` for a window op on NHWC ``x``."""
    if check_padding(padding) == "valid":
        return ((0, 0), (0, 0))
    return (same_padding(int(x.shape[1]), kh, sh), same_padding(int(x.shape[2]), kw, sw))


class JaxOps:
    """Stateless jax.numpy ops; constants go to ``device``.

    Args:
        device: the ``jax.Device`` constants are put on, or None for JAX's default device.
    """

    def __init__(self, device=None):
        self.device = device

    @staticmethod
    def dense(x, w, b):
        """``x @ w + b`` with ``w`` of shape ``[in, out]`` (any number of leading axes in ``x``)."""
        return jnp.matmul(u(x), u(w)) + u(b)

    @staticmethod
    def conv2d(x, w, b, strides=1, padding="valid"):
        """NHWC activations, HWIO kernels (XLA takes both layouts natively); ``same`` padding is
        split as TensorFlow splits it (the odd element at the bottom / right)."""
        x, w = u(x), u(w)
        (sh, sw), (kh, kw) = pair(strides), (int(w.shape[0]), int(w.shape[1]))
        pads = _window_padding(x, kh, kw, sh, sw, padding)
        out = lax.conv_general_dilated(x, w, (sh, sw), pads, dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return out + u(b)

    @staticmethod
    def max_pool2d(x, size, strides=None, padding="valid"):
        """Max pooling of NHWC ``x`` (``same``: -inf padding, so padding never wins)."""
        x = u(x)
        (kh, kw) = pair(size, "size")
        (sh, sw) = pair(size if strides is None else strides)
        pads = _window_padding(x, kh, kw, sh, sw, padding)
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, kh, kw, 1), (1, sh, sw, 1), ((0, 0), *pads, (0, 0)))

    @staticmethod
    def flatten(x, axis=1):
        """Merge axes ``axis..`` into one (C order)."""
        x = u(x)
        return jnp.reshape(x, (*x.shape[:axis], -1))

    @staticmethod
    def split_leading(x, like):
        """``x [T * B, ...]`` -> ``[T, B, ...]``, ``T, B`` the leading axes of ``like``."""
        x = u(x)
        return jnp.reshape(x, (*u(like).shape[:2], *x.shape[1:]))

    @staticmethod
    def image_to_float(x, scale=1.0 / 255.0):
        """float32 ``x * scale``."""
        return u(x).astype(jnp.float32) * scale

    @staticmethod
    def transpose(x, perm):
        """Axes reordered: output axis ``i`` is input axis ``perm[i]``."""
        return jnp.transpose(u(x), tuple(perm))

    @staticmethod
    def activation(name, x):
        """Apply the activation called ``name`` (see the contract for the list)."""
        return activation_fn(_ACTIVATIONS, name)(u(x))

    @staticmethod
    def lstm(x, h, c, w_x, w_h, b, reset=None):
        """One LSTM layer over ``x [T, B, F]``: the input projection of every step as one matmul,
        then ``lax.scan`` over time (one compiled loop under ``jax.jit``; no flax needed)."""
        x, w_h = u(x), u(w_h)
        xw = jnp.matmul(x, u(w_x)) + u(b)

        def step(state, inputs):
            z_x, keep = inputs
            h, c = state[0] * keep, state[1] * keep
            i, f, g, o = jnp.split(z_x + jnp.matmul(h, w_h), 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        (h, c), ys = lax.scan(step, (u(h), u(c)), (xw, _keep_mask(reset, x)))
        return ys, h, c

    @staticmethod
    def gru(x, h, w_x, w_h, b_x, b_h, reset=None):
        """One GRU layer over ``x [T, B, F]`` (torch's gate order), the input projection as one
        matmul, then ``lax.scan`` over time."""
        x, w_h, b_h = u(x), u(w_h), u(b_h)
        xw = jnp.matmul(x, u(w_x)) + u(b_x)

        def step(h, inputs):
            g_x, keep = inputs
            h = h * keep
            r_x, z_x, n_x = jnp.split(g_x, 3, axis=-1)
            r_h, z_h, n_h = jnp.split(jnp.matmul(h, w_h) + b_h, 3, axis=-1)
            r, z = jax.nn.sigmoid(r_x + r_h), jax.nn.sigmoid(z_x + z_h)
            h = (1.0 - z) * jnp.tanh(n_x + r * n_h) + z * h
            return h, h

        h, ys = lax.scan(step, u(h), (xw, _keep_mask(reset, x)))
        return ys, h

    @staticmethod
    def reduce_sum(x, axis=None, keepdims=False):
        """Sum over ``axis`` (all axes when None)."""
        return jnp.sum(u(x), axis=_axis(axis), keepdims=keepdims)

    @staticmethod
    def reduce_mean(x, axis=None, keepdims=False):
        """Mean over ``axis`` (all axes when None)."""
        return jnp.mean(u(x), axis=_axis(axis), keepdims=keepdims)

    @staticmethod
    def reduce_max(x, axis=None, keepdims=False):
        """Maximum over ``axis`` (all axes when None)."""
        return jnp.max(u(x), axis=_axis(axis), keepdims=keepdims)

    @staticmethod
    def argmax(x, axis=-1):
        """Index of the maximum along ``axis`` (the first one on ties), as the int64 stand-in."""
        return jnp.argmax(u(x), axis=axis).astype(int_dtype())

    @staticmethod
    def gather_last(x, idx):
        """``x[..., idx]`` row by row: ``x`` [B, N], ``idx`` [B] -> [B]."""
        idx = u(idx).astype(jnp.int32)
        return jnp.take_along_axis(u(x), idx[..., None], axis=-1)[..., 0]

    @staticmethod
    def take(x, indices):
        """Rows ``x[indices]`` along axis 0."""
        return jnp.take(u(x), u(indices).astype(jnp.int32), axis=0)

    @staticmethod
    def one_hot(idx, depth):
        """One-hot float32 encoding of integer ``idx``."""
        return jax.nn.one_hot(u(idx), int(depth), dtype=jnp.float32)

    @staticmethod
    def where(cond, a, b):
        """Elementwise ``a`` where ``cond`` else ``b`` (broadcasting)."""
        return jnp.where(u(cond), u(a), u(b))

    abs = unary_op(jnp.abs, "abs(x)", u)
    square = unary_op(jnp.square, "square(x)", u)
    sqrt = unary_op(jnp.sqrt, "sqrt(x)", u)
    exp = unary_op(jnp.exp, "exp(x)", u)
    log = unary_op(jnp.log, "log(x)", u)
    minimum = binary_op(jnp.minimum, "Elementwise minimum.", u)
    maximum = binary_op(jnp.maximum, "Elementwise maximum.", u)

    @staticmethod
    def clip(x, lo, hi):
        """Clip ``x`` to ``[lo, hi]``."""
        return jnp.clip(u(x), u(lo), u(hi))

    @staticmethod
    def stop_gradient(x):
        """Same value; no gradient flows back through it."""
        return jax.lax.stop_gradient(u(x))

    @staticmethod
    def cast(x, dtype):
        """Cast to ``'float32'``, ``'int64'`` (the int64 stand-in, see the module) or ``'bool'``."""
        return jnp.asarray(u(x)).astype(dtype_of(dtype))

    @staticmethod
    def huber(x, delta=1.0):
        """``0.5 x^2`` where ``|x| <= delta`` else ``delta (|x| - 0.5 delta)``, elementwise.

        Written as ``0.5 q^2 + delta (|x| - q)`` with ``q = min(|x|, delta)``, as the tf backend
        does: the same values and gradients as torch's ``huber_loss`` and no branch.
        """
        a = jnp.abs(u(x))
        q = jnp.minimum(a, delta)
        return 0.5 * jnp.square(q) + delta * (a - q)

    @staticmethod
    def softmax(x, axis=-1):
        """Softmax along ``axis``."""
        return jax.nn.softmax(u(x), axis=axis)

    @staticmethod
    def log_softmax(x, axis=-1):
        """Log-softmax along ``axis``."""
        return jax.nn.log_softmax(u(x), axis=axis)

    concat = sequence_op(jnp.concatenate, "Concatenate a list of tensors along ``axis``.", -1, convert=u)
    stack = sequence_op(jnp.stack, "Stack a list of tensors along a new ``axis``.", 0, convert=u)

    @staticmethod
    def reshape(x, shape):
        """Reshape (``-1`` infers one axis)."""
        return jnp.reshape(u(x), tuple(int(d) for d in shape))

    @staticmethod
    def expand_dims(x, axis):
        """Insert a size-1 axis at ``axis``."""
        return jnp.expand_dims(u(x), axis)

    @staticmethod
    def squeeze(x, axis):
        """Remove the size-1 axis ``axis``."""
        return jnp.squeeze(u(x), axis=axis)

    @staticmethod
    def zeros_like(x):
        """Zeros of ``x``'s shape and dtype."""
        return jnp.zeros_like(u(x))

    def constant(self, value, dtype="float32"):
        """A constant tensor of ``dtype`` on this backend's device."""
        arr = jnp.asarray(u(value), dtype=dtype_of(dtype))
        if self.device is not None and not isinstance(arr, jax.core.Tracer):
            arr = jax.device_put(arr, self.device)
        return arr

    @staticmethod
    def assign(variable, value):
        """Swap ``variable``'s array for ``value`` (same dtype and shape; no gradient)."""
        _check_variable(variable, "assign")
        old = variable.value
        variable.value = jnp.broadcast_to(jax.lax.stop_gradient(jnp.asarray(u(value), dtype=old.dtype)), old.shape)

    @staticmethod
    def polyak(targets, sources, tau):
        """``t <- t + tau (s - t)`` for each pair (the form of ``torch.lerp``, as on tf).

        A float ``tau >= 1`` copies ``s``; a tensor ``tau`` (a fused loop's per-step tau) selects
        ``s`` exactly where it is 1 and leaves ``t`` exactly where it is 0.
        """
        if not isinstance(tau, (int, float)):
            tau = jnp.asarray(u(tau), jnp.float32)
            for t, s in zip(targets, sources):
                _check_variable(t, "polyak")
                cur, src = t.value, jax.lax.stop_gradient(u(s))
                t.value = jnp.where(tau >= 1.0, src, cur + tau * (src - cur)).astype(cur.dtype)
            return
        tau = float(tau)
        for t, s in zip(targets, sources):
            _check_variable(t, "polyak")
            cur, src = t.value, jax.lax.stop_gradient(u(s))
            t.value = src.astype(cur.dtype) if tau >= 1.0 else (cur + tau * (src - cur)).astype(cur.dtype)


def _check_variable(variable, op: str) -> None:
    if not isinstance(variable, JaxVariable):
        raise TypeError(
            f"ops.{op} needs a variable made by the jax backend (backend.variable), got "
            f"{type(variable).__name__}; a jax array is immutable and cannot be assigned to."
        )
