"""The ``ops`` namespace of the backend contract: what every backend's ``ops`` must define.

Components' graph functions call ``self.ops.<name>`` (:class:`Ops`); :data:`OPS_CONTRACT` lists
every name with its meaning, :func:`ops_contract_problems` checks an implementation against it,
and :func:`unary_op`, :func:`binary_op`, :func:`activation_fn` and :func:`canonical_array` are the
pieces every backend's ops would otherwise write again. The conventions they follow (layouts,
dtypes) are in :mod:`rlgraph_core.backend.contract`.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

#: A backend tensor (``torch.Tensor``, ``tf.Tensor``, ``np.ndarray`` ...). Core never looks inside.
Tensor = Any

#: A backend variable, as made by :meth:`Backend.variable`.
Variable = Any

#: A reduction axis: one axis, several, or None for all of them.
Axis = int | Sequence[int] | None


class Ops(Protocol):
    """The neutral ops namespace every backend provides (``backend.ops``, ``component.ops``).

    Components write their numeric code against these names only, so the same code runs on
    every backend. Each method's docstring is its contract; :data:`OPS_CONTRACT` is the same
    table as ``{name: docstring}``, and :func:`ops_contract_problems` checks an implementation
    against the signatures below (parameter names, order and defaults).
    """

    def dense(self, x: Tensor, w: Tensor, b: Tensor) -> Tensor:
        """dense(x, w, b) -> x @ w + b, w is [in, out]"""

    def activation(self, name: str, x: Tensor) -> Tensor:
        """activation(name, x): one of relu, tanh, sigmoid, elu (alpha 1),
        softplus (log(1 + e^x)), leaky_relu (negative slope 0.2), linear"""

    def conv2d(
        self, x: Tensor, w: Tensor, b: Tensor, strides: int | Sequence[int] = 1, padding: str = "valid"
    ) -> Tensor:
        """conv2d(x, w, b, strides=1, padding='valid'): 2-D cross-correlation of NHWC x [B, H, W, C]
        with w in HWIO layout [kh, kw, C, F], plus b [F] -> [B, H', W', F]; strides an int or
        (sh, sw); padding 'valid' (none: H' = (H - kh) // sh + 1) or 'same' (H' = ceil(H / sh),
        zeros split as TensorFlow does, the odd one at the bottom/right; see backend.conv)"""

    def max_pool2d(
        self, x: Tensor, size: int | Sequence[int], strides: int | Sequence[int] | None = None, padding: str = "valid"
    ) -> Tensor:
        """max_pool2d(x, size, strides=None, padding='valid'): maximum over size windows (an int or
        (kh, kw)) of NHWC x; strides default to size; 'same' pads as conv2d does, padding never wins"""

    def flatten(self, x: Tensor, axis: int = 1) -> Tensor:
        """flatten(x, axis=1): merge axes axis.. into one in C order, [B, H, W, C] -> [B, H*W*C]"""

    def split_leading(self, x: Tensor, like: Tensor) -> Tensor:
        """split_leading(x, like): x [T * B, ...] reshaped to [T, B, ...], where T and B are the two
        leading axes of like, read when the op runs (a traced graph may not know them): a network
        run on a sequence with its time axis folded into the batch, given back its time axis"""

    def image_to_float(self, x: Tensor, scale: float = 1.0 / 255.0) -> Tensor:
        """image_to_float(x, scale=1/255): cast images (uint8, or any int/float) to float32 and
        multiply by scale, inside the graph (observations stay uint8 until here)"""

    def lstm(
        self, x: Tensor, h: Tensor, c: Tensor, w_x: Tensor, w_h: Tensor, b: Tensor, reset: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """lstm(x, h, c, w_x, w_h, b, reset=None) -> (y, h_T, c_T): one LSTM layer over x [T, B, F]
        from the state h, c [B, H]; w_x [F, 4H], w_h [H, 4H], b [4H], the gate blocks along the
        last axis in the order i, f, g, o (torch's and keras' order; torch's weight_ih is w_x
        transposed, its two biases sum to b): z = x_t w_x + h w_h + b, c' = sigmoid(f) c +
        sigmoid(i) tanh(g), h' = sigmoid(o) tanh(c'); y [T, B, H] stacks every h'. reset [T, B]
        (bool or 0/1 float), where true, zeroes h and c before step t (an episode starts there);
        None means no resets (the whole sequence may run as one fused kernel)"""

    def gru(
        self, x: Tensor, h: Tensor, w_x: Tensor, w_h: Tensor, b_x: Tensor, b_h: Tensor, reset: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """gru(x, h, w_x, w_h, b_x, b_h, reset=None) -> (y, h_T): one GRU layer over x [T, B, F]
        from the state h [B, H]; w_x [F, 3H], w_h [H, 3H], b_x and b_h [3H], the gate blocks in
        torch's order r, z, n: r = sigmoid(x w_xr + b_xr + h w_hr + b_hr), z likewise, n =
        tanh(x w_xn + b_xn + r (h w_hn + b_hn)), h' = (1 - z) n + z h (keras' GRU with
        reset_after=True, its blocks ordered z, r, n); y [T, B, H] stacks every h'. reset as for
        lstm: where true, h is zeroed before step t"""

    def reduce_sum(self, x: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
        """reduce_sum(x, axis=None, keepdims=False)"""

    def reduce_mean(self, x: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
        """reduce_mean(x, axis=None, keepdims=False)"""

    def reduce_max(self, x: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
        """reduce_max(x, axis=None, keepdims=False)"""

    def argmax(self, x: Tensor, axis: int = -1) -> Tensor:
        """argmax(x, axis=-1) -> int64; ties resolve to the first index"""

    def gather_last(self, x: Tensor, idx: Tensor) -> Tensor:
        """gather_last(x, idx): x[..., idx] per row; x [B, N], idx [B] -> [B]"""

    def take(self, x: Tensor, indices: Tensor) -> Tensor:
        """take(x, indices): rows x[indices] along axis 0; x [N, ...], indices int64 [B] -> [B, ...]"""

    def one_hot(self, idx: Tensor, depth: int) -> Tensor:
        """one_hot(idx, depth) -> float32"""

    def where(self, cond: Tensor, a: Tensor, b: Tensor) -> Tensor:
        """where(cond, a, b)"""

    def abs(self, x: Tensor) -> Tensor:
        """abs(x)"""

    def square(self, x: Tensor) -> Tensor:
        """square(x)"""

    def sqrt(self, x: Tensor) -> Tensor:
        """sqrt(x)"""

    def exp(self, x: Tensor) -> Tensor:
        """exp(x)"""

    def log(self, x: Tensor) -> Tensor:
        """log(x)"""

    def minimum(self, a: Tensor, b: Tensor) -> Tensor:
        """minimum(a, b) elementwise"""

    def maximum(self, a: Tensor, b: Tensor) -> Tensor:
        """maximum(a, b) elementwise"""

    def clip(self, x: Tensor, lo: float | Tensor, hi: float | Tensor) -> Tensor:
        """clip(x, lo, hi)"""

    def stop_gradient(self, x: Tensor) -> Tensor:
        """stop_gradient(x): same value, no gradient flows back"""

    def cast(self, x: Tensor, dtype: str) -> Tensor:
        """cast(x, dtype) with dtype one of 'float32', 'int64', 'bool'"""

    def huber(self, x: Tensor, delta: float = 1.0) -> Tensor:
        """huber(x, delta): 0.5 x^2 if |x| <= delta else delta (|x| - 0.5 delta)"""

    def softmax(self, x: Tensor, axis: int = -1) -> Tensor:
        """softmax(x, axis=-1)"""

    def log_softmax(self, x: Tensor, axis: int = -1) -> Tensor:
        """log_softmax(x, axis=-1)"""

    def concat(self, xs: Sequence[Tensor], axis: int = -1) -> Tensor:
        """concat(list_of_x, axis=-1)"""

    def stack(self, xs: Sequence[Tensor], axis: int = 0) -> Tensor:
        """stack(list_of_x, axis=0)"""

    def reshape(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        """reshape(x, shape)"""

    def transpose(self, x: Tensor, perm: Sequence[int]) -> Tensor:
        """transpose(x, perm): axes reordered, output axis i is input axis perm[i]"""

    def expand_dims(self, x: Tensor, axis: int) -> Tensor:
        """expand_dims(x, axis)"""

    def squeeze(self, x: Tensor, axis: int) -> Tensor:
        """squeeze(x, axis)"""

    def zeros_like(self, x: Tensor) -> Tensor:
        """zeros_like(x)"""

    def constant(self, value: Any, dtype: str = "float32") -> Tensor:
        """constant(value, dtype='float32') -> tensor on the backend's device"""

    def assign(self, variable: Variable, value: Tensor) -> None:
        """assign(variable, value): in-place copy, no gradient"""

    def polyak(self, targets: Sequence[Variable], sources: Sequence[Variable], tau: float | Tensor) -> None:
        """polyak(targets, sources, tau): in place t <- (1 - tau) t + tau s for each pair; tau is a
        float or a 0-d float32 tensor (traced code: a fused loop's per-step tau); tau 0 leaves t
        exactly as it is and tau 1 copies s exactly"""


def _op_methods() -> dict[str, Callable]:
    return {name: fn for name, fn in vars(Ops).items() if not name.startswith("_") and inspect.isfunction(fn)}


#: Every name a backend's ``ops`` namespace must provide, with its meaning (the docstrings of
#: :class:`Ops`, on one line each). The parity and contract tests iterate this table, so a
#: backend cannot silently miss one.
OPS_CONTRACT: dict[str, str] = {
    name: " ".join(line.strip() for line in (inspect.getdoc(fn) or "").splitlines())
    for name, fn in _op_methods().items()
}


def canonical_array(arr: np.ndarray, int_dtype: Any = np.int64) -> np.ndarray:
    """``arr`` in the contract's dtypes: other floats -> float32, other integers -> ``int_dtype``
    (int64; a backend without 64-bit integers names its stand-in), uint8 kept (images)."""
    kind = arr.dtype.kind
    if kind == "f" and arr.dtype != np.float32:
        return arr.astype(np.float32)
    if kind in "iu" and arr.dtype != np.uint8 and arr.dtype != int_dtype:
        return arr.astype(int_dtype)
    return arr


def activation_fn(activations: Mapping[str, Callable], name: str) -> Callable:
    """The function of the activation called ``name`` in a backend's table of them.

    Raises:
        ValueError: ``name`` is not in the table, listing the names that are.
    """
    try:
        return activations[name]
    except KeyError:
        raise ValueError(f"Unknown activation '{name}'; use one of {', '.join(activations)}.") from None


def unary_op(fn: Callable, doc: str, convert: Callable | None = None) -> staticmethod:
    """An ops entry ``(x) -> fn(x)`` for a backend's ops class, with the contract's signature.

    Framework functions are often builtins or ufuncs (``torch.abs``, ``np.abs``) whose signature
    :func:`ops_contract_problems` cannot inspect; this wraps one in a ``def`` once instead of each
    backend writing the same one-line method per elementwise op. ``convert`` (e.g. a backend's
    unwrapping of its tensor type) is applied to the argument first.
    """
    if convert is None:

        def op(x):
            return fn(x)
    else:

        def op(x):
            return fn(convert(x))

    op.__doc__ = doc
    return staticmethod(op)


def binary_op(fn: Callable, doc: str, convert: Callable | None = None) -> staticmethod:
    """An ops entry ``(a, b) -> fn(a, b)`` for a backend's ops class; as :func:`unary_op`."""
    if convert is None:

        def op(a, b):
            return fn(a, b)
    else:

        def op(a, b):
            return fn(convert(a), convert(b))

    op.__doc__ = doc
    return staticmethod(op)


def sequence_op(
    fn: Callable, doc: str, axis: int, axis_keyword: str = "axis", convert: Callable | None = None
) -> staticmethod:
    """An ops entry ``(xs, axis=axis) -> fn([x, ...], <axis_keyword>=axis)`` (``concat``, ``stack``)
    for a backend's ops class, as :func:`unary_op`: ``axis`` is the contract's default, and
    ``axis_keyword`` the framework's name for it (``dim`` in torch); ``convert`` is applied to each x."""

    def op(xs, axis=axis):
        return fn([x if convert is None else convert(x) for x in xs], **{axis_keyword: axis})

    op.__doc__ = doc
    return staticmethod(op)


def ops_contract_problems(ops: object) -> list[str]:
    """Check ``ops`` (a backend's ops namespace) against :class:`Ops`; return what is wrong.

    For every op of the Protocol the implementation must be a callable attribute whose
    parameters start with the Protocol's parameters, with the same names, in the same order,
    callable by keyword, and with the same default wherever the Protocol has one. Further
    parameters are allowed only with defaults (or as ``*args`` / ``**kwargs``).

    Returns:
        One line per problem (``"dense: missing"``, ``"clip: parameter 2 is 'low', expected
        'lo'"`` ...); an empty list when ``ops`` fulfils the contract.
    """
    problems: list[str] = []
    for name, proto in _op_methods().items():
        impl = getattr(ops, name, None)
        if impl is None or not callable(impl):
            problems.append(f"{name}: missing")
            continue
        try:
            got = list(inspect.signature(impl).parameters.values())
        except (TypeError, ValueError):
            problems.append(f"{name}: its signature cannot be inspected (wrap it in a def)")
            continue
        want = list(inspect.signature(proto).parameters.values())[1:]  # without self
        for i, param in enumerate(want):
            if i >= len(got) or got[i].kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                problems.append(f"{name}: lacks parameter '{param.name}'")
                break
            have = got[i]
            if have.name != param.name:
                problems.append(f"{name}: parameter {i + 1} is '{have.name}', expected '{param.name}'")
            elif have.kind not in (inspect.Parameter.POSITIONAL_OR_KEYWORD,):
                problems.append(f"{name}: parameter '{have.name}' must be positional-or-keyword")
            elif param.default is not inspect.Parameter.empty and have.default is inspect.Parameter.empty:
                problems.append(f"{name}: parameter '{have.name}' needs the default {param.default!r}")
            elif param.default is not inspect.Parameter.empty and have.default != param.default:
                problems.append(
                    f"{name}: parameter '{have.name}' defaults to {have.default!r}, expected {param.default!r}"
                )
        for extra in got[len(want) :]:
            if extra.default is inspect.Parameter.empty and extra.kind not in (
                inspect.Parameter.VAR_POSITIONAL,
                inspect.Parameter.VAR_KEYWORD,
            ):
                problems.append(f"{name}: extra parameter '{extra.name}' needs a default")
    return problems
