"""Optimizers and the training step for the torch backend."""

from __future__ import annotations

import types
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from rlgraph_core.backend import TrainStep


def make_torch_optimizer(spec: dict, params: list[torch.Tensor]) -> torch.optim.Optimizer:
    """Create a torch optimizer from a validated optimizer spec dict."""
    kind = spec["type"]
    lr = spec["learning_rate"]
    if kind == "adam":
        return torch.optim.Adam(
            params, lr=lr, eps=spec.get("eps", 1e-8), betas=tuple(spec.get("betas", (0.9, 0.999))), foreach=True
        )
    if kind == "rmsprop":
        return torch.optim.RMSprop(
            params,
            lr=lr,
            eps=spec.get("eps", 1e-8),
            alpha=spec.get("alpha", 0.99),
            momentum=spec.get("momentum", 0.0),
            foreach=True,
        )
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=spec.get("momentum", 0.0), foreach=True)
    raise ValueError(f"Unknown optimizer type '{kind}'; use adam, rmsprop or sgd.")


class TorchTrainStep(TrainStep):
    """Loss, backward, gradient-norm clipping and optimizer step; compiled in static mode.

    Without a gradient hook a call is the fused step: in static mode the whole step (forward,
    backward, clipping, optimizer) is one ``torch.compile`` d function until the learning rate
    first changes (torch.compile bakes a float learning rate in), and from then on only the loss
    forward is compiled. :meth:`compute_gradients` runs the forward compiled in static mode
    (``_compiled_loss``) and backward eagerly; :meth:`apply_gradients` is eager (the optimizer's
    ``foreach`` kernels already fuse the update).

    Args:
        loss_fn: ``loss_fn(*inputs) -> (loss, *aux)`` in torch tensors.
        params: the tensors to optimise (those with ``requires_grad`` False are never updated).
        spec: the validated optimizer spec dict (see ``Backend.train_step``).
        compile_mode: static mode: compile with ``torch.compile``.
    """

    def __init__(self, loss_fn: Callable, params: Sequence[torch.Tensor], spec: dict, compile_mode: bool):
        self.params = list(params)
        self.loss_fn = loss_fn
        self.max_grad_norm = spec.get("max_grad_norm")
        self.optimizer = make_torch_optimizer(spec, self.params)
        self._sizes = [p.numel() for p in self.params]
        self._shapes = [tuple(p.shape) for p in self.params]
        self._device = self.params[0].device if self.params else torch.device("cpu")
        #: which parameters the last compute_gradients reached (apply_gradients skips the rest)
        self._reached = [p.requires_grad for p in self.params]
        self._static = compile_mode
        self._compiled_loss: Callable | None = None
        self._step = self._eager_step
        self.compiled = False
        if compile_mode:
            self._step = _try_compile(self._eager_step)
            self.compiled = self._step is not self._eager_step

    @property
    def num_parameters(self) -> int:
        """Total number of elements of the step's parameters (the flat gradient's length)."""
        return sum(self._sizes)

    def _eager_step(self, *inputs):
        return self._optimize(self.loss_fn(*inputs))

    def _compiled_loss_step(self, *inputs):
        return self._optimize(self._forward(*inputs))

    def _forward(self, *inputs):
        """The loss outputs; through the compiled loss in static mode (eager if it cannot compile)."""
        if not self._static:
            return self.loss_fn(*inputs)
        if self._compiled_loss is None:
            self._compiled_loss = _try_compile(self.loss_fn)
        if self._compiled_loss is self.loss_fn:
            return self.loss_fn(*inputs)
        outputs, compiled_ok = _call_compiled_or_eager(
            self._compiled_loss, self.loss_fn, inputs, "the train step's loss"
        )
        if not compiled_ok:
            self._compiled_loss = self.loss_fn
            self.compiled = False
        return outputs

    def _optimize(self, outputs):
        loss = outputs[0]
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm, foreach=True)
        self.optimizer.step()
        return tuple(o.detach() for o in outputs)

    def _fused_step(self, *inputs):
        if self._step is self._eager_step or self._step is self._compiled_loss_step:
            return self._step(*inputs)
        outputs, compiled_ok = _call_compiled_or_eager(self._step, self._eager_step, inputs, "the train step")
        if not compiled_ok:
            self._step = self._eager_step
            self._compiled_loss = self.loss_fn  # what failed to compile once is not tried again
            self.compiled = False
        return outputs

    def compute_gradients(self, *inputs) -> tuple[tuple[torch.Tensor, ...], np.ndarray]:
        """Forward (compiled in static mode) and backward; ``(outputs, flat float32 gradients)``."""
        outputs = self._forward(*inputs)
        grads = _grads_or_none(outputs[0], self.params)
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
        for p, piece, shape, reached in zip(self.params, torch.split(flat, self._sizes), self._shapes, self._reached):
            p.grad = piece.view(shape) if reached and p.requires_grad else None
        if self.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm, foreach=True)
        self.optimizer.step()

    @property
    def learning_rate(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    @learning_rate.setter
    def learning_rate(self, value: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = float(value)
        if self.compiled and self._step is not self._compiled_loss_step:
            # torch.compile bakes a float learning rate into the optimizer's graph, so a schedule
            # would recompile on every change (and give up after 8). From the first change on,
            # compile only the loss (forward, see _forward) and run backward and the optimizer
            # step eagerly.
            self._step = self._compiled_loss_step

    def get_state(self) -> dict[str, np.ndarray]:
        out = {}
        for i, p in enumerate(self.params):
            for key, val in self.optimizer.state.get(p, {}).items():
                out[f"{i}/{key}"] = np.asarray(val.detach().cpu().numpy() if torch.is_tensor(val) else val)
        return out

    def variable_shapes(self) -> list[tuple[int, ...]]:
        """Shapes of the optimized parameters, in the order the state keys index them."""
        return list(self._shapes)

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        for name, value in state.items():
            i, key = name.split("/", 1)
            p = self.params[int(i)]
            self.optimizer.state.setdefault(p, {})[key] = torch.as_tensor(value, device=p.device).clone()


def _grads_or_none(loss: torch.Tensor, variables: list[torch.Tensor]) -> list[torch.Tensor | None]:
    """d loss / d variable for each variable; None where the loss does not reach it or the
    variable is non-trainable (``requires_grad`` False)."""
    trainable = [i for i, v in enumerate(variables) if v.requires_grad]
    out: list[torch.Tensor | None] = [None] * len(variables)
    if trainable and loss.requires_grad:
        grads = torch.autograd.grad(loss, [variables[i] for i in trainable], allow_unused=True)
        for i, g in zip(trainable, grads):
            out[i] = g
    return out


def _fresh_code(fn):
    """A trampoline calling ``fn`` whose code object is unique to this call.

    Dynamo keeps its compiled-graph cache per *code object* and gives up (silently running
    eager) after ``recompile_limit`` (8) entries. Every function compiled here would otherwise
    share one code object (``torch.no_grad``'s wrapper, or ``TorchTrainStep._eager_step``), so
    the ninth compiled function in a process would run uncompiled. A copied code object gives
    each compiled function its own cache.
    """

    def call(*args):
        return fn(*args)

    return types.FunctionType(
        call.__code__.replace(), call.__globals__, call.__name__, call.__defaults__, call.__closure__
    )


def _call_compiled_or_eager(compiled: Callable, eager: Callable, args: tuple, what: str) -> tuple[Any, bool]:
    """``(compiled(*args), True)``; if that raises, ``(eager(*args), False)`` with a warning.

    A compiled call fails for two kinds of reasons: the compiler cannot handle the code (no C++
    compiler, an unsupported op) or the code itself is wrong (a shape or dtype bug). Rerunning
    eagerly tells them apart: if the eager call raises too, its error (the user's real bug, with
    the framework's own message) propagates with no compilation warning and no traceback of the
    compiler attached. Only when eager succeeds is compilation to blame: then a RuntimeWarning
    says so and the caller should stay eager. (Compilation fails before the compiled code runs,
    so nothing was updated twice.)
    """
    try:
        return compiled(*args), True
    except Exception as exc:  # which kind of failure is decided below, outside this block (no chain)
        failure = exc
    outputs = eager(*args)
    message = str(failure).splitlines()[0] if str(failure) else ""
    warnings.warn(
        f"torch.compile of {what} failed ({type(failure).__name__}: {message}); running it eagerly from now on.",
        RuntimeWarning,
        stacklevel=4,
    )
    return outputs, False


def _try_compile(fn):
    """torch.compile ``fn`` if this torch build can; else warn and return ``fn`` (eager)."""
    try:
        return torch.compile(_fresh_code(fn), dynamic=False)
    except Exception as exc:
        warnings.warn(
            f"torch.compile is unavailable ({type(exc).__name__}: {exc}); running eager.", RuntimeWarning, stacklevel=3
        )
        return fn
