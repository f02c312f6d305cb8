"""The neutral ops namespace implemented with PyTorch (see rlgraph_core.backend.Ops)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rlgraph_core.backend import sequence_op, unary_op
from rlgraph_core.backend.conv import check_padding, pair, same_padding

_DTYPES = {"float32": torch.float32, "int64": torch.int64, "bool": torch.bool}
_ACTIVATIONS = {
    "relu": torch.relu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "elu": F.elu,
    "softplus": F.softplus,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
    "linear": lambda x: x,
}


def _nchw_padded(x, kh, kw, sh, sw, padding, value):
    """NHWC ``x`` as an NCHW view (channels-last memory: no copy) and the symmetric padding to give
    the torch op; an asymmetric ``same`` padding is applied here instead (torch pads symmetrically)."""
    x = x.permute(0, 3, 1, 2)
    if check_padding(padding) == "valid":
        return x, (0, 0)
    ph = same_padding(x.shape[2], kh, sh)
    pw = same_padding(x.shape[3], kw, sw)
    if ph[0] == ph[1] and pw[0] == pw[1]:
        return x, (ph[0], pw[0])
    return F.pad(x, (pw[0], pw[1], ph[0], ph[1]), value=value), (0, 0)


def _keep_mask(reset, x):
    """``[T, B, 1]`` float: 0 where ``reset`` (bool or 0/1) starts an episode, else 1."""
    return (1.0 - reset.to(x.dtype)).unsqueeze(-1)


def _segments(keep, steps):
    """``[(start, end), ...]``: the time steps ``0..steps`` cut before every step after the first
    where some env's episode starts (``keep`` ``[T, B, 1]`` is 0 there), so that each stretch runs
    through the fused kernel from a state zeroed only at its first step (one stretch without
    ``keep``). Reads the mask on the host: eager mode only."""
    if keep is None:
        return [(0, steps)]
    cuts = torch.nonzero((keep[1:, :, 0] < 1).any(dim=1)).flatten().add(1).tolist()
    bounds = [0, *cuts, steps]
    return list(zip(bounds[:-1], bounds[1:]))


def _axis(axis):
    return tuple(axis) if isinstance(axis, (list, tuple)) else axis


def _bound(op, side: str, a, b):
    """``op(a, b)`` (``torch.minimum``/``maximum``) where either side may be a Python number: that
    side becomes ``torch.clamp``'s ``side`` (``"max"``/``"min"``) bound of the other."""
    if not torch.is_tensor(b):
        return torch.clamp(a, **{side: b})
    if not torch.is_tensor(a):
        return torch.clamp(b, **{side: a})
    return op(a, b)


class TorchOps:
    """Stateless ops bound to one device."""

    def __init__(self, device: torch.device):
        self.device = device

    @staticmethod
    def dense(x, w, b):
        return torch.addmm(b, x, w) if x.dim() == 2 else x @ w + b

    @staticmethod
    def activation(name, x):
        return _ACTIVATIONS[name](x)

    @staticmethod
    def conv2d(x, w, b, strides=1, padding="valid"):
        """NHWC/HWIO convolution on torch's NCHW/OIHW kernel through permuted views: the input
        is a channels-last view, which torch's CPU and cuDNN convolutions take without a copy."""
        (sh, sw), (kh, kw) = pair(strides), (int(w.shape[0]), int(w.shape[1]))
        xc, pad = _nchw_padded(x, kh, kw, sh, sw, padding, 0.0)
        return F.conv2d(xc, w.permute(3, 2, 0, 1), b, stride=(sh, sw), padding=pad).permute(0, 2, 3, 1)

    @staticmethod
    def max_pool2d(x, size, strides=None, padding="valid"):
        """Max pooling of NHWC ``x`` (``same``: -inf padding, so padding never wins)."""
        (kh, kw) = pair(size, "size")
        (sh, sw) = pair(size if strides is None else strides)
        xc, pad = _nchw_padded(x, kh, kw, sh, sw, padding, float("-inf"))
        return F.max_pool2d(xc, (kh, kw), (sh, sw), padding=pad).permute(0, 2, 3, 1)

    @staticmethod
    def flatten(x, axis=1):
        """Merge axes ``axis..`` into one (C order)."""
        return torch.flatten(x, start_dim=axis)

    @staticmethod
    def split_leading(x, like):
        """``x [T * B, ...]`` -> ``[T, B, ...]``, ``T, B`` the leading axes of ``like``."""
        return x.reshape(like.shape[0], like.shape[1], *x.shape[1:])

    @staticmethod
    def image_to_float(x, scale=1.0 / 255.0):
        """float32 ``x * scale``."""
        return x.to(torch.float32) * scale

    @staticmethod
    def lstm(x, h, c, w_x, w_h, b, reset=None):
        """One LSTM layer over ``x [T, B, F]`` on torch's fused kernel (nn.LSTM's ``torch.lstm``, cuDNN
        on a GPU): in eager mode one call per stretch of steps between the steps where some env's
        episode starts (the state zeroed there first, see :func:`_segments`); one ``torch.lstm_cell``
        per step for a single step and under ``torch.compile`` (static train steps): compiling
        ``torch.lstm`` fails on CPU (aten.mkldnn_rnn_layer), which would send the whole step back
        to eager."""
        w_ih, w_hh, b_hh = w_x.t(), w_h.t(), torch.zeros_like(b)
        weights = (w_ih, w_hh, b, b_hh)
        keep = _keep_mask(reset, x) if reset is not None else None
        if x.shape[0] > 1 and not torch.compiler.is_compiling():
            ys = []
            for start, end in _segments(keep, x.shape[0]):
                if keep is not None:
                    h, c = h * keep[start], c * keep[start]
                y, h_n, c_n = torch.lstm(x[start:end], (h[None], c[None]), weights, True, 1, 0.0, False, False, False)
                ys.append(y)
                h, c = h_n[0], c_n[0]
            return (ys[0] if len(ys) == 1 else torch.cat(ys)), h, c
        keep = keep if keep is not None else torch.ones_like(x[..., :1])
        ys = []
        for t in range(x.shape[0]):
            h, c = torch.lstm_cell(x[t], (h * keep[t], c * keep[t]), *weights)
            ys.append(h)
        return torch.stack(ys), h, c

    @staticmethod
    def gru(x, h, w_x, w_h, b_x, b_h, reset=None):
        """One GRU layer over ``x [T, B, F]`` on torch's fused kernel (``torch.gru``), split where
        episodes start as :meth:`lstm` is; ``torch.gru_cell`` per step for one step and under
        ``torch.compile``."""
        weights = (w_x.t(), w_h.t(), b_x, b_h)
        keep = _keep_mask(reset, x) if reset is not None else None
        if x.shape[0] > 1 and not torch.compiler.is_compiling():
            ys = []
            for start, end in _segments(keep, x.shape[0]):
                if keep is not None:
                    h = h * keep[start]
                y, h_n = torch.gru(x[start:end], h[None], weights, True, 1, 0.0, False, False, False)
                ys.append(y)
                h = h_n[0]
            return (ys[0] if len(ys) == 1 else torch.cat(ys)), h
        keep = keep if keep is not None else torch.ones_like(x[..., :1])
        ys = []
        for t in range(x.shape[0]):
            h = torch.gru_cell(x[t], h * keep[t], *weights)
            ys.append(h)
        return torch.stack(ys), h

    @staticmethod
    def reduce_sum(x, axis=None, keepdims=False):
        return x.sum() if axis is None else x.sum(dim=_axis(axis), keepdim=keepdims)

    @staticmethod
    def reduce_mean(x, axis=None, keepdims=False):
        return x.mean() if axis is None else x.mean(dim=_axis(axis), keepdim=keepdims)

    @staticmethod
    def reduce_max(x, axis=None, keepdims=False):
        return x.max() if axis is None else torch.amax(x, dim=_axis(axis), keepdim=keepdims)

    @staticmethod
    def argmax(x, axis=-1):
        return torch.argmax(x, dim=axis)

    @staticmethod
    def gather_last(x, idx):
        return x.gather(-1, idx.long().unsqueeze(-1)).squeeze(-1)

    @staticmethod
    def take(x, indices):
        return x.index_select(0, indices.long())

    @staticmethod
    def one_hot(idx, depth):
        return F.one_hot(idx.long(), depth).float()

    @staticmethod
    def where(cond, a, b):
        return torch.where(cond, a, b)

    abs = unary_op(torch.abs, "Elementwise absolute value.")
    square = unary_op(torch.square, "Elementwise square.")
    sqrt = unary_op(torch.sqrt, "Elementwise square root.")
    exp = unary_op(torch.exp, "Elementwise exponential.")
    log = unary_op(torch.log, "Elementwise natural logarithm.")

    @staticmethod
    def minimum(a, b):
        """Elementwise minimum (either side may be a Python number, as on the other backends)."""
        return _bound(torch.minimum, "max", a, b)

    @staticmethod
    def maximum(a, b):
        """Elementwise maximum (either side may be a Python number, as on the other backends)."""
        return _bound(torch.maximum, "min", a, b)

    @staticmethod
    def clip(x, lo, hi):
        return torch.clamp(x, lo, hi)

    @staticmethod
    def stop_gradient(x):
        return x.detach()

    @staticmethod
    def cast(x, dtype):
        return x.to(_DTYPES[dtype])

    @staticmethod
    def huber(x, delta=1.0):
        return F.huber_loss(x, torch.zeros_like(x), reduction="none", delta=delta)

    @staticmethod
    def softmax(x, axis=-1):
        return torch.softmax(x, dim=axis)

    @staticmethod
    def log_softmax(x, axis=-1):
        return torch.log_softmax(x, dim=axis)

    concat = sequence_op(torch.cat, "Concatenate a list of tensors along ``axis``.", -1, "dim")
    stack = sequence_op(torch.stack, "Stack a list of tensors along a new ``axis``.", 0, "dim")

    @staticmethod
    def reshape(x, shape):
        return x.reshape(shape)

    @staticmethod
    def transpose(x, perm):
        """Axes reordered: output axis ``i`` is input axis ``perm[i]``."""
        return x.permute(*perm)

    @staticmethod
    def expand_dims(x, axis):
        return x.unsqueeze(axis)

    @staticmethod
    def squeeze(x, axis):
        return x.squeeze(axis)

    @staticmethod
    def zeros_like(x):
        return torch.zeros_like(x)

    def constant(self, value, dtype="float32"):
        return torch.as_tensor(value, dtype=_DTYPES[dtype], device=self.device)

    @staticmethod
    def assign(variable, value):
        with torch.no_grad():
            variable.copy_(value)

    @staticmethod
    def polyak(targets, sources, tau):
        with torch.no_grad():
            if torch.is_tensor(tau):
                # Traced code (a fused loop's per-step tau): no Python branch on the value. Select s
                # at tau >= 1 so the copy is exact whatever lerp's rounding. Per-tensor lerp with a
                # tensor weight: ``_foreach_lerp`` with a 0-d tensor weight reads it as a Python
                # scalar (``.item()``), which breaks a compiled graph in two.
                for t, s in zip(targets, sources):
                    t.copy_(torch.where(tau >= 1.0, s, torch.lerp(t, s, tau)))
            elif float(tau) >= 1.0:
                torch._foreach_copy_(list(targets), list(sources))
            else:
                torch._foreach_lerp_(list(targets), list(sources), float(tau))
