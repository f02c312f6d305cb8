"""Optimizers, gradient clipping and the training step of the tf backend.

The update rules are written out on ``tf.Variable`` slots rather than taken from Keras, because
rlgraph promises that one agent config gives the same numbers on every backend: each rule below
follows the corresponding ``torch.optim`` implementation (PyTorch 2.x, ``foreach`` path, no weight
decay) operation by operation, and clipping follows ``torch.nn.utils.clip_grad_norm_``.
Scalar factors that torch computes in Python double precision (bias corrections, step sizes) are
computed here in ``float64`` and cast to ``float32`` once, so the rounding matches as well.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf

from rlgraph_core.backend import InputLearningRateStep, describe_non_finite, non_finite_update_error

#: ``torch.nn.utils.clip_grad_norm_`` adds this to the norm before dividing.
CLIP_EPS = 1e-6

#: Slot names per optimizer type, named like torch's optimizer state keys so that state dumps of
#: the two backends line up key for key.
SLOTS = {
    "adam": ("exp_avg", "exp_avg_sq"),
    "rmsprop": ("square_avg",),
    "sgd": (),
}


def global_norm(grads: Sequence[Any]) -> Any:
    """The global L2 norm of ``grads`` (None entries skipped; 0 for none), float32; NaN or inf when
    any gradient value is (the finiteness check of an update reads it)."""
    present = [g for g in grads if g is not None]
    if not present:
        return tf.constant(0.0, tf.float32)
    return tf.norm(tf.stack([tf.norm(tf.reshape(g, [-1])) for g in present]))


def new_guard(device: str = "/CPU:0") -> tf.Variable:
    """A fused loop's non-finite guard ``[ok, loss, norm]`` (float32), reset to ``[1, 0, 0]``."""
    with tf.device(device):
        return tf.Variable([1.0, 0.0, 0.0], dtype=tf.float32, trainable=False, name="fused_loop/guard")


def raise_non_finite(health: Any, step: int | None = None, steps: int | None = None) -> None:
    """Raise the NonFiniteError for ``health = [loss, gradient norm]`` (numpy or an eager tensor)."""
    loss, norm = (float(v) for v in np.asarray(health).reshape(-1)[:2])
    raise non_finite_update_error(describe_non_finite(loss, norm), step, steps)


def clip_by_global_norm(grads: Sequence[Any], max_norm: float | None, total: Any = None) -> list[Any]:
    """Scale ``grads`` so their global L2 norm is at most ``max_norm`` (torch's formula).

    ``coef = min(1, max_norm / (norm + 1e-6))``; every gradient is multiplied by ``coef`` (which is
    exactly 1 when no clipping is needed). ``None`` entries (variables the loss does not touch)
    stay ``None``; ``max_norm=None`` returns the gradients unchanged. ``total``: the global norm
    where the caller has it already (:func:`global_norm`).
    """
    grads = list(grads)
    if max_norm is None:
        return grads
    present = [g for g in grads if g is not None]
    if not present:
        return grads
    if total is None:
        total = global_norm(present)
    coef = tf.minimum(tf.constant(max_norm, tf.float32) / (total + CLIP_EPS), 1.0)
    return [None if g is None else g * coef for g in grads]


class TorchStyleOptimizer:
    """Adam, RMSprop or SGD(momentum) on ``tf.Variable`` s, numerically like ``torch.optim``.

    Args:
        spec: a validated optimizer spec dict (``type``, ``learning_rate``, ``eps``, ``betas``,
            ``alpha``, ``momentum``).
        variables: the ``tf.Variable`` s to update.
        device: TensorFlow device string the slots are created on.

    Update rules (``g`` gradient, ``t`` step count after increment, ``lr`` learning rate)::

        adam:     m <- m + (1 - b1) (g - m);  v <- b2 v + (1 - b2) g^2
                  p <- p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
        rmsprop:  s <- alpha s + (1 - alpha) g^2;  d = sqrt(s) + eps
                  momentum > 0: buf <- momentum buf + g / d;  p <- p - lr buf
                  else:         p <- p - lr g / d
        sgd:      momentum > 0: buf <- momentum buf + g;  p <- p - lr buf
                  else:         p <- p - lr g

    One step counter is shared by all variables (torch keeps one per parameter; they only differ
    when some parameter never receives a gradient).
    """

    def __init__(self, spec: dict, variables: Sequence[tf.Variable], device: str = "/CPU:0"):
        self.kind = spec["type"]
        if self.kind not in SLOTS:
            raise ValueError(f"Unknown optimizer type '{self.kind}'; use adam, rmsprop or sgd.")
        self.variables = list(variables)
        self.eps = float(spec.get("eps", 1e-8))
        self.betas = tuple(float(b) for b in spec.get("betas", (0.9, 0.999)))
        self.alpha = float(spec.get("alpha", 0.99))
        self.momentum = float(spec.get("momentum", 0.0))
        slot_names = list(SLOTS[self.kind])
        if self.kind in ("rmsprop", "sgd") and self.momentum > 0:
            slot_names.append("momentum_buffer")
        self.slot_names = tuple(slot_names)
        with tf.device(device):
            self.lr = tf.Variable(
                float(spec["learning_rate"]), dtype=tf.float64, trainable=False, name="optimizer/learning_rate"
            )
            self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="optimizer/step")
            self.slots: dict[str, list[tf.Variable]] = {
                name: [
                    tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False, name=f"optimizer/{i}/{name}")
                    for i, v in enumerate(self.variables)
                ]
                for name in self.slot_names
            }

    def apply(self, grads: Sequence[Any], ok: Any = None) -> None:
        """Apply one update with ``grads`` (aligned with the variables; ``None`` = skip).

        ``ok``: a boolean scalar tensor; where it is False every variable, slot and the step count
        keep their old values (``tf.where``: the update is computed and discarded, no branch)."""

        def put(var, new):
            var.assign(new if ok is None else tf.where(ok, new, var))

        step_new = self.step + 1
        put(self.step, step_new)
        t = tf.cast(step_new, tf.float64)
        lr64 = self.lr
        if self.kind == "adam":
            b1, b2 = self.betas
            step_size = tf.cast(lr64 / (1.0 - tf.pow(tf.constant(b1, tf.float64), t)), tf.float32)
            bc2_sqrt = tf.cast(tf.sqrt(1.0 - tf.pow(tf.constant(b2, tf.float64), t)), tf.float32)
            for i, (p, g) in enumerate(zip(self.variables, grads)):
                if g is None:
                    continue
                m, v = self.slots["exp_avg"][i], self.slots["exp_avg_sq"][i]
                m_new = m + (1.0 - b1) * (g - m)
                v_new = v * b2 + (1.0 - b2) * (g * g)
                denom = tf.sqrt(v_new) / bc2_sqrt + self.eps
                put(p, p - step_size * (m_new / denom))
                put(m, m_new)
                put(v, v_new)
            return
        lr = tf.cast(lr64, tf.float32)
        if self.kind == "rmsprop":
            for i, (p, g) in enumerate(zip(self.variables, grads)):
                if g is None:
                    continue
                s = self.slots["square_avg"][i]
                s_new = s * self.alpha + (1.0 - self.alpha) * (g * g)
                put(s, s_new)
                denom = tf.sqrt(s_new) + self.eps
                if self.momentum > 0:
                    buf = self.slots["momentum_buffer"][i]
                    buf_new = buf * self.momentum + g / denom
                    put(buf, buf_new)
                    put(p, p - lr * buf_new)
                else:
                    put(p, p - lr * (g / denom))
            return
        for i, (p, g) in enumerate(zip(self.variables, grads)):  # sgd
            if g is None:
                continue
            if self.momentum > 0:
                buf = self.slots["momentum_buffer"][i]
                buf_new = buf * self.momentum + g
                put(buf, buf_new)
                put(p, p - lr * buf_new)
            else:
                put(p, p - lr * g)

    def get_state(self) -> dict[str, np.ndarray]:
        """Slots and step count as numpy, keyed ``"<variable index>/<slot>"`` like torch's state."""
        out: dict[str, np.ndarray] = {}
        step = np.asarray(self.step.numpy(), np.float32)
        for i in range(len(self.variables)):
            if self.kind != "sgd":
                out[f"{i}/step"] = step.copy()
            for name in self.slot_names:
                out[f"{i}/{name}"] = np.array(self.slots[name][i].numpy(), copy=True)
        return out

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Restore what :meth:`get_state` wrote (unknown keys are an error; missing ones stay)."""
        for key, value in state.items():
            idx, _, name = key.partition("/")
            if not idx.isdigit() or int(idx) >= len(self.variables):
                raise ValueError(
                    f"Optimizer state key '{key}' does not name one of the {len(self.variables)} optimized variables."
                )
            if name == "step":
                self.step.assign(int(np.asarray(value).item()))
            elif name in self.slots:
                self.slots[name][int(idx)].assign(np.asarray(value, np.float32))
            else:
                raise ValueError(
                    f"Optimizer state key '{key}': '{name}' is not a slot of "
                    f"{self.kind} (slots: {', '.join(('step',) + self.slot_names)})."
                )


#: Most concrete functions a :class:`CompiledFunction` keeps for fast dispatch.
MAX_CONCRETE = 32


def _signature_key(args) -> tuple | None:
    """``((dtype, shape), ...)`` of eager tensor arguments; None if any argument is not one.

    An argument may also be a list of tensors and Nones (the gradients of an update, None for
    a variable the loss does not reach): its key is the tuple of its entries' keys.
    """
    if not tf.executing_eagerly():
        return None
    key: list = []
    for a in args:
        if isinstance(a, tf.Tensor):
            key.append((a.dtype, tuple(a.shape)))
        elif isinstance(a, list) and all(g is None or isinstance(g, tf.Tensor) for g in a):
            key.append(("list", tuple(None if g is None else (g.dtype, tuple(g.shape)) for g in a)))
        else:
            return None
    return tuple(key)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else ""


class CompiledFunction:
    """``tf.function`` that tries XLA first and falls back to a plain graph if XLA fails.

    XLA compiles on the first call of each input signature, so a failure shows up there: the
    function is then re-created with ``jit_compile=False`` and called again, with a
    ``RuntimeWarning``. ``reduce_retracing=True`` makes a second batch size generalise the
    traced signature instead of tracing once per size.

    Calls made eagerly with tensors only are dispatched through a small cache of concrete
    functions keyed by the inputs' dtypes and shapes: ``tf.function``'s general dispatch (which
    matches Python values, nested structures and subtypes) costs about twice as much per call
    as calling the concrete function it picks, and acting calls this once per env step.

    Args:
        fn: the Python function to trace.
        jit_compile: try XLA (``True``) or use a plain ``tf.function`` graph (``False``).
        what: a short description used in the fallback warning.
        device: a TensorFlow device string to run under (``tf.device``), or None for TF's
            default placement.
    """

    def __init__(self, fn: Callable, jit_compile: bool, what: str, device: str | None = None):
        self.python_function = fn
        self.what = what
        self.jit_compile = jit_compile
        self.device = device
        self._fn = tf.function(fn, jit_compile=jit_compile, reduce_retracing=True)
        self._verified = not jit_compile
        self._concrete: dict = {}

    def __call__(self, *args):
        """Call the traced function (tracing it for a new input signature)."""
        if self.device is not None:
            with tf.device(self.device):
                return self._call(*args)
        return self._call(*args)

    def _call(self, *args):
        if self._verified:
            key = _signature_key(args)
            if key is None:
                return self._fn(*args)
            concrete = self._concrete.get(key)
            if concrete is not None:
                return concrete(*args)
            out = self._fn(*args)  # traces if this signature is new
            if len(self._concrete) < MAX_CONCRETE:
                self._concrete[key] = self._fn.get_concrete_function(*args)
            return out
        try:
            out = self._fn(*args)
        except (
            tf.errors.InvalidArgumentError,
            tf.errors.UnimplementedError,
            tf.errors.InternalError,
            tf.errors.UnknownError,
            NotImplementedError,
        ) as exc:
            failure = exc  # decided below, outside this block, so no exception chain forms
        else:
            self._verified = True
            return out
        # XLA failed. Without XLA: if that fails too, the function itself is wrong (a shape or
        # dtype bug) and its own error propagates, with no XLA warning and XLA kept for the
        # next call; if it succeeds, XLA was to blame and the plain graph is used from now on.
        plain = tf.function(self.python_function, jit_compile=False, reduce_retracing=True)
        out = plain(*args)
        warnings.warn(
            f"XLA compilation of the {self.what} failed ({type(failure).__name__}: "
            f"{_first_line(failure)}); using tf.function without jit_compile instead.",
            RuntimeWarning,
            stacklevel=3,
        )
        self.jit_compile = False
        self._fn = plain
        self._concrete.clear()
        self._verified = True
        return out

    def experimental_get_tracing_count(self) -> int:
        """How many concrete graphs the underlying ``tf.function`` has traced (after an XLA
        fallback: the plain graph's, the program in use)."""
        return self._fn.experimental_get_tracing_count()


class TFTrainStep(InputLearningRateStep):
    """Loss, gradients, global-norm clipping and update; one ``tf.function`` in static mode.

    Without a gradient hook a call is the fused step (static mode: one ``tf.function``, XLA when
    it compiles). The split halves are compiled apart in static mode: :meth:`compute_gradients`
    (forward, backward, flattening) is one ``tf.function`` and :meth:`apply_gradients`
    (un-flattening, clipping, update) another, so a gradient hook runs in Python between two
    graphs. The learning rate is a variable in every graph: changing it never retraces.

    Args:
        loss_fn: ``loss_fn(*inputs) -> (loss, *aux)`` in backend tensors.
        variables: the ``tf.Variable`` s to optimise (non-trainable ones are never updated).
        spec: the validated optimizer spec dict (see ``Backend.train_step``).
        static: compile the whole step (forward, loss, backward, clipping, update) as one
            ``tf.function``; else run it eagerly.
        jit_compile: in static mode, try XLA first (falls back with a warning).
        device: TensorFlow device string for the optimizer slots.
        pin_device: run every step under ``tf.device(device)`` (needed only when TF sees a GPU).
        guard: the backend's fused-loop guard (see :func:`new_guard`), read and written by
            :meth:`inline` inside a loop; None: a guard of the step's own.

    A non-finite loss or gradient (global norm) is never applied (issue 19): the update graph, in
    both modes, computes ``health = [loss, norm]`` and assigns every variable, slot and the step
    count its old value where it is not finite; the step returns ``health`` and the Python call
    raises :class:`~rlgraph_core.errors.NonFiniteError` after it. Inside a fused loop the guard
    carries a failure to every later step of the round (the loop raises after it).
    """

    def __init__(
        self,
        loss_fn: Callable,
        variables: Sequence[tf.Variable],
        spec: dict,
        static: bool,
        jit_compile: bool = True,
        device: str = "/CPU:0",
        pin_device: bool = False,
        guard: tf.Variable | None = None,
    ):
        self.loss_fn = loss_fn
        self._guard = new_guard(device) if guard is None else guard
        self.variables = list(variables)
        self._trainable = [isinstance(v, tf.Variable) and bool(v.trainable) for v in self.variables]
        self._watched = [v for v, t in zip(self.variables, self._trainable) if t]
        self._sizes = [int(np.prod(v.shape)) for v in self.variables]
        #: which variables the last compute_gradients reached (apply_gradients skips the rest);
        #: in static mode it is recorded when the gradient graph is traced
        self._reached = tuple(self._trainable)
        self.max_grad_norm = spec.get("max_grad_norm")
        self.optimizer = TorchStyleOptimizer(spec, self.variables, device)
        self._lr_value = float(spec["learning_rate"])
        self.compiled = static
        self._jit_compile = jit_compile
        self._device = device if pin_device else None
        self._apply_fns: dict[tuple[bool, ...], Callable] = {}
        if static:
            self._update = self._guarded_apply
            self._step = CompiledFunction(self._eager_step, jit_compile, "train step", self._device)
            self._compute = CompiledFunction(
                self._flat_loss_and_grads, jit_compile, "gradient computation", self._device
            )
        else:
            # Eager mode runs the loss and its gradients define-by-run (the user's code, debuggable
            # line by line). Clipping and the optimizer update are backend internals: like torch's
            # fused ``foreach`` optimizer kernels they run as one small graph instead of ~10 eager
            # ops per variable, traced once (the gradients' shapes never change). Dispatched
            # through CompiledFunction's concrete-function cache: PPO's update, 1.4 ms with
            # tf.function's general dispatch, 0.85 ms so (loaded machine).
            self._update = CompiledFunction(self._guarded_apply, False, "gradient update")
            self._step = self._eager_step
            self._compute = self._flat_loss_and_grads

    @property
    def num_parameters(self) -> int:
        """Total number of elements of the step's variables (the flat gradient's length)."""
        return sum(self._sizes)

    def _loss_and_grads(self, inputs) -> tuple[Sequence[Any], list[Any]]:
        """The loss outputs and one gradient per variable: None where the loss does not reach
        the variable or it is non-trainable (non-trainable variables are not even watched)."""
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(self._watched)
            outputs = self.loss_fn(*inputs)
        watched_grads = iter(tape.gradient(outputs[0], self._watched))
        return outputs, [next(watched_grads) if t else None for t in self._trainable]

    def _clip_and_apply(self, grads):
        """Clip ``grads`` and update, unconditionally (apply_gradients: the contract checked the
        flat buffer before)."""
        self.optimizer.apply(clip_by_global_norm(grads, self.max_grad_norm))

    def _guarded_apply(self, grads, loss):
        """Clip ``grads`` and update only if ``loss`` and the gradients' global norm are finite;
        return ``health = [loss, norm]`` (the fused step's update)."""
        return self._guarded(grads, loss, in_loop=False)

    def _guarded(self, grads, loss, in_loop):
        """:meth:`_guarded_apply`; ``in_loop`` also only if no earlier step of the fused loop
        failed (the guard), and a failure is recorded in the guard."""
        norm = global_norm(grads)
        health = tf.stack([tf.reshape(tf.cast(loss, tf.float32), []), norm])
        ok = tf.reduce_all(tf.math.is_finite(health))
        if in_loop:
            guard = self._guard.read_value()
            healthy = guard[0] > 0.5
            first = tf.logical_and(healthy, tf.logical_not(ok))
            ok = tf.logical_and(ok, healthy)
            flag = tf.reshape(tf.cast(ok, tf.float32), [1])
            self._guard.assign(tf.concat([flag, tf.where(first, health, guard[1:])], 0))
        self.optimizer.apply(clip_by_global_norm(grads, self.max_grad_norm, norm), ok)
        return health

    def _eager_step(self, *inputs):
        """The fused step's body: ``(*outputs, health)`` (traced whole in static mode)."""
        outputs, grads = self._loss_and_grads(inputs)
        health = self._update(grads, tf.stop_gradient(outputs[0]))
        return (*(None if o is None else tf.stop_gradient(o) for o in outputs), health)

    def _traceable_step(self, *inputs):
        """The whole update as plain ops (no ``tf.function`` of its own): for a loop body."""
        outputs, grads = self._loss_and_grads(inputs)
        self._guarded(grads, tf.stop_gradient(outputs[0]), in_loop=True)
        return tuple(None if o is None else tf.stop_gradient(o) for o in outputs)

    def inline(self, *inputs):
        """The fused update for the body of a fused loop (:meth:`TFBackend.fused_loop`).

        While a loop is being traced this adds the step's ops (forward, backward, clipping,
        optimizer update on the ``tf.Variable`` s, the learning rate read from the optimizer's
        variable) to the loop's program, which compiles them with the rest of the body. Called
        eagerly (eager mode, or outside a loop) it is the step itself (raising NonFiniteError for a non-finite
        update); traced, a non-finite step applies nothing and clears the loop's guard, and the
        loop raises after the round. A gradient hook is not
        run here: it is numpy code and cannot be traced (the contract's inline is the step
        without a hook).
        """
        if tf.executing_eagerly():
            return self._fused_step(*inputs)
        return self._traceable_step(*inputs)

    @property
    def trace_count(self) -> int | None:
        """Graphs traced so far for this step's compiled parts (fused step, gradient half, update
        half) in static mode; None in eager mode. The learning rate is a variable, so changing
        it never adds one; a new input shape adds at most one per part (``reduce_retracing``
        generalises the second shape's signature)."""
        if not self.compiled:
            return None
        parts = [self._step, self._compute, *self._apply_fns.values()]
        return sum(int(fn.experimental_get_tracing_count()) for fn in parts)

    def _fused_step(self, *inputs):
        if self._device is not None and not self.compiled:
            with tf.device(self._device):
                *outputs, health = self._step(*inputs)
        else:
            *outputs, health = self._step(*inputs)
        health = health.numpy()  # one host read per step: the update graph already decided
        if not np.isfinite(health).all():
            raise_non_finite(health)
        return tuple(outputs)

    def _flat_loss_and_grads(self, *inputs):
        """``(outputs, flat)``: the gradient half of the step (traced as a whole in static mode)."""
        outputs, grads = self._loss_and_grads(inputs)
        self._reached = tuple(g is not None for g in grads)  # Python: runs when traced
        pieces = [
            tf.zeros([n], tf.float32) if g is None else tf.reshape(tf.cast(g, tf.float32), [-1])
            for g, n in zip(grads, self._sizes)
        ]
        flat = tf.concat(pieces, 0) if pieces else tf.zeros([0], tf.float32)
        return tuple(None if o is None else tf.stop_gradient(o) for o in outputs), flat

    def compute_gradients(self, *inputs) -> tuple[tuple[Any, ...], np.ndarray]:
        """Forward and backward (one graph in static mode); ``(outputs, flat float32 gradients)``."""
        if self._device is not None and not self.compiled:
            with tf.device(self._device):
                outputs, flat = self._compute(*inputs)
        else:
            outputs, flat = self._compute(*inputs)
        return outputs, np.array(flat.numpy(), dtype=np.float32, copy=True)

    def _apply_fn(self) -> Callable:
        """The update from a flat buffer, for the current set of reached variables (one graph
        per set; the set is a property of the loss, so in practice one graph)."""
        reached = self._reached
        fn = self._apply_fns.get(reached)
        if fn is None:

            def apply_flat(flat):
                pieces = tf.split(flat, self._sizes) if self._sizes else []
                self._clip_and_apply(
                    [
                        tf.reshape(piece, v.shape) if use else None
                        for piece, v, use in zip(pieces, self.variables, reached)
                    ]
                )

            if self.compiled:
                fn = CompiledFunction(apply_flat, self._jit_compile, "gradient update", self._device)
            else:
                fn = CompiledFunction(apply_flat, False, "gradient update")
            self._apply_fns[reached] = fn
        return fn

    def apply_gradients(self, flat: np.ndarray) -> None:
        """Un-flatten ``flat``, clip by global norm and update (one graph in either mode)."""
        flat = self._checked_flat(flat)
        fn = self._apply_fn()
        if self._device is not None:
            with tf.device(self._device):
                fn(tf.constant(flat))
        else:
            fn(tf.constant(flat))

    @property
    def jit_compiled(self) -> bool:
        """Whether the step runs XLA-compiled (static mode and XLA accepted it)."""
        return self.compiled and self._step.jit_compile

    def _push_learning_rate(self, value: float) -> None:
        """The learning rate is a ``tf.Variable`` the step reads."""
        self.optimizer.lr.assign(value)

    def get_state(self) -> dict[str, np.ndarray]:
        """Optimizer slots and step count as numpy (keys like torch's: ``"0/exp_avg"``)."""
        return self.optimizer.get_state()

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Restore optimizer state written by :meth:`get_state`."""
        self.optimizer.set_state(state)

    def variable_shapes(self) -> list[tuple[int, ...]]:
        """Shapes of the optimized variables, in the order the state keys index them."""
        return [tuple(int(d) for d in v.shape) for v in self.variables]
