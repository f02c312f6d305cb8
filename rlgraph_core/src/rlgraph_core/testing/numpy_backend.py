"""A plain-numpy backend for testing components without any deep-learning framework.

:class:`NumpyBackend` implements the whole :data:`~rlgraph_core.backend.OPS_CONTRACT` with numpy
(``float32`` for floating values, ``int64`` for integers, like every other backend), so any
component can be built and run in a venv that has only rlgraph-core. It is eager only: mode
``"static"`` is accepted and simply runs eagerly (:meth:`NumpyBackend.function` returns the
function unchanged). It has no automatic differentiation: :meth:`NumpyBackend.train_step` and
:meth:`NumpyBackend.gradients` raise :class:`NotImplementedError`.

It is a test harness, not a user-facing backend: it is deliberately **not** registered through
:mod:`rlgraph_core.builtins`, so it never appears in ``rlgraph plugins`` or in configs. Tests
reach it through :func:`rlgraph_core.testing.available_backends`.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Sequence

import numpy as np

from rlgraph_core.backend.contract import Backend
from rlgraph_core.backend.ops import activation_fn, binary_op, canonical_array, sequence_op, unary_op
from rlgraph_core.backend.conv import check_padding, pair, same_padding
from rlgraph_core.errors import ConfigError
from rlgraph_core.testing.recurrent_reference import reference_gru, reference_lstm

_DTYPES = {"float32": np.float32, "int64": np.int64, "bool": np.bool_}

#: Negative slope of ``leaky_relu`` (the value the contract fixes for every backend).
LEAKY_RELU_SLOPE = 0.2


def _f32(x: Any) -> np.ndarray:
    """``x`` as a float32 array (results of float math stay float32 on this backend)."""
    x = np.asarray(x)
    return x if x.dtype == np.float32 else x.astype(np.float32)


def _sigmoid(x):
    return _f32(0.5 * (1.0 + np.tanh(0.5 * np.asarray(x))))


def _elu(x):
    x = np.asarray(x)
    return _f32(np.where(x > 0, x, np.expm1(np.minimum(x, 0))))


_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "relu": lambda x: np.maximum(x, np.zeros((), np.asarray(x).dtype)),
    "tanh": lambda x: _f32(np.tanh(x)),
    "sigmoid": _sigmoid,
    "elu": _elu,
    "softplus": lambda x: _f32(np.logaddexp(np.zeros((), np.asarray(x).dtype), x)),
    "leaky_relu": lambda x: np.where(np.asarray(x) >= 0, x, _f32(LEAKY_RELU_SLOPE * np.asarray(x))),
    "linear": lambda x: x,
}


def _axis(axis):
    return tuple(axis) if isinstance(axis, list) else axis


def _pad_same(x: np.ndarray, kh: int, kw: int, sh: int, sw: int, value: float) -> np.ndarray:
    """NHWC ``x`` padded for ``same`` windows (TensorFlow's split) with ``value``."""
    ph = same_padding(x.shape[1], kh, sh)
    pw = same_padding(x.shape[2], kw, sw)
    return np.pad(x, ((0, 0), ph, pw, (0, 0)), constant_values=value)


def windows(x: np.ndarray, kh: int, kw: int, sh: int, sw: int) -> np.ndarray:
    """Every ``kh x kw`` window of NHWC ``x`` at strides ``(sh, sw)``: ``[B, H', W', C, kh, kw]``
    (a strided view, no copy: ``numpy.lib.stride_tricks.sliding_window_view``)."""
    view = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(1, 2))
    return view[:, ::sh, ::sw]


class NumpyOps:
    """The neutral ops namespace (:data:`~rlgraph_core.backend.OPS_CONTRACT`) in plain numpy."""

    @staticmethod
    def dense(x, w, b):
        """``x @ w + b`` with ``w`` of shape ``[in, out]``."""
        return np.matmul(x, w) + b

    @staticmethod
    def activation(name, x):
        """Apply the activation called ``name`` (relu, tanh, sigmoid, elu, softplus, leaky_relu, linear)."""
        return activation_fn(_ACTIVATIONS, name)(x)

    @staticmethod
    def conv2d(x, w, b, strides=1, padding="valid"):
        """NHWC ``x`` cross-correlated with HWIO ``w`` plus ``b`` (im2col: windows, then one einsum)."""
        (sh, sw), (kh, kw) = pair(strides), (int(w.shape[0]), int(w.shape[1]))
        x = np.asarray(x, np.float32)
        if check_padding(padding) == "same":
            x = _pad_same(x, kh, kw, sh, sw, 0.0)
        patches = windows(x, kh, kw, sh, sw)
        return _f32(np.einsum("bijcyx,yxcf->bijf", patches, w, optimize=True) + b)

    @staticmethod
    def max_pool2d(x, size, strides=None, padding="valid"):
        """Maximum over ``size`` windows of NHWC ``x`` (``same`` pads with -inf)."""
        (kh, kw) = pair(size, "size")
        (sh, sw) = pair(size if strides is None else strides)
        x = np.asarray(x)
        if check_padding(padding) == "same":
            x = _pad_same(x, kh, kw, sh, sw, -np.inf)
        return windows(x, kh, kw, sh, sw).max(axis=(-2, -1))

    @staticmethod
    def flatten(x, axis=1):
        """Merge axes ``axis..`` into one (C order)."""
        x = np.asarray(x)
        return x.reshape(x.shape[:axis] + (-1,))

    @staticmethod
    def split_leading(x, like):
        """``x [T * B, ...]`` -> ``[T, B, ...]``, ``T, B`` the leading axes of ``like``."""
        x = np.asarray(x)
        return x.reshape(np.shape(like)[:2] + x.shape[1:])

    @staticmethod
    def image_to_float(x, scale=1.0 / 255.0):
        """float32 ``x * scale``."""
        return np.asarray(x).astype(np.float32) * np.float32(scale)

    @staticmethod
    def lstm(x, h, c, w_x, w_h, b, reset=None):
        """One LSTM layer over ``x [T, B, F]``: the float64 reference, rounded to float32."""
        return tuple(_f32(a) for a in reference_lstm(x, h, c, w_x, w_h, b, reset))

    @staticmethod
    def gru(x, h, w_x, w_h, b_x, b_h, reset=None):
        """One GRU layer over ``x [T, B, F]``: the float64 reference, rounded to float32."""
        return tuple(_f32(a) for a in reference_gru(x, h, w_x, w_h, b_x, b_h, reset))

    @staticmethod
    def reduce_sum(x, axis=None, keepdims=False):
        """Sum over ``axis`` (all axes when None)."""
        return np.asarray(np.sum(x, axis=_axis(axis), keepdims=keepdims))

    @staticmethod
    def reduce_mean(x, axis=None, keepdims=False):
        """Mean over ``axis`` (all axes when None)."""
        return np.asarray(np.mean(x, axis=_axis(axis), keepdims=keepdims))

    @staticmethod
    def reduce_max(x, axis=None, keepdims=False):
        """Maximum over ``axis`` (all axes when None)."""
        return np.asarray(np.max(x, axis=_axis(axis), keepdims=keepdims))

    @staticmethod
    def argmax(x, axis=-1):
        """Index of the maximum along ``axis`` as int64 (ties: the first index)."""
        return np.argmax(x, axis=axis).astype(np.int64)

    @staticmethod
    def gather_last(x, idx):
        """``x[..., idx]`` per row: ``x`` [B, N], ``idx`` [B] -> [B]."""
        idx = np.asarray(idx).astype(np.int64)
        return np.take_along_axis(np.asarray(x), idx[..., None], axis=-1)[..., 0]

    @staticmethod
    def take(x, indices):
        """Rows ``x[indices]`` along axis 0."""
        return np.asarray(x)[np.asarray(indices).astype(np.int64)]

    @staticmethod
    def one_hot(idx, depth):
        """float32 one-hot vectors of length ``depth``."""
        return np.eye(int(depth), dtype=np.float32)[np.asarray(idx).astype(np.int64)]

    @staticmethod
    def where(cond, a, b):
        """``a`` where ``cond`` else ``b``, elementwise."""
        return np.where(cond, a, b)

    abs = unary_op(np.abs, "Elementwise absolute value.")
    square = unary_op(np.square, "Elementwise square.")
    sqrt = unary_op(np.sqrt, "Elementwise square root.")
    exp = unary_op(np.exp, "Elementwise exponential.")
    log = unary_op(np.log, "Elementwise natural logarithm.")
    minimum = binary_op(np.minimum, "Elementwise minimum.")
    maximum = binary_op(np.maximum, "Elementwise maximum.")

    @staticmethod
    def clip(x, lo, hi):
        """Clip ``x`` into ``[lo, hi]``."""
        return np.clip(x, lo, hi)

    @staticmethod
    def stop_gradient(x):
        """Identity (numpy has no gradients to stop)."""
        return x

    @staticmethod
    def cast(x, dtype):
        """Cast to ``'float32'``, ``'int64'`` or ``'bool'``."""
        return np.asarray(x).astype(_DTYPES[dtype])

    @staticmethod
    def huber(x, delta=1.0):
        """``0.5 x^2`` where ``|x| <= delta`` else ``delta (|x| - 0.5 delta)``."""
        x = np.asarray(x)
        a = np.abs(x)
        return np.where(a <= delta, 0.5 * x * x, delta * (a - 0.5 * delta)).astype(x.dtype)

    @staticmethod
    def softmax(x, axis=-1):
        """Numerically stable softmax along ``axis``."""
        z = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return z / np.sum(z, axis=axis, keepdims=True)

    @staticmethod
    def log_softmax(x, axis=-1):
        """Numerically stable log-softmax along ``axis``."""
        shifted = x - np.max(x, axis=axis, keepdims=True)
        return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))

    concat = sequence_op(np.concatenate, "Concatenate a list of arrays along ``axis``.", -1)
    stack = sequence_op(np.stack, "Stack a list of arrays along a new ``axis``.", 0)

    @staticmethod
    def reshape(x, shape):
        """Reshape ``x``."""
        return np.reshape(x, shape)

    @staticmethod
    def transpose(x, perm):
        """Axes reordered: output axis ``i`` is input axis ``perm[i]``."""
        return np.transpose(x, tuple(perm))

    @staticmethod
    def expand_dims(x, axis):
        """Insert an axis of size 1 at ``axis``."""
        return np.expand_dims(x, axis)

    @staticmethod
    def squeeze(x, axis):
        """Remove the size-1 axis ``axis``."""
        return np.squeeze(x, axis)

    @staticmethod
    def zeros_like(x):
        """Zeros with the shape and dtype of ``x``."""
        return np.zeros_like(x)

    @staticmethod
    def constant(value, dtype="float32"):
        """An array holding ``value`` with the named dtype."""
        return np.asarray(value, dtype=_DTYPES[dtype])

    @staticmethod
    def assign(variable, value):
        """Copy ``value`` into ``variable`` in place."""
        np.copyto(variable, np.asarray(value, dtype=variable.dtype))

    @staticmethod
    def polyak(targets, sources, tau):
        """In place ``t <- (1 - tau) t + tau s`` for each pair (a plain copy when ``tau >= 1``)."""
        tau = float(np.asarray(tau))
        for t, s in zip(targets, sources):
            if tau >= 1.0:
                np.copyto(t, s)
            else:
                t += np.asarray(tau * (np.asarray(s) - t), dtype=t.dtype)


class NumpyBackend(Backend):
    """Eager numpy backend (registry name ``numpy``) for testing components without a framework.

    Tensors and variables are numpy arrays; variables are updated in place by ``assign`` and
    ``polyak``. Mode ``"static"`` is accepted and runs eagerly. There is no autodiff, so
    :attr:`supports_autodiff` is False and :meth:`train_step` / :meth:`gradients` raise
    :class:`NotImplementedError`.

    Args:
        mode: ``"eager"`` or ``"static"`` (both run eagerly).
        device: ``"auto"`` or ``"cpu"``.
        seed: accepted for signature compatibility; numpy ops use no random numbers.
    """

    name = "numpy"
    supports_autodiff = False

    def __init__(self, mode: str = "eager", device: str = "auto", seed: int | None = None):
        super().__init__(mode, device, seed)
        if device not in ("auto", "cpu"):
            raise ConfigError(f"The numpy test backend runs on the CPU only; got device '{device}'.")
        self._ops = NumpyOps()
        #: id -> weak reference of every non-trainable variable made by this backend
        self._non_trainable: dict[int, weakref.ref] = {}

    @property
    def ops(self) -> NumpyOps:
        """The numpy ops namespace."""
        return self._ops

    @property
    def device(self) -> str:
        """Always ``"cpu"``."""
        return "cpu"

    def to_tensor(self, value, dtype: str | None = None) -> np.ndarray:
        """A fresh numpy array: floats become float32 and integers int64 (uint8 is kept); a dict
        (a Dict observation) one per key."""
        if isinstance(value, dict):
            return {k: self.to_tensor(v, dtype) for k, v in value.items()}
        if dtype is not None:
            return np.array(value, dtype=_DTYPES[dtype])
        return canonical_array(np.array(value))

    def to_numpy(self, tensor) -> np.ndarray:
        """``np.asarray(tensor)``; like other backends on CPU it may share memory with ``tensor``."""
        return np.asarray(tensor)

    def variable(self, name: str, value: np.ndarray, trainable: bool = True) -> np.ndarray:
        """A writable numpy array copied from ``value`` (float64 becomes float32).

        ``trainable=False`` is recorded (see :meth:`is_trainable`); with no autodiff here, the
        flag only has to report the same as the framework backends do.
        """
        var = canonical_array(np.array(value, copy=True))
        if not trainable:
            key = id(var)
            self._non_trainable[key] = weakref.ref(var, lambda _, key=key: self._non_trainable.pop(key, None))
        return var

    def is_trainable(self, variable: Any) -> bool:
        """False for arrays made by :meth:`variable` with ``trainable=False``, else True."""
        ref = self._non_trainable.get(id(variable))
        return ref is None or ref() is not variable

    def assign_numpy(self, variable: np.ndarray, value: np.ndarray) -> None:
        """Overwrite ``variable`` in place."""
        np.copyto(variable, np.asarray(value, dtype=variable.dtype))

    def function(self, fn: Callable) -> Callable:
        """Return ``fn`` unchanged: numpy has no graph to compile."""
        return fn

    def train_step(self, loss_fn: Callable[..., Sequence[Any]], variables: Sequence[Any], optimizer: dict):
        """Not available: numpy has no automatic differentiation."""
        raise NotImplementedError(
            "The numpy test backend has no automatic differentiation, so it cannot make a train "
            "step; test training on a framework backend (e.g. torch or tf)."
        )

    def gradients(self, loss_fn: Callable[..., Sequence[Any]], variables: Sequence[Any], *inputs):
        """Not available: numpy has no automatic differentiation."""
        raise NotImplementedError(
            "The numpy test backend has no automatic differentiation, so it cannot compute "
            "gradients; check gradients on a framework backend (e.g. torch or tf)."
        )
