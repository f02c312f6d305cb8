"""Optimizers and the training step for the torch backend."""

from __future__ import annotations

import types
import warnings

import numpy as np
import torch

from rlgraph_core.backend import TrainStep


def make_torch_optimizer(spec: dict, params: list[torch.Tensor]) -> torch.optim.Optimizer:
    """Create a torch optimizer from a validated optimizer spec dict."""
    kind = spec["type"]
    lr = spec["learning_rate"]
    if kind == "adam":
        return torch.optim.Adam(params, lr=lr, eps=spec.get("eps", 1e-8),
                                betas=tuple(spec.get("betas", (0.9, 0.999))), foreach=True)
    if kind == "rmsprop":
        return torch.optim.RMSprop(params, lr=lr, eps=spec.get("eps", 1e-8), alpha=spec.get("alpha", 0.99),
                                   momentum=spec.get("momentum", 0.0), foreach=True)
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=spec.get("momentum", 0.0), foreach=True)
    raise ValueError(f"Unknown optimizer type '{kind}'; use adam, rmsprop or sgd.")


class TorchTrainStep(TrainStep):
    """Loss, backward, gradient-norm clipping and optimizer step; compiled in static mode."""

    def __init__(self, loss_fn, params, spec: dict, compile_mode: bool):
        self.params = list(params)
        self.loss_fn = loss_fn
        self.max_grad_norm = spec.get("max_grad_norm")
        self.optimizer = make_torch_optimizer(spec, self.params)
        self._step = self._eager_step
        self.compiled = False
        if compile_mode:
            self._step = _try_compile(self._eager_step)
            self.compiled = self._step is not self._eager_step

    def _eager_step(self, *inputs):
        return self._optimize(self.loss_fn(*inputs))

    def _compiled_loss_step(self, *inputs):
        return self._optimize(self._compiled_loss(*inputs))

    def _optimize(self, outputs):
        loss = outputs[0]
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm, foreach=True)
        self.optimizer.step()
        return tuple(o.detach() for o in outputs)

    def __call__(self, *inputs):
        try:
            return self._step(*inputs)
        except Exception as exc:  # compile failures surface on the first call
            if self._step is self._eager_step:
                raise
            warnings.warn(f"torch.compile of the train step failed ({type(exc).__name__}: "
                          f"{str(exc).splitlines()[0] if str(exc) else ''}); falling back to eager "
                          f"mode for this step.", RuntimeWarning, stacklevel=2)
            self._step = self._eager_step
            self.compiled = False
            return self._step(*inputs)

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
            # compile only the loss (forward) and run backward and the optimizer step eagerly.
            self._compiled_loss = _try_compile(self.loss_fn)
            self._step = self._compiled_loss_step

    def get_state(self) -> dict[str, np.ndarray]:
        out = {}
        for i, p in enumerate(self.params):
            for key, val in self.optimizer.state.get(p, {}).items():
                out[f"{i}/{key}"] = np.asarray(val.detach().cpu().numpy() if torch.is_tensor(val) else val)
        return out

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

    return types.FunctionType(call.__code__.replace(), call.__globals__, call.__name__,
                              call.__defaults__, call.__closure__)


def _try_compile(fn):
    """torch.compile ``fn`` if this torch build can; else warn and return ``fn`` (eager)."""
    try:
        return torch.compile(_fresh_code(fn), dynamic=False)
    except Exception as exc:
        warnings.warn(f"torch.compile is unavailable ({type(exc).__name__}: {exc}); running eager.",
                      RuntimeWarning, stacklevel=3)
        return fn
