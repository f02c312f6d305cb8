"""The backend contract.

A backend turns backend-neutral components into computation. Components never import a
framework; their graph functions call ``self.ops.<name>`` and Python arithmetic operators on the
tensors they receive. Everything a framework does differently lives behind this class.

Conventions shared by every backend (so weights move between backends as plain numpy):

* dense weights are stored ``[in, out]`` and biases ``[out]``;
* ``float32`` everywhere for floating values, ``int64`` for integer tensors;
* variables are created from numpy initial values, so a seed gives identical initial weights on
  every backend.
"""

from __future__ import annotations

import abc
from typing import Any, Callable, Sequence

import numpy as np

#: Every name a backend's ``ops`` namespace must provide, with its meaning. The parity and
#: contract tests iterate this table, so a backend cannot silently miss one.
OPS_CONTRACT: dict[str, str] = {
    "dense": "dense(x, w, b) -> x @ w + b, w is [in, out]",
    "activation": "activation(name, x): one of relu, tanh, sigmoid, elu (alpha 1), "
                  "softplus (log(1 + e^x)), leaky_relu (negative slope 0.2), linear",
    "reduce_sum": "reduce_sum(x, axis=None, keepdims=False)",
    "reduce_mean": "reduce_mean(x, axis=None, keepdims=False)",
    "reduce_max": "reduce_max(x, axis=None, keepdims=False)",
    "argmax": "argmax(x, axis=-1) -> int64; ties resolve to the first index",
    "gather_last": "gather_last(x, idx): x[..., idx] per row; x [B, N], idx [B] -> [B]",
    "one_hot": "one_hot(idx, depth) -> float32",
    "where": "where(cond, a, b)",
    "abs": "abs(x)",
    "square": "square(x)",
    "sqrt": "sqrt(x)",
    "exp": "exp(x)",
    "log": "log(x)",
    "minimum": "minimum(a, b) elementwise",
    "maximum": "maximum(a, b) elementwise",
    "clip": "clip(x, lo, hi)",
    "stop_gradient": "stop_gradient(x): same value, no gradient flows back",
    "cast": "cast(x, dtype) with dtype one of 'float32', 'int64', 'bool'",
    "huber": "huber(x, delta): 0.5 x^2 if |x| <= delta else delta (|x| - 0.5 delta)",
    "softmax": "softmax(x, axis=-1)",
    "log_softmax": "log_softmax(x, axis=-1)",
    "concat": "concat(list_of_x, axis=-1)",
    "stack": "stack(list_of_x, axis=0)",
    "reshape": "reshape(x, shape)",
    "expand_dims": "expand_dims(x, axis)",
    "squeeze": "squeeze(x, axis)",
    "zeros_like": "zeros_like(x)",
    "constant": "constant(value, dtype='float32') -> tensor on the backend's device",
    "assign": "assign(variable, value): in-place copy, no gradient",
    "polyak": "polyak(targets, sources, tau): in place t <- (1 - tau) t + tau s for each pair",
}


class TrainStep(abc.ABC):
    """A compiled-or-eager optimisation step: loss, gradients, clipping and update in one call."""

    @abc.abstractmethod
    def __call__(self, *inputs) -> tuple[Any, ...]:
        """Run one update on ``inputs``; return ``(loss, *aux)`` as backend tensors (detached)."""

    @abc.abstractmethod
    def get_state(self) -> dict[str, np.ndarray]:
        """Optimizer state (moments, step counts) as numpy arrays keyed by stable names."""

    @abc.abstractmethod
    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Restore optimizer state written by :meth:`get_state`."""

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
            from rlgraph_core.errors import ConfigError

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
    def ops(self) -> Any:
        """The neutral ops namespace (see :data:`OPS_CONTRACT`)."""

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
        clipping, optimizer update) is compiled as one unit.
        """

    @abc.abstractmethod
    def gradients(self, loss_fn: Callable[..., Sequence[Any]], variables: Sequence[Any], *inputs):
        """Return ``(loss, [grad per variable])`` as numpy; for tests and gradient parity.

        ``variables`` are variables made with :meth:`variable`; a variable the loss does not
        depend on, or a non-trainable one, gets a zero gradient.
        """

    def set_num_threads(self, num_threads: int) -> None:
        """Limit the framework's CPU threads (per process). Small RL networks on CPU usually run
        fastest on one thread; the default implementation does nothing."""

    def describe(self) -> str:
        """A one-line description: name, mode, device."""
        return f"{self.name} ({self.mode}, {self.device})"
