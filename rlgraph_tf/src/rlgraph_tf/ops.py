"""The neutral ops namespace implemented with TensorFlow (see rlgraph_core.backend.Ops).

Every op works both eagerly and inside ``tf.function`` (and under XLA): no op converts to numpy
or branches on tensor values in Python.
"""

from __future__ import annotations

import tensorflow as tf

from rlgraph_core.backend import activation_fn, sequence_op
from rlgraph_core.backend.conv import check_padding, pair

_DTYPES = {"float32": tf.float32, "int64": tf.int64, "bool": tf.bool}

#: Negative slope of ``leaky_relu``; the same on every rlgraph backend.
LEAKY_RELU_SLOPE = 0.2

_ACTIVATIONS = {
    "relu": tf.nn.relu,
    "tanh": tf.math.tanh,
    "sigmoid": tf.math.sigmoid,
    "elu": tf.nn.elu,
    "softplus": tf.math.softplus,
    "leaky_relu": lambda x: tf.nn.leaky_relu(x, alpha=LEAKY_RELU_SLOPE),
    "linear": lambda x: x,
}


def _keep_mask(reset, x):
    """``[T, B, 1]`` float32: 0 where ``reset`` (bool or 0/1) starts an episode, else 1 (all
    ones when ``reset`` is None)."""
    if reset is None:
        return tf.ones_like(x[..., :1])
    return 1.0 - tf.cast(reset, tf.float32)[..., None]


def _over_time(step, elems, initializer):
    """``tf.scan(step, elems, initializer)``; eagerly, the same steps as a Python loop stacked at
    the end: eager ``tf.scan`` runs its TensorArray machinery op by op (measured, recurrent PPO on
    RecallCue, 512 env steps with their updates, tf eager, load ~9: 26.0 s with scan, 11.8 s looped)."""
    if not tf.executing_eagerly():
        return tf.scan(step, elems, initializer=initializer)
    state, outputs = initializer, []
    for t in range(int(elems[0].shape[0])):
        state = step(state, tuple(e[t] for e in elems))
        outputs.append(state)
    if isinstance(initializer, tuple):
        return tuple(tf.stack([o[k] for o in outputs]) for k in range(len(initializer)))
    return tf.stack(outputs)


def _axis(axis):
    return list(axis) if isinstance(axis, (list, tuple)) else axis


class TFOps:
    """Stateless TensorFlow ops bound to one device.

    Args:
        device: the TensorFlow device string (``"/CPU:0"``, ``"/GPU:0"``) constants are put on.
    """

    def __init__(self, device: str = "/CPU:0"):
        self.device = device

    @staticmethod
    def dense(x, w, b):
        """``x @ w + b`` with ``w`` of shape ``[in, out]`` (any number of leading axes in ``x``)."""
        if x.shape.rank == 2:
            return tf.nn.bias_add(tf.linalg.matmul(x, w), b)
        return tf.tensordot(x, w, axes=[[x.shape.rank - 1], [0]]) + b

    @staticmethod
    def activation(name, x):
        """Apply the activation called ``name`` (see the contract for the list)."""
        return activation_fn(_ACTIVATIONS, name)(x)

    @staticmethod
    def conv2d(x, w, b, strides=1, padding="valid"):
        """NHWC/HWIO convolution: TensorFlow's own layouts and padding convention."""
        (sh, sw) = pair(strides)
        y = tf.nn.conv2d(x, w, strides=(1, sh, sw, 1), padding=check_padding(padding).upper())
        return tf.nn.bias_add(y, b)

    @staticmethod
    def max_pool2d(x, size, strides=None, padding="valid"):
        """Max pooling of NHWC ``x`` (TensorFlow's ``same`` ignores the padding)."""
        (kh, kw) = pair(size, "size")
        (sh, sw) = pair(size if strides is None else strides)
        return tf.nn.max_pool2d(x, (kh, kw), (sh, sw), check_padding(padding).upper())

    @staticmethod
    def flatten(x, axis=1):
        """Merge axes ``axis..`` into one (C order); the batch axes may be unknown when traced."""
        tail = x.shape[axis:]
        size = tail.num_elements() if tail.is_fully_defined() else -1
        if axis == 1 and size >= 0:
            return tf.reshape(x, (-1, size))
        return tf.reshape(x, tf.concat([tf.shape(x)[:axis], [size]], 0))

    @staticmethod
    def split_leading(x, like):
        """``x [T * B, ...]`` -> ``[T, B, ...]``, ``T, B`` the leading axes of ``like`` (read at run
        time: a traced function may have relaxed them to unknown); the static tail shape is kept."""
        tail = x.shape[1:]
        rest = tail.as_list() if tail.is_fully_defined() else tf.shape(x)[1:]
        return tf.reshape(x, tf.concat([tf.shape(like)[:2], rest], 0))

    @staticmethod
    def image_to_float(x, scale=1.0 / 255.0):
        """float32 ``x * scale``."""
        return tf.cast(x, tf.float32) * scale

    @staticmethod
    def lstm(x, h, c, w_x, w_h, b, reset=None):
        """One LSTM layer over ``x [T, B, F]``: the input projection of every step as one matmul,
        then ``tf.scan`` over time (inside ``tf.function``; a Python loop when eager, :func:`_over_time`). Written with tf ops rather
        than a keras LSTM cell because keras cells own their weights, while rlgraph's variables
        are the backend's (made from numpy); this is the math of keras' non-cuDNN kernel."""
        xw = tf.tensordot(x, w_x, 1) + b

        def step(state, inputs):
            z_x, keep = inputs
            h, c = state[0] * keep, state[1] * keep
            i, f, g, o = tf.split(z_x + tf.matmul(h, w_h), 4, axis=-1)
            c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
            return tf.sigmoid(o) * tf.tanh(c), c

        hs, cs = _over_time(
            step, (xw, _keep_mask(reset, x)), initializer=(tf.convert_to_tensor(h), tf.convert_to_tensor(c))
        )
        return hs, hs[-1], cs[-1]

    @staticmethod
    def gru(x, h, w_x, w_h, b_x, b_h, reset=None):
        """One GRU layer over ``x [T, B, F]`` (keras' ``reset_after=True`` math, torch's gate order),
        the input projection as one matmul, then ``tf.scan`` over time."""
        xw = tf.tensordot(x, w_x, 1) + b_x

        def step(h, inputs):
            g_x, keep = inputs
            h = h * keep
            r_x, z_x, n_x = tf.split(g_x, 3, axis=-1)
            r_h, z_h, n_h = tf.split(tf.matmul(h, w_h) + b_h, 3, axis=-1)
            r, z = tf.sigmoid(r_x + r_h), tf.sigmoid(z_x + z_h)
            return (1.0 - z) * tf.tanh(n_x + r * n_h) + z * h

        hs = _over_time(step, (xw, _keep_mask(reset, x)), initializer=tf.convert_to_tensor(h))
        return hs, hs[-1]

    @staticmethod
    def reduce_sum(x, axis=None, keepdims=False):
        """Sum over ``axis`` (all axes when None)."""
        return tf.math.reduce_sum(x, axis=_axis(axis), keepdims=keepdims)

    @staticmethod
    def reduce_mean(x, axis=None, keepdims=False):
        """Mean over ``axis`` (all axes when None)."""
        return tf.math.reduce_mean(x, axis=_axis(axis), keepdims=keepdims)

    @staticmethod
    def reduce_max(x, axis=None, keepdims=False):
        """Maximum over ``axis`` (all axes when None)."""
        return tf.math.reduce_max(x, axis=_axis(axis), keepdims=keepdims)

    @staticmethod
    def argmax(x, axis=-1):
        """Index of the maximum along ``axis`` as int64 (first one on ties)."""
        return tf.math.argmax(x, axis=axis, output_type=tf.int64)

    @staticmethod
    def gather_last(x, idx):
        """``x[..., idx]`` row by row: ``x`` [B, N], ``idx`` [B] -> [B] (any matching leading axes).

        Selected with a one-hot mask (``where`` then a sum of one value and zeros: exact, and
        ``-inf`` entries stay ``-inf``) rather than a batched ``tf.gather``: the gradient of a
        batched gather is some 20 eager ops of index arithmetic, which made it half the cost of
        an eager PPO update (fwd+bwd of [256, 2]: 7-9 ms against 1-2 ms; loaded machine). An
        index out of range selects nothing (0), as XLA's clamping gather does not raise either.
        """
        depth = x.shape[-1] if x.shape[-1] is not None else tf.shape(x)[-1]
        mask = tf.one_hot(tf.cast(idx, tf.int64), depth, on_value=True, off_value=False, dtype=tf.bool)
        return tf.math.reduce_sum(tf.where(mask, x, tf.zeros_like(x)), axis=-1)

    @staticmethod
    def take(x, indices):
        """Rows ``x[indices]`` along axis 0."""
        return tf.gather(x, tf.cast(indices, tf.int64), axis=0)

    @staticmethod
    def one_hot(idx, depth):
        """One-hot float32 encoding of integer ``idx``."""
        return tf.one_hot(tf.cast(idx, tf.int64), depth, dtype=tf.float32)

    @staticmethod
    def where(cond, a, b):
        """Elementwise ``a`` where ``cond`` else ``b`` (broadcasting)."""
        return tf.where(cond, a, b)

    abs = staticmethod(tf.math.abs)
    square = staticmethod(tf.math.square)
    sqrt = staticmethod(tf.math.sqrt)
    exp = staticmethod(tf.math.exp)
    log = staticmethod(tf.math.log)

    @staticmethod
    def minimum(a, b):
        """Elementwise minimum."""
        return tf.math.minimum(a, b)

    @staticmethod
    def maximum(a, b):
        """Elementwise maximum."""
        return tf.math.maximum(a, b)

    @staticmethod
    def clip(x, lo, hi):
        """Clip ``x`` to ``[lo, hi]``."""
        return tf.clip_by_value(x, lo, hi)

    @staticmethod
    def stop_gradient(x):
        """Same value; no gradient flows back through it."""
        return tf.stop_gradient(x)

    @staticmethod
    def cast(x, dtype):
        """Cast to ``'float32'``, ``'int64'`` or ``'bool'``."""
        return tf.cast(x, _DTYPES[dtype])

    @staticmethod
    def huber(x, delta=1.0):
        """``0.5 x^2`` where ``|x| <= delta`` else ``delta (|x| - 0.5 delta)``, elementwise.

        Written as ``0.5 q^2 + delta (|x| - q)`` with ``q = min(|x|, delta)``: the same values and
        gradients as ``torch.nn.functional.huber_loss`` and no branch, so it compiles anywhere.
        """
        a = tf.math.abs(x)
        q = tf.math.minimum(a, delta)
        return 0.5 * tf.math.square(q) + delta * (a - q)

    @staticmethod
    def softmax(x, axis=-1):
        """Softmax along ``axis``."""
        return tf.nn.softmax(x, axis=axis)

    @staticmethod
    def log_softmax(x, axis=-1):
        """Log-softmax along ``axis``."""
        return tf.nn.log_softmax(x, axis=axis)

    concat = sequence_op(tf.concat, "Concatenate a list of tensors along ``axis``.", -1)
    stack = sequence_op(tf.stack, "Stack a list of tensors along a new ``axis``.", 0)

    @staticmethod
    def reshape(x, shape):
        """Reshape (``-1`` infers one axis)."""
        return tf.reshape(x, shape)

    @staticmethod
    def transpose(x, perm):
        """Axes reordered: output axis ``i`` is input axis ``perm[i]``."""
        return tf.transpose(x, perm)

    @staticmethod
    def expand_dims(x, axis):
        """Insert a size-1 axis at ``axis``."""
        return tf.expand_dims(x, axis)

    @staticmethod
    def squeeze(x, axis):
        """Remove the size-1 axis ``axis``."""
        return tf.squeeze(x, axis=axis)

    @staticmethod
    def zeros_like(x):
        """Zeros of ``x``'s shape and dtype."""
        return tf.zeros_like(x)

    def constant(self, value, dtype="float32"):
        """A constant tensor of ``dtype`` on this backend's device."""
        with tf.device(self.device):
            return tf.constant(value, dtype=_DTYPES[dtype])

    @staticmethod
    def assign(variable, value):
        """Copy ``value`` into ``variable`` in place (no gradient)."""
        variable.assign(tf.stop_gradient(value))

    @staticmethod
    def polyak(targets, sources, tau):
        """In place ``t <- (1 - tau) t + tau s`` for each pair (``tau >= 1``: plain copy).

        Computed as ``t + tau (s - t)``, the form of ``torch.lerp``, so both backends round alike.
        A tensor ``tau`` (traced code: a fused loop's per-step tau) selects ``s`` exactly where it
        is 1 and leaves ``t`` exactly where it is 0.
        """
        if isinstance(tau, (tf.Tensor, tf.Variable)):
            tau = tf.cast(tau, tf.float32)
            for t, s in zip(targets, sources):
                t.assign(tf.where(tau >= 1.0, tf.convert_to_tensor(s), t + tau * (s - t)))
            return
        tau = float(tau)
        for t, s in zip(targets, sources):
            if tau >= 1.0:
                t.assign(s)
            else:
                t.assign_add(tau * (s - t))
