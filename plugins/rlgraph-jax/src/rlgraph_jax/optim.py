"""Optimizers, gradient clipping and the training step of the jax backend.

The update rules are optax's (``optax.adam``, ``optax.rmsprop`` with ``eps_in_sqrt=False``, as
torch adds eps after the root, and ``optax.sgd``), which follow the same formulas as
``torch.optim`` up to float32 rounding. The learning rate is an injected hyperparameter
(``optax.inject_hyperparams``): a traced value held in a cell, so a schedule never recompiles.
Clipping by global norm uses torch's formula ``coef = min(1, max_norm / (norm + 1e-6))`` (optax's
``clip_by_global_norm`` divides by the bare norm; the 1e-6 keeps this backend's numbers on the
other backends' side of the parity tolerance), with ``optax.tree.norm``.

Each variable has its own optax state (as torch keeps per-parameter state): a variable the loss
does not reach in a step, or a non-trainable one, is skipped, so its moments never move.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from rlgraph_core.backend import InputLearningRateStep, describe_non_finite, non_finite_update_error
from rlgraph_jax.state import Cell, CellRegistry, JaxVariable, StatefulFunction, swapped, track_reads, unwrap_tree

#: ``torch.nn.utils.clip_grad_norm_`` adds this to the norm before dividing.
CLIP_EPS = 1e-6

#: Optimizer state slots, named like torch's state keys, and the optax field holding each.
SLOTS = {
    "adam": {"exp_avg": "mu", "exp_avg_sq": "nu"},
    "rmsprop": {"square_avg": "nu"},
    "sgd": {},
}


def make_optimizer(spec: dict) -> optax.GradientTransformation:
    """The optax transformation for a validated optimizer spec, learning rate injected."""
    kind = spec["type"]
    if kind not in SLOTS:
        raise ValueError(f"Unknown optimizer type '{kind}'; use adam, rmsprop or sgd.")
    eps = float(spec.get("eps", 1e-8))
    momentum = float(spec.get("momentum", 0.0) or 0.0)
    if kind == "adam":
        b1, b2 = (float(b) for b in spec.get("betas", (0.9, 0.999)))

        def build(learning_rate):
            return optax.adam(learning_rate, b1=b1, b2=b2, eps=eps)
    elif kind == "rmsprop":
        alpha = float(spec.get("alpha", 0.99))

        def build(learning_rate):
            return optax.rmsprop(learning_rate, decay=alpha, eps=eps, eps_in_sqrt=False, momentum=momentum or None)
    else:

        def build(learning_rate):
            return optax.sgd(learning_rate, momentum=momentum or None)

    return optax.inject_hyperparams(build)(learning_rate=float(spec["learning_rate"]))


def _namedtuples(tree: Any):
    """Every NamedTuple inside ``tree`` (depth first, outermost first)."""
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        yield tree
        for item in tree:
            yield from _namedtuples(item)
    elif isinstance(tree, (tuple, list)):
        for item in tree:
            yield from _namedtuples(item)


def _get_field(state: Any, field: str) -> Any:
    for nt in _namedtuples(state):
        if field in nt._fields:
            return getattr(nt, field)
    raise KeyError(field)


def _set_field(tree: Any, field: str, value: Any) -> Any:
    """``tree`` with every NamedTuple field called ``field`` replaced by ``value``."""
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        items = {f: _set_field(getattr(tree, f), field, value) for f in tree._fields}
        if field in tree._fields:
            old = getattr(tree, field)
            items[field] = jnp.asarray(value, dtype=old.dtype).reshape(old.shape)
        return type(tree)(**items)
    if isinstance(tree, (tuple, list)):
        return type(tree)(_set_field(t, field, value) for t in tree)
    return tree


def global_norm(grads: Sequence[Any]) -> Any:
    """The global L2 norm of ``grads`` (None entries skipped; 0 for none) as a float32 scalar;
    NaN or inf when any gradient value is (the finiteness check of an update reads it)."""
    present = [g for g in grads if g is not None]
    if not present:
        return jnp.zeros((), jnp.float32)
    return jnp.asarray(optax.tree.norm(present), jnp.float32)


def new_guard(value: Any = None) -> Cell:
    """A fused loop's non-finite guard cell ``[ok, loss, norm]`` (float32), reset to ``[1, 0, 0]``."""
    return Cell(jnp.asarray([1.0, 0.0, 0.0], jnp.float32) if value is None else value, "fused_loop/guard")


def raise_non_finite(health: Any, step: int | None = None, steps: int | None = None) -> None:
    """Raise the NonFiniteError for ``health = [loss, gradient norm]`` (one host read)."""
    loss, norm = (float(v) for v in np.asarray(health).reshape(-1)[:2])
    raise non_finite_update_error(describe_non_finite(loss, norm), step, steps)


def clip_by_global_norm(grads: Sequence[Any], max_norm: float | None, total: Any = None) -> list[Any]:
    """Scale ``grads`` (None entries skipped) by torch's ``min(1, max_norm / (norm + 1e-6))``;
    ``total``: the global norm where the caller has it already (:func:`global_norm`)."""
    grads = list(grads)
    present = [g for g in grads if g is not None]
    if max_norm is None or not present:
        return grads
    if total is None:
        total = optax.tree.norm(present)
    coef = jnp.minimum(jnp.float32(max_norm) / (total + CLIP_EPS), 1.0)
    return [None if g is None else g * coef for g in grads]


def _in_trace(cell: Cell) -> bool:
    """Whether ``cell`` holds a tracer (the code runs inside a jit or scan trace)."""
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(cell.value))


class JaxTrainStep(InputLearningRateStep):
    """Loss, gradients, global-norm clipping and optax update over :class:`JaxVariable` s.

    Eager mode runs the loss and its gradients op by op (``jax.value_and_grad`` without
    ``jit``); clipping and the optimizer update, backend internals, run as one compiled function
    (as the tf backend runs its update as one small graph). Static mode compiles the whole step
    with ``jax.jit``, and the two halves (:meth:`compute_gradients`, :meth:`apply_gradients`)
    apart. Every compiled part takes and returns the values of all the backend's cells
    (:class:`~rlgraph_jax.state.StatefulFunction`), the optimizer state and learning rate
    included, so a new learning rate is a new input value, never a new program.

    Args:
        registry: the backend's cells (the optimizer state and learning rate join them).
        loss_fn: ``loss_fn(*inputs) -> (loss, *aux)``.
        variables: the variables to optimise (non-trainable ones are never updated).
        spec: the validated optimizer spec dict.
        static: compile the step.
        guard: the backend's fused-loop guard cell ``[ok, loss, norm]`` (see :func:`new_guard`),
            read and written by :meth:`inline` inside a loop; None: a guard of the step's own.

    A non-finite loss or gradient (global norm) is never applied (issue 19): the update, in both
    modes a compiled program, computes ``health = [loss, norm]`` and keeps the old value of every
    variable and optimizer state it touched where that is not finite (``jnp.where``, no branch);
    the step returns ``health`` and the Python call raises NonFiniteError after it. Inside a fused
    loop the guard carries a failure to every later step of the round (the loop raises after it).
    """

    def __init__(
        self,
        registry: CellRegistry,
        loss_fn: Callable,
        variables: Sequence[JaxVariable],
        spec: dict,
        static: bool,
        guard: Cell | None = None,
    ):
        bad = [type(v).__name__ for v in variables if not isinstance(v, JaxVariable)]
        if bad:
            raise TypeError(f"The jax backend's train_step needs variables made by backend.variable; got {bad[0]}.")
        self.loss_fn = loss_fn
        self.variables = list(variables)
        self.kind = spec["type"]
        self._trainable = [v.trainable for v in self.variables]
        self._sizes = [int(np.prod(v.shape)) for v in self.variables]
        self._reached = tuple(self._trainable)
        self.max_grad_norm = spec.get("max_grad_norm")
        self.tx = make_optimizer(spec)
        self._lr_value = float(spec["learning_rate"])
        self._lr = registry.add(Cell(jnp.asarray(self._lr_value, jnp.float32), "optimizer/learning_rate"))
        self._opt = registry.add(Cell([self.tx.init(v.value) for v in self.variables], "optimizer/state"))
        self._guard = registry.add(new_guard()) if guard is None else guard
        self.compiled = bool(static)
        self._registry = registry
        self._apply_fns: dict[tuple[bool, ...], Callable] = {}
        if static:
            self._step = StatefulFunction(registry, self._single_step)
            self._compute = StatefulFunction(registry, self._flat_loss_and_grads)
            self._update = self._guarded_apply
        else:
            self._step = self._eager_step
            self._compute = self._flat_loss_and_grads
            self._update = StatefulFunction(registry, self._guarded_apply)

    # --- the math ---------------------------------------------------------------------------
    def _loss_and_grads(self, inputs) -> tuple[tuple[Any, ...], list[Any]]:
        """The loss outputs and one gradient per variable (None: not trainable or not reached)."""
        train = [v for v, t in zip(self.variables, self._trainable) if t]
        inputs = unwrap_tree(inputs)
        reads: set[int] = set()

        def objective(values):
            with swapped(train, values), track_reads(self.variables) as tracked:
                outputs = tuple(unwrap_tree(tuple(self.loss_fn(*inputs))))
            reads.update(tracked.ids)
            return outputs[0], outputs

        (_, outputs), grads = jax.value_and_grad(objective, has_aux=True)([v.value for v in train])
        grads_iter = iter(grads)
        out: list[Any] = []
        for v, t in zip(self.variables, self._trainable):
            g = next(grads_iter) if t else None
            out.append(g if t and id(v) in reads else None)
        return outputs, out

    def _guarded_apply(self, grads: Sequence[Any], loss: Any) -> Any:
        """Clip and apply ``grads`` only if ``loss`` and their global norm are finite; return
        ``health = [loss, norm]`` (the fused step's update)."""
        return self._guarded(grads, loss, in_loop=False)

    def _guarded(self, grads: Sequence[Any], loss: Any, in_loop: bool) -> Any:
        """:meth:`_guarded_apply`; ``in_loop`` also only if no earlier step of the fused loop failed
        (the guard cell), and a failure is recorded in the guard."""
        norm = global_norm(grads)
        health = jnp.stack([jnp.reshape(loss, ()).astype(jnp.float32), norm])
        ok = jnp.all(jnp.isfinite(health))
        if in_loop:
            guard = self._guard.value
            healthy = guard[0] > 0.5
            first = healthy & ~ok
            ok = ok & healthy
            self._guard.value = jnp.concatenate([ok.astype(jnp.float32)[None], jnp.where(first, health, guard[1:])])
        touched = [i for i, g in enumerate(grads) if g is not None]
        old_values = [self.variables[i].value for i in touched]
        old_states = list(self._opt.value)
        self._clip_and_apply(grads, norm)
        for i, old in zip(touched, old_values):
            self.variables[i].value = jnp.where(ok, self.variables[i].value, old)
        states = list(self._opt.value)
        for i in touched:
            states[i] = jax.tree_util.tree_map(lambda new, old: jnp.where(ok, new, old), states[i], old_states[i])
        self._opt.value = states
        return health

    def _clip_and_apply(self, grads: Sequence[Any], total: Any = None) -> None:
        grads = clip_by_global_norm(grads, self.max_grad_norm, total)
        lr = self._lr.value
        states = list(self._opt.value)
        for i, (v, g) in enumerate(zip(self.variables, grads)):
            if g is None:
                continue
            state = states[i]
            state = state._replace(hyperparams={**state.hyperparams, "learning_rate": lr})
            updates, states[i] = self.tx.update(g, state, v.value)
            v.value = optax.apply_updates(v.value, updates)
        self._opt.value = states

    @staticmethod
    def _detached(outputs):
        return tuple(None if o is None else jax.lax.stop_gradient(o) for o in outputs)

    def _eager_step(self, *inputs):
        """Eager mode's fused step: ``(*outputs, health)``."""
        outputs, grads = self._loss_and_grads(inputs)
        self._reached = tuple(g is not None for g in grads)
        health = self._update(grads, jax.lax.stop_gradient(outputs[0]))
        return (*self._detached(outputs), health)

    def _single_step(self, *inputs):
        """Static mode's fused step as plain jax code (traced by jit): ``(*outputs, health)``."""
        outputs, grads = self._loss_and_grads(inputs)
        health = self._guarded(grads, jax.lax.stop_gradient(outputs[0]), in_loop=False)
        return (*self._detached(outputs), health)

    def _traceable_step(self, *inputs):
        """The whole update as plain jax code for a fused loop's scan (the guard decides)."""
        outputs, grads = self._loss_and_grads(inputs)
        self._guarded(grads, jax.lax.stop_gradient(outputs[0]), in_loop=True)
        return self._detached(outputs)

    def _flat_loss_and_grads(self, *inputs):
        outputs, grads = self._loss_and_grads(inputs)
        self._reached = tuple(g is not None for g in grads)  # Python: runs when traced
        pieces = [
            jnp.zeros([n], jnp.float32) if g is None else jnp.reshape(g, [-1]).astype(jnp.float32)
            for g, n in zip(grads, self._sizes)
        ]
        flat = jnp.concatenate(pieces) if pieces else jnp.zeros([0], jnp.float32)
        return self._detached(outputs), flat

    # --- the contract ------------------------------------------------------------------------
    def _fused_step(self, *inputs):
        *outputs, health = self._step(*inputs)
        if not np.isfinite(np.asarray(health)).all():  # one host read: the program already decided
            raise_non_finite(health)
        return tuple(outputs)

    def inline(self, *inputs):
        """The fused update for a fused loop's body: plain jax code inside a trace (the loop's
        program compiles it with the rest of the body; a non-finite step applies nothing and
        clears the loop's guard, and the loop raises after the round); outside a trace, the step
        itself (raising NonFiniteError for a non-finite update)."""
        if _in_trace(self._lr):
            return self._traceable_step(*inputs)
        return self._fused_step(*inputs)

    @property
    def num_parameters(self) -> int:
        """Total number of elements of the step's variables (the flat gradient's length)."""
        return sum(self._sizes)

    def compute_gradients(self, *inputs) -> tuple[tuple[Any, ...], np.ndarray]:
        """Forward and backward (one program in static mode); ``(outputs, flat float32 gradients)``."""
        outputs, flat = self._compute(*inputs)
        return outputs, np.array(flat, dtype=np.float32, copy=True)

    def _apply_fn(self) -> Callable:
        reached = self._reached
        fn = self._apply_fns.get(reached)
        if fn is None:
            offsets = np.cumsum([0, *self._sizes])

            def apply_flat(flat):
                self._clip_and_apply(
                    [
                        jnp.reshape(flat[offsets[i] : offsets[i + 1]], v.shape) if use else None
                        for i, (v, use) in enumerate(zip(self.variables, reached))
                    ]
                )

            fn = self._apply_fns[reached] = StatefulFunction(self._registry, apply_flat)
        return fn

    def apply_gradients(self, flat: np.ndarray) -> None:
        """Un-flatten ``flat``, clip by global norm and update (one compiled program)."""
        self._apply_fn()(jnp.asarray(self._checked_flat(flat)))

    @property
    def trace_count(self) -> int | None:
        """Programs traced for this step's compiled parts in static mode; None in eager mode."""
        if not self.compiled:
            return None
        parts = [self._step, self._compute, *self._apply_fns.values()]
        return sum(p.trace_count for p in parts)

    def _push_learning_rate(self, value: float) -> None:
        """The learning rate is a cell every program takes as a traced input."""
        self._lr.value = jnp.asarray(value, jnp.float32)

    def get_state(self) -> dict[str, np.ndarray]:
        """Optimizer state as numpy, keyed like torch's: ``"0/exp_avg"``, ``"0/step"`` ..."""
        out: dict[str, np.ndarray] = {}
        momentum = self._has_momentum()
        for i, state in enumerate(self._opt.value):
            if self.kind != "sgd":
                out[f"{i}/step"] = np.asarray(state.count, np.float32)
            for slot, field in SLOTS[self.kind].items():
                out[f"{i}/{slot}"] = np.array(_get_field(state.inner_state, field), np.float32)
            if momentum:
                out[f"{i}/momentum_buffer"] = np.array(_get_field(state.inner_state, "trace"), np.float32)
        return out

    def _has_momentum(self) -> bool:
        try:
            _get_field(self._opt.value[0].inner_state, "trace") if self._opt.value else None
        except KeyError:
            return False
        return bool(self._opt.value)

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        """Restore optimizer state written by :meth:`get_state` (or by another backend's)."""
        states = list(self._opt.value)
        slots = dict(SLOTS[self.kind])
        if self._has_momentum():
            slots["momentum_buffer"] = "trace"
        for key, value in state.items():
            idx, _, name = key.partition("/")
            if not idx.isdigit() or int(idx) >= len(states):
                raise ValueError(
                    f"Optimizer state key '{key}' does not name one of the {len(states)} optimized variables."
                )
            i = int(idx)
            if name == "step":
                count = jnp.asarray(int(np.asarray(value).item()), states[i].count.dtype)
                states[i] = _set_field(states[i], "count", count)
            elif name in slots:
                states[i] = states[i]._replace(
                    inner_state=_set_field(states[i].inner_state, slots[name], np.asarray(value, np.float32))
                )
            else:
                raise ValueError(
                    f"Optimizer state key '{key}': '{name}' is not a slot of "
                    f"{self.kind} (slots: {', '.join(('step', *slots))})."
                )
        self._opt.value = states

    def variable_shapes(self) -> list[tuple[int, ...]]:
        """Shapes of the optimized variables, in the order the state keys index them."""
        return [tuple(v.shape) for v in self.variables]
