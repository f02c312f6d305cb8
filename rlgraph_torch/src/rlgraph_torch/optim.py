"""Optimizers and the training step for the torch backend."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

from rlgraph_core.backend import TrainStep, describe_non_finite, non_finite_update_error
from rlgraph_torch.compile import call_compiled_or_eager, try_compile
from rlgraph_torch.eager_optim import ForeachAdam
from rlgraph_torch.functional_optim import FunctionalOptimizer, clip_by_global_norm, global_norm


#: The ``torch.optim`` classes eager mode uses, by spec type.
EAGER_OPTIMIZERS = ("adam", "rmsprop", "sgd")


def _check_optimizer_type(kind: str) -> None:
    if kind not in EAGER_OPTIMIZERS:
        raise ValueError(f"Unknown optimizer type '{kind}'; use adam, rmsprop or sgd.")


def make_torch_optimizer(spec: dict, params: list[torch.Tensor]) -> torch.optim.Optimizer | ForeachAdam:
    """Create eager mode's optimizer from a validated optimizer spec dict: Adam is
    :class:`~rlgraph_torch.eager_optim.ForeachAdam` (``torch.optim.Adam``'s foreach arithmetic,
    bit for bit, at a third of its per-call cost), RMSprop and SGD are ``torch.optim``'s."""
    kind = spec["type"]
    _check_optimizer_type(kind)
    lr = spec["learning_rate"]
    if kind == "adam":
        return ForeachAdam(params, lr=lr, eps=spec.get("eps", 1e-8), betas=tuple(spec.get("betas", (0.9, 0.999))))
    if kind == "rmsprop":
        return torch.optim.RMSprop(
            params,
            lr=lr,
            eps=spec.get("eps", 1e-8),
            alpha=spec.get("alpha", 0.99),
            momentum=spec.get("momentum", 0.0),
            foreach=True,
        )
    return torch.optim.SGD(params, lr=lr, momentum=spec.get("momentum", 0.0), foreach=True)


class TorchTrainStep(TrainStep):
    """Loss, backward, gradient-norm clipping and optimizer step; compiled in static mode.

    Eager mode runs ``torch.optim`` (``foreach`` kernels, a float learning rate: the fastest
    eager path). Static mode runs :class:`~rlgraph_torch.functional_optim.FunctionalOptimizer`
    instead, whose learning rate is a 0-d tensor read inside the compiled program: the fused step
    (forward, ``torch.autograd.grad``, clipping, update) is one ``torch.compile`` d program per
    input shape, and a learning-rate schedule only writes that tensor (``fill_``), never
    recompiling. :meth:`compute_gradients` runs the forward compiled in static mode
    (``_compiled_loss``) and backward eagerly; :meth:`apply_gradients` runs the update eagerly.

    A non-finite loss or gradient (global norm) is never applied (issue 19). Eager mode checks
    both before ``optimizer.step()`` and raises. Static mode computes ``health = [loss, norm]``
    inside the compiled program and keeps the old value of every parameter and slot the update
    touched where it is not finite (``torch.where``: no branch, no recompile); the wrapper raises
    after the call. :meth:`inline` (a fused loop's body) also ANDs in the loop's carried ``guard``
    (``[ok, loss, norm]`` of the first bad step, see :class:`~rlgraph_torch.fused_loop.TorchFusedLoop`),
    so once a step of the round failed no later one applies.

    Args:
        loss_fn: ``loss_fn(*inputs) -> (loss, *aux)`` in torch tensors.
        params: the tensors to optimise (those with ``requires_grad`` False are never updated).
        spec: the validated optimizer spec dict (see ``Backend.train_step``).
        compile_mode: static mode: compile with ``torch.compile``.
        guard: the backend's fused-loop guard (a float32 tensor ``[ok, loss, norm]``), read and
            written by :meth:`inline` in static mode; None: a guard of the step's own.
    """

    def __init__(
        self,
        loss_fn: Callable,
        params: Sequence[torch.Tensor],
        spec: dict,
        compile_mode: bool,
        guard: torch.Tensor | None = None,
    ):
        self.params = list(params)
        self.loss_fn = loss_fn
        self.max_grad_norm = spec.get("max_grad_norm")
        self._sizes = [p.numel() for p in self.params]
        self._shapes = [tuple(p.shape) for p in self.params]
        self._device = self.params[0].device if self.params else torch.device("cpu")
        self._guard = new_guard(self._device) if guard is None else guard
        #: which parameters the last compute_gradients reached (apply_gradients skips the rest)
        self._reached = [p.requires_grad for p in self.params]
        self._static = compile_mode
        #: programs compiled for this step (a one-element list the compile backend increments)
        self._traces = [0]
        self._compiled_loss: Callable | None = None
        self._optimizer: torch.optim.Optimizer | ForeachAdam | None = None
        #: eager mode: the spec ``optimizer`` builds its torch.optim optimizer from on first use
        self._eager_spec: dict | None = None
        self.functional: FunctionalOptimizer | None = None
        self._step = self._eager_step
        self.compiled = False
        if compile_mode:
            self.functional = FunctionalOptimizer(spec, self.params)
            self._lr_value = float(spec["learning_rate"])
            self._step = try_compile(self._traced_step, self._traces, trace_autograd=True)
            self.compiled = self._step is not self._traced_step
        else:
            _check_optimizer_type(spec["type"])  # now, though the optimizer is made on first use
            self._eager_spec = dict(spec)

    @property
    def optimizer(self) -> torch.optim.Optimizer | ForeachAdam | None:
        """Eager mode's ``torch.optim`` optimizer, made when first needed; None in static mode.

        Made lazily because ``torch.optim.Optimizer.__init__`` imports ``torch._dynamo`` (about 1 s
        of CPU here), which a process that only acts (a Ray worker, ``rlgraph evaluate``) never needs.
        Until then its state is empty, as a new optimizer's is.
        """
        if self._optimizer is None and self._eager_spec is not None:
            self._optimizer = make_torch_optimizer(self._eager_spec, self.params)
        return self._optimizer

    @property
    def num_parameters(self) -> int:
        """Total number of elements of the step's parameters (the flat gradient's length)."""
        return sum(self._sizes)

    @property
    def trace_count(self) -> int | None:
        """Programs compiled for this step so far (fused step and the split step's loss
        together); None in eager mode."""
        return self._traces[0] if self._static else None

    def _eager_step(self, *inputs):
        """Eager mode's fused step: ``torch.optim`` on ``.grad``."""
        assert self.optimizer is not None
        outputs = self.loss_fn(*inputs)
        self._zero_grad()
        outputs[0].backward()
        grads = [p.grad for p in self.params if p.grad is not None]
        norm = global_norm(grads) if grads else torch.zeros((), device=self._device)
        if self.max_grad_norm is not None and grads:
            # clip_grad_norm_'s arithmetic on the norm just taken (its own call costs ~60 us more)
            torch._foreach_mul_(grads, torch.clamp(self.max_grad_norm / (norm + 1e-6), max=1.0))
        # Two host reads and no new tensors (a stack + isfinite + all was 9 dispatched ops a step).
        loss, total = outputs[0].item(), norm.item()  # item(): float() of a grad tensor warns
        if not (math.isfinite(loss) and math.isfinite(total)):  # before the optimizer moves anything
            self._zero_grad()
            raise non_finite_update_error(describe_non_finite(loss, total))
        self.optimizer.step()
        return tuple(o.detach() for o in outputs)

    def _zero_grad(self) -> None:
        """Drop every parameter's ``.grad`` (``optimizer.zero_grad`` costs ~40 us more a call)."""
        for p in self.params:
            p.grad = None

    def _traced_step(self, *inputs, in_loop: bool = False):
        """Static mode's fused step as plain traceable code (what is compiled, and :meth:`inline`).

        Returns ``(*outputs, health)`` (``health = [loss, gradient norm]``, checked by the caller)
        or, ``in_loop``, the outputs alone (the loop's guard records a failure)."""
        assert self.functional is not None
        outputs = self.loss_fn(*inputs)
        grads = grads_or_none(outputs[0], self.params)
        with torch.no_grad():
            health = self._guarded_update(outputs[0], grads, self._guard if in_loop else None)
        detached = tuple(o.detach() for o in outputs)
        return detached if in_loop else (*detached, health)

    def _guarded_update(self, loss: torch.Tensor, grads: list, guard: torch.Tensor | None) -> torch.Tensor:
        """Clip and apply ``grads`` (None: not reached) unless the loss or their global norm is
        non-finite (or ``guard`` says an earlier step of the loop was); return ``[loss, norm]``.

        Traceable: the update always runs and ``torch.where`` then puts back the old value of
        every tensor it touched where it must not apply (a few elementwise ops, no branch)."""
        assert self.functional is not None
        indices = [i for i, g in enumerate(grads) if g is not None]
        present = [g for g in grads if g is not None]
        loss = loss.detach().float().reshape(())
        norm = global_norm(present).to(loss.device) if present else torch.zeros_like(loss)
        health = torch.stack([loss, norm])
        ok = torch.isfinite(health).all()
        if guard is not None:
            healthy = guard[0] > 0.5
            first = healthy & ~ok  # this step is the round's first bad one: record what it saw
            ok = ok & healthy
            guard.copy_(torch.cat([ok.float().reshape(1), torch.where(first, health, guard[1:])]))
        if not indices:
            return health
        if self.max_grad_norm is not None:
            present = clip_by_global_norm(present, float(self.max_grad_norm), norm)
        touched = self.functional.state_of(indices)
        before = [t.clone() for t in touched]
        self.functional.update(indices, present)
        for t, old in zip(touched, before):
            t.copy_(torch.where(ok, t, old))
        return health

    def _update(self, indices: list[int], grads: list[torch.Tensor]) -> None:
        """Clip ``grads`` by global norm and apply the functional update (static mode's
        apply_gradients: the contract checked the flat buffer before)."""
        assert self.functional is not None
        if self.max_grad_norm is not None:
            grads = clip_by_global_norm(grads, float(self.max_grad_norm))
        self.functional.update(indices, grads)

    def inline(self, *inputs):
        """The uncompiled fused step (static mode), for tracing inside a fused loop's body: it
        raises nothing; a non-finite step leaves everything unchanged and clears the loop's guard
        (the loop raises after the round)."""
        if not self._static:
            return self._fused_step(*inputs)
        return self._traced_step(*inputs, in_loop=True)

    def _forward(self, *inputs):
        """The loss outputs; through the compiled loss in static mode (eager if it cannot compile)."""
        if not self._static:
            return self.loss_fn(*inputs)
        if self._compiled_loss is None:
            self._compiled_loss = try_compile(self.loss_fn, self._traces)
        if self._compiled_loss is self.loss_fn:
            return self.loss_fn(*inputs)
        outputs, compiled_ok = call_compiled_or_eager(
            self._compiled_loss, self.loss_fn, inputs, "the train step's loss"
        )
        if not compiled_ok:
            self._compiled_loss = self.loss_fn
            self.compiled = False
        return outputs

    def _fused_step(self, *inputs):
        if not self._static:
            return self._eager_step(*inputs)
        eager = self._traced_step
        if self._step is eager:
            outputs = eager(*inputs)
        else:
            outputs, compiled_ok = call_compiled_or_eager(self._step, eager, inputs, "the train step")
            if not compiled_ok:
                self._step = eager
                self._compiled_loss = self.loss_fn  # what failed to compile once is not tried again
                self.compiled = False
        *outputs, health = outputs
        if not all(map(math.isfinite, health.tolist())):  # one host read
            raise_non_finite(health)
        return tuple(outputs)

    def compute_gradients(self, *inputs) -> tuple[tuple[torch.Tensor, ...], np.ndarray]:
        """Forward (compiled in static mode) and backward; ``(outputs, flat float32 gradients)``."""
        outputs = self._forward(*inputs)
        grads = grads_or_none(outputs[0], self.params)
        self._reached = [g is not None for g in grads]
        if not self.params:
            return tuple(o.detach() for o in outputs), np.zeros(0, np.float32)
        flat = torch.cat(
            [
                torch.zeros(n, dtype=torch.float32, device=self._device)
                if g is None
                else g.detach().reshape(-1).float()
                for g, n in zip(grads, self._sizes)
            ]
        )
        return tuple(o.detach() for o in outputs), flat.cpu().numpy()

    def apply_gradients(self, flat: np.ndarray) -> None:
        """Set the parameters' gradients from ``flat``, clip by global norm, step the optimizer."""
        flat = torch.from_numpy(self._checked_flat(flat)).to(self._device)
        pieces = [piece.view(shape) for piece, shape in zip(torch.split(flat, self._sizes), self._shapes)]
        used = [i for i, p in enumerate(self.params) if self._reached[i] and p.requires_grad]
        if self.functional is not None:
            with torch.no_grad():
                self._update(used, [pieces[i] for i in used])
            return
        assert self.optimizer is not None
        for i, p in enumerate(self.params):
            p.grad = pieces[i] if i in used else None
        if self.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm, foreach=True)
        self.optimizer.step()

    @property
    def learning_rate(self) -> float:
        if self.functional is not None:
            return self._lr_value
        if self._optimizer is None:  # not made yet: the spec's rate, without making it
            assert self._eager_spec is not None
            return float(self._eager_spec["learning_rate"])
        return float(self._optimizer.param_groups[0]["lr"])

    @learning_rate.setter
    def learning_rate(self, value: float) -> None:
        if self.functional is not None:
            # The compiled program reads this tensor: a new value never recompiles it.
            self._lr_value = float(value)
            self.functional.lr.fill_(self._lr_value)
            return
        if self._optimizer is None:
            assert self._eager_spec is not None
            self._eager_spec["learning_rate"] = float(value)
            return
        for group in self._optimizer.param_groups:
            group["lr"] = float(value)

    def get_state(self) -> dict[str, np.ndarray]:
        if self.functional is not None:
            return {k: v.detach().cpu().numpy().copy() for k, v in self.functional.get_state().items()}
        out: dict[str, np.ndarray] = {}
        if self._optimizer is None:  # never stepped nor restored: no state yet
            return out
        for i, p in enumerate(self.params):
            for key, val in self._optimizer.state.get(p, {}).items():
                out[f"{i}/{key}"] = np.asarray(val.detach().cpu().numpy() if torch.is_tensor(val) else val)
        return out

    def variable_shapes(self) -> list[tuple[int, ...]]:
        """Shapes of the optimized parameters, in the order the state keys index them."""
        return list(self._shapes)

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        if self.functional is not None:
            self.functional.set_state(state)
            return
        assert self.optimizer is not None
        slots = {"step", "exp_avg", "exp_avg_sq", "square_avg", "momentum_buffer"}
        for name, value in state.items():
            i, _, key = name.partition("/")
            if not i.isdigit() or int(i) >= len(self.params) or key not in slots:
                raise ValueError(
                    f"Optimizer state key '{name}' is not '<variable index>/<slot>' for one of the "
                    f"{len(self.params)} optimized variables and a slot of {', '.join(sorted(slots))}."
                )
            p = self.params[int(i)]
            self.optimizer.state.setdefault(p, {})[key] = torch.as_tensor(value, device=p.device).clone()


def new_guard(device: torch.device | str) -> torch.Tensor:
    """A fused loop's guard in its reset state: ``[ok = 1, loss = 0, norm = 0]`` (float32)."""
    return torch.tensor([1.0, 0.0, 0.0], dtype=torch.float32, device=device)


def raise_non_finite(health: torch.Tensor, step: int | None = None, steps: int | None = None) -> None:
    """Raise the NonFiniteError for ``health = [loss, gradient norm]`` (one host sync)."""
    loss, norm = (float(v) for v in health.detach().cpu().tolist())
    raise non_finite_update_error(describe_non_finite(loss, norm), step, steps)


def grads_or_none(loss: torch.Tensor, variables: list[torch.Tensor]) -> list[torch.Tensor | None]:
    """d loss / d variable for each variable; None where the loss does not reach it or the
    variable is non-trainable (``requires_grad`` False)."""
    trainable = [i for i, v in enumerate(variables) if v.requires_grad]
    out: list[torch.Tensor | None] = [None] * len(variables)
    if trainable and loss.requires_grad:
        grads = torch.autograd.grad(loss, [variables[i] for i in trainable], allow_unused=True)
        for i, g in zip(trainable, grads):
            out[i] = g
    return out
