"""The backend contract.

A backend turns backend-neutral components into computation. Components never import a
framework; their graph functions call ``self.ops.<name>`` and Python arithmetic operators on the
tensors they receive. Everything a framework does differently lives behind this class.

Conventions shared by every backend (so weights move between backends as plain numpy):

* dense weights are stored ``[in, out]`` and biases ``[out]``;
* images are NHWC (``[batch, height, width, channels]``) and convolution kernels HWIO
  (``[height, width, in, out]``), whatever layout the framework prefers inside;
* ``float32`` everywhere for floating values, ``int64`` for integer tensors;
* variables are created from numpy initial values, so a seed gives identical initial weights on
  every backend.
"""

from __future__ import annotations

import abc
import inspect
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from rlgraph_core.errors import ConfigError, NonFiniteError

#: A backend tensor (``torch.Tensor``, ``tf.Tensor``, ``np.ndarray`` ...). Core never looks inside.
Tensor = Any

#: A backend variable, as made by :meth:`Backend.variable`.
Variable = Any

#: A reduction axis: one axis, several, or None for all of them.
Axis = int | Sequence[int] | None

#: ``hook(flat_gradients) -> flat_gradients``: see :attr:`TrainStep.gradient_hook`.
GradientHook = Callable[[np.ndarray], np.ndarray]


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


#: The end of every message about a non-finite update.
NON_FINITE_CAUSES = (
    "Common causes: a learning rate that is too high, huge rewards or observations (normalise them), "
    "NaN or infinite inputs (env.allow_nonfinite_obs), or no gradient clipping (set optimizer.max_grad_norm)."
)


def describe_non_finite(loss: float, grad_norm: float) -> str:
    """What was non-finite in an update, from its loss and its gradients' global L2 norm (a norm
    is non-finite when any gradient value is, or when the gradients are too large to square):
    ``"the loss is nan"``, ``"the gradients' global norm is inf"``, or both joined by "and"."""
    parts = []
    if not np.isfinite(loss):
        parts.append(f"the loss is {float(loss)}")
    if not np.isfinite(grad_norm):
        parts.append(f"the gradients' global norm is {float(grad_norm)}")
    return " and ".join(parts) or "a value of the update is NaN or infinite"


def non_finite_update_error(what: str, step: int | None = None, steps: int | None = None) -> NonFiniteError:
    """The :class:`NonFiniteError` a train step raises when it refused a non-finite update.

    Args:
        what: what was non-finite (:func:`describe_non_finite`), e.g. ``"the loss is nan"``.
        step: in a fused loop (:meth:`Backend.fused_loop`): the first non-finite step, from 1;
            it and every later step of the round were not applied, the steps before it were.
        steps: the number of steps of that round.
    """
    if step is None:
        text = f"{what[:1].upper()}{what[1:]}; the update was not applied (weights and optimizer state are unchanged)."
    else:
        later = (steps or step) - step
        text = (
            f"At step {step} of {steps} of a fused update round {what}; that update and the {later} after it "
            f"were not applied (the {step - 1} before it were)."
        )
    return NonFiniteError(f"{text} {NON_FINITE_CAUSES}", what=what)


class TrainStep(abc.ABC):
    """An optimisation step over a fixed list of variables: loss, gradients, clipping, update.

    The step has two halves that can run apart, and a fused form:

    * :meth:`compute_gradients` -- forward and backward: the loss outputs and every gradient as
      one flat float32 numpy buffer (no variable changes);
    * :meth:`apply_gradients` -- un-flatten a buffer, clip it by global norm (``max_grad_norm``)
      and apply the optimizer update;
    * :meth:`__call__` -- one whole update. With no :attr:`gradient_hook` it is the fused step
      (compiled as one unit in static mode where the backend can); with a hook it is
      ``compute_gradients`` -> ``hook`` -> ``apply_gradients``.

    The flat buffer layout: the step's variables in the order given to
    :meth:`Backend.train_step`, each flattened in C order, concatenated (length
    :attr:`num_parameters`). A variable the loss does not reach, or a non-trainable one,
    contributes zeros. Because the buffer is backend-neutral numpy, an executor can average it
    across processes (Horovod, ``torch.distributed``, MPI) without knowing the backend.

    Variables the loss did not reach in the last :meth:`compute_gradients` (and non-trainable
    ones) are skipped by :meth:`apply_gradients`, as the fused step skips them, so optimizer
    moments never move for them.
    """

    #: Default: no hook (see :attr:`gradient_hook`).
    _gradient_hook: GradientHook | None = None

    @property
    def gradient_hook(self) -> GradientHook | None:
        """``hook(flat) -> flat`` run between computing and applying gradients, or None.

        The hook receives all gradients of the step as one flat float32 numpy array of shape
        ``(num_parameters,)`` and must return an array of the same shape (e.g. the average of
        that buffer across processes: this is where an allreduce goes). Clipping by
        ``max_grad_norm`` happens after the hook, on what it returns, so every process that
        applies the same averaged buffer makes the same update. None (the default) runs the
        fused step.
        """
        return self._gradient_hook

    @gradient_hook.setter
    def gradient_hook(self, hook: GradientHook | None) -> None:
        if hook is not None and not callable(hook):
            raise TypeError(
                f"gradient_hook must be a callable (flat float32 array -> array) or None, got {type(hook).__name__}."
            )
        self._gradient_hook = hook

    def __call__(self, *inputs: Any) -> tuple[Any, ...]:
        """Run one update on ``inputs``; return ``(loss, *aux)`` as backend tensors (detached).

        Without a :attr:`gradient_hook` this is the fused step; with one it is
        :meth:`compute_gradients`, the hook, then :meth:`apply_gradients`.
        """
        hook = self._gradient_hook
        if hook is None:
            return self._fused_step(*inputs)
        outputs, flat = self.compute_gradients(*inputs)
        flat = self._checked_flat(hook(flat), "the gradient hook returned")
        if not np.isfinite(flat).all():
            # Checked after the hook (every process of an allreduce sees the same buffer, so all
            # stop together) and before the optimizer moves anything.
            bad = int((~np.isfinite(flat)).sum())
            raise non_finite_update_error(f"{bad} of {flat.size} gradient values are NaN or infinite")
        self.apply_gradients(flat)
        return outputs

    @abc.abstractmethod
    def _fused_step(self, *inputs: Any) -> tuple[Any, ...]:
        """The whole update in one call (compiled as one unit in static mode where possible)."""

    def inline(self, *inputs: Any) -> tuple[Any, ...]:
        """The fused update as plain traceable code, for the body of :meth:`Backend.fused_loop`.

        Same math as a call without a gradient hook (forward, backward, clipping, optimizer
        update; the learning rate is read from the step's current value *inside* the program,
        so a schedule never retraces it) and returns ``(loss, *aux)``. It is not compiled by
        itself: the loop that traces it compiles it. Outside a loop body call the step itself.
        This default runs the fused step (right for the Python loop of eager mode); a backend
        whose :meth:`Backend.fused_loop` compiles overrides it with the uncompiled step.
        """
        return self._fused_step(*inputs)

    @property
    def trace_count(self) -> int | None:
        """How many programs static mode has traced/compiled for this step so far (all its
        parts together), or None where nothing is compiled (eager mode).

        A step compiles once per distinct input shape; changing the learning rate (a schedule)
        never adds one. Tests assert this count.
        """
        return None

    @abc.abstractmethod
    def compute_gradients(self, *inputs: Any) -> tuple[tuple[Any, ...], np.ndarray]:
        """Forward and backward on ``inputs``, changing no variable.

        Returns:
            ``(outputs, flat)``: the loss outputs ``(loss, *aux)`` as detached backend tensors
            (what :meth:`__call__` returns) and the gradients as one flat float32 numpy array of
            shape ``(num_parameters,)`` (layout in the class docstring).
        """

    @abc.abstractmethod
    def apply_gradients(self, flat: np.ndarray) -> None:
        """Un-flatten ``flat`` (shape ``(num_parameters,)``), clip it by global norm
        (``max_grad_norm``, the formula of ``torch.nn.utils.clip_grad_norm_``) and apply the
        optimizer update to the variables."""

    @property
    @abc.abstractmethod
    def num_parameters(self) -> int:
        """Number of elements of the flat gradient buffer (all the step's variables together)."""

    def _checked_flat(self, flat: Any, what: str = "apply_gradients got") -> np.ndarray:
        """``flat`` as a fresh, writable, 1-D float32 array of length :attr:`num_parameters`."""
        if not isinstance(flat, np.ndarray):
            raise TypeError(f"{what} {type(flat).__name__}; expected a numpy array of shape ({self.num_parameters},).")
        if flat.shape != (self.num_parameters,):
            raise ValueError(
                f"{what} an array of shape {flat.shape}; expected ({self.num_parameters},) "
                f"(all gradients of the step, flattened)."
            )
        return np.array(flat, dtype=np.float32, copy=True)

    @abc.abstractmethod
    def get_state(self) -> dict[str, np.ndarray]:
        """Optimizer state (moments, step counts) as numpy arrays keyed by stable names."""

    @abc.abstractmethod
    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Restore optimizer state written by :meth:`get_state`."""

    def variable_shapes(self) -> list[tuple[int, ...]] | None:
        """Shapes of the step's variables in order (as its optimizer state keys index them), or None.

        :meth:`get_state` keys are ``"<variable index>/<slot>"``; a slot ``step`` is a scalar and
        every other slot has its variable's shape. Checkpoint loading checks optimizer state
        against these shapes before reading it; None (the default) bounds only its size.
        """
        return None

    @property
    @abc.abstractmethod
    def learning_rate(self) -> float:
        """Current learning rate."""

    @learning_rate.setter
    @abc.abstractmethod
    def learning_rate(self, value: float) -> None: ...


class Backend(abc.ABC):
    """A deep-learning framework as seen by rlgraph.

    Args:
        mode: ``"eager"`` (define-by-run) or ``"static"`` (compiled graph).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:0"`` ... or ``"auto"`` (accelerator when present).
        seed: seeds the framework's own generators (weights are initialised in numpy anyway).
    """

    #: registry name, e.g. ``"torch"``.
    name: str = ""

    #: Whether :meth:`train_step` and :meth:`gradients` work. Only test harnesses without a
    #: framework (the numpy backend of :mod:`rlgraph_core.testing`) set this to False.
    supports_autodiff: bool = True

    MODES = ("eager", "static")

    def __init__(self, mode: str = "eager", device: str = "auto", seed: int | None = None):
        if mode not in self.MODES:
            raise ConfigError(
                f"Backend mode '{mode}' is not known; use one of {', '.join(self.MODES)} "
                f"(eager = define-by-run, static = compiled graph)."
            )
        self.mode = mode
        self.requested_device = device
        self.seed = seed

    # --- tensors and variables -------------------------------------------------------------
    @property
    @abc.abstractmethod
    def ops(self) -> Ops:
        """The neutral ops namespace (see :class:`Ops`)."""

    @property
    @abc.abstractmethod
    def device(self) -> str:
        """The device tensors and variables live on, e.g. ``"cpu"`` or ``"cuda:0"``."""

    @abc.abstractmethod
    def to_tensor(self, value: np.ndarray | float | int | bool, dtype: str | None = None) -> Any:
        """Convert numpy (or a Python scalar) to a backend tensor on :attr:`device`."""

    @abc.abstractmethod
    def to_numpy(self, tensor: Any) -> np.ndarray:
        """Convert a backend tensor or variable to a numpy array (copied to host).

        On the CPU the result may share memory with ``tensor`` (as torch's ``.numpy()`` does):
        copy it before keeping it across an in-place update of a variable.
        """

    @abc.abstractmethod
    def variable(self, name: str, value: np.ndarray, trainable: bool = True) -> Any:
        """Create a variable holding ``value`` (a numpy array); ``name`` is its full scope path.

        A variable made with ``trainable=False`` never receives a gradient or an optimizer
        update: :meth:`gradients` reports zeros for it and a :class:`TrainStep` given it leaves
        it unchanged. It changes only through :meth:`assign_numpy` and the ``assign`` /
        ``polyak`` ops.

        Ownership: the returned object is the variable's *handle*, which components keep for
        the backend's lifetime. Its value changes only through :meth:`assign_numpy`, the
        ``assign``/``polyak`` ops and train steps; a backend whose arrays are immutable swaps
        the value behind the handle (and its compiled programs take and return the values of
        the handles they touch). Where components use a variable as a tensor (the ops, Python
        arithmetic operators, indexing, ``.shape``) the handle must behave like its value.
        """

    @abc.abstractmethod
    def is_trainable(self, variable: Any) -> bool:
        """Whether ``variable`` (made by :meth:`variable`) is trainable."""

    @abc.abstractmethod
    def assign_numpy(self, variable: Any, value: np.ndarray) -> None:
        """Overwrite a variable from numpy (shape and dtype already validated by the caller)."""

    # --- computation -----------------------------------------------------------------------
    @abc.abstractmethod
    def function(self, fn: Callable) -> Callable:
        """Wrap an inference-only function (no gradients); compiled in static mode."""

    @abc.abstractmethod
    def train_step(
        self,
        loss_fn: Callable[..., Sequence[Any]],
        variables: Sequence[Any],
        optimizer: dict,
    ) -> TrainStep:
        """Make an update step minimising ``loss_fn(*inputs)[0]`` over ``variables``.

        ``optimizer`` is a validated optimizer spec dict: ``type`` (adam, rmsprop, sgd),
        ``learning_rate``, ``max_grad_norm`` (None = no clipping), ``eps``, ``betas``/``alpha``/
        ``momentum`` where they apply. In static mode the whole step (forward, loss, backward,
        clipping, optimizer update) is compiled as one unit. The step also runs in two halves
        (:meth:`TrainStep.compute_gradients`, :meth:`TrainStep.apply_gradients`) with an
        optional :attr:`TrainStep.gradient_hook` between them. Non-trainable variables in
        ``variables`` are never updated.
        """

    @abc.abstractmethod
    def gradients(self, loss_fn: Callable[..., Sequence[Any]], variables: Sequence[Any], *inputs):
        """Return ``(loss, [grad per variable])`` as numpy; for tests and gradient parity.

        ``variables`` are variables made with :meth:`variable`; a variable the loss does not
        depend on, or a non-trainable one, gets a zero gradient.
        """

    @property
    def fuses_loops(self) -> bool:
        """Whether :meth:`fused_loop` runs a whole loop as one compiled program (static mode of
        a backend that can). Agents fuse their update rounds only where this is True: in eager
        mode a loop of single steps is what runs anyway."""
        return False

    def fused_loop(self, body: Callable[..., Sequence[Any]]) -> "FusedLoop":
        """Make a loop that runs ``body`` once per step, in order, as one program where it can.

        ``loop(per_step, constants)`` runs, for ``k`` in ``0 .. K-1`` (``K`` the leading
        dimension of every ``per_step`` tensor)::

            outputs_k = body(*(x[k] for x in per_step), *constants)

        and returns the outputs stacked along a new leading axis (a tuple of ``[K, ...]``
        tensors, detached). ``body`` changes variables through :meth:`TrainStep.inline` and the
        ``assign``/``polyak`` ops, so step ``k + 1`` sees step ``k``'s updates, exactly as ``K``
        separate calls would. ``body`` must return a tuple of tensors of fixed shapes.

        In static mode a backend compiles the whole loop (one program per distinct input
        shape; :attr:`FusedLoop.trace_count`); this default runs it as a Python loop, which is
        what eager mode does.
        """
        return PythonLoop(self, body)

    def set_num_threads(self, num_threads: int) -> None:
        """Limit the framework's CPU threads (per process). Small RL networks on CPU usually run
        fastest on one thread; the default implementation does nothing."""

    def describe(self) -> str:
        """A one-line description: name, mode, device."""
        return f"{self.name} ({self.mode}, {self.device})"


class FusedLoop(Protocol):
    """What :meth:`Backend.fused_loop` returns: ``loop(per_step, constants) -> stacked outputs``."""

    def __call__(self, per_step: Sequence[Any], constants: Sequence[Any] = ()) -> tuple[Any, ...]:
        """Run the body once per leading index of ``per_step``; outputs stacked ``[K, ...]``."""
        ...

    @property
    def trace_count(self) -> int | None:
        """Programs traced/compiled so far (one per distinct input shape), None when not compiled."""
        ...


class PythonLoop:
    """The default :meth:`Backend.fused_loop`: a plain Python loop over the body (eager).

    Args:
        backend: the backend whose ops stack the outputs.
        body: the loop body (see :meth:`Backend.fused_loop`).
    """

    def __init__(self, backend: Backend, body: Callable[..., Sequence[Any]]):
        self.backend = backend
        self.body = body

    def __call__(self, per_step: Sequence[Any], constants: Sequence[Any] = ()) -> tuple[Any, ...]:
        """Run ``body`` for every leading index of ``per_step`` and stack its outputs."""
        per_step, constants = list(per_step), list(constants)
        if not per_step:
            raise ValueError("fused_loop needs at least one per-step tensor (its leading dimension is K).")
        steps = int(per_step[0].shape[0])
        outputs: list[Sequence[Any]] = []
        for k in range(steps):
            try:
                outputs.append(tuple(self.body(*(x[k] for x in per_step), *constants)))
            except NonFiniteError as exc:
                # The step refused its update; the later steps of the round are not run at all.
                raise non_finite_update_error(exc.what or str(exc), k + 1, steps) from None
        if not outputs:
            return ()
        stack = self.backend.ops.stack
        stop = self.backend.ops.stop_gradient
        return tuple(stack([stop(out[i]) for out in outputs], axis=0) for i in range(len(outputs[0])))

    @property
    def trace_count(self) -> int | None:
        """Nothing is compiled: None."""
        return None
