"""The backend contract.

A backend turns backend-neutral components into computation. Components never import a
framework; their graph functions call ``self.ops.<name>`` (:mod:`rlgraph_core.backend.ops`) and
Python arithmetic operators on the tensors they receive. Everything a framework does differently
lives behind :class:`Backend` and its :class:`TrainStep`.

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
import re
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from rlgraph_core.backend.ops import Ops
from rlgraph_core.errors import ConfigError, NonFiniteError

#: ``hook(flat_gradients) -> flat_gradients``: see :attr:`TrainStep.gradient_hook`.
GradientHook = Callable[[np.ndarray], np.ndarray]


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


class InputLearningRateStep(TrainStep):
    """A :class:`TrainStep` whose programs take the learning rate as an input (a variable or a traced
    argument), so that changing it never retraces or recompiles: the step keeps the value as a
    Python float and :meth:`_push_learning_rate` writes each new one into that input."""

    _lr_value: float

    @property
    def learning_rate(self) -> float:
        """Current learning rate (an input of the step's programs: changing it never retraces)."""
        return self._lr_value

    @learning_rate.setter
    def learning_rate(self, value: float) -> None:
        self._lr_value = float(value)
        self._push_learning_rate(self._lr_value)

    @abc.abstractmethod
    def _push_learning_rate(self, value: float) -> None:
        """Write ``value`` into the input the step's programs read the learning rate from."""


def parse_device(requested: str | None, backend: str, choices: str) -> str | int:
    """What a ``train.device`` string asks for: ``"auto"``, ``"cpu"``, or the index ``N`` of the GPU
    that ``gpu[:N]`` / ``cuda[:N]`` names (aliases of each other, so one config works on every
    backend). Whether that device exists is the backend's to check.

    Args:
        requested: the config's device string (None: auto); case and spaces around it are ignored.
        backend: the backend's registry name, for the message.
        choices: the device names the backend accepts, for the message.

    Raises:
        ConfigError: a name of none of those forms.
    """
    req = (requested or "auto").strip().lower()
    if req in ("auto", "cpu"):
        return req
    if req == "cpu:0":
        return "cpu"
    match = re.fullmatch(r"(?:cuda|gpu)(?::(\d+))?", req)
    if match is None:
        raise ConfigError(f"'train.device' = '{requested}' is not known to the {backend} backend; use {choices}.")
    return int(match.group(1) or 0)


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
