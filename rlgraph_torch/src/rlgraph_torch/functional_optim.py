"""Optimizer updates as plain traceable tensor code, for static mode's compiled programs.

``torch.optim`` reads a float learning rate in Python, so ``torch.compile`` bakes it into the
compiled graph and a schedule recompiles on every change. Here the learning rate is a 0-d tensor
read inside the program (a schedule only writes its value) and every step count is a tensor, so
one compiled program serves every learning rate. The math is ``torch.optim``'s (Adam's
``capturable`` branch, RMSprop, SGD with momentum, ``clip_grad_norm_``), and the state uses
``torch.optim``'s slot names, so optimizer state moves between eager and static mode.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def global_norm(grads: Sequence[torch.Tensor]) -> torch.Tensor:
    """The global L2 norm of ``grads`` as a 0-d float32 tensor (0 for no gradients); NaN or inf
    when any gradient value is (the finiteness check of an update reads it)."""
    if not grads:
        return torch.zeros((), dtype=torch.float32)
    norms = torch._foreach_norm(list(grads), 2.0)
    return torch.linalg.vector_norm(torch.stack(norms), 2.0).float()


def clip_by_global_norm(
    grads: list[torch.Tensor], max_norm: float, total: torch.Tensor | None = None
) -> list[torch.Tensor]:
    """``grads`` scaled by ``min(1, max_norm / (global norm + 1e-6))``: the formula of
    ``torch.nn.utils.clip_grad_norm_``, with no Python branch on the norm. ``total``: the global
    norm where the caller has it already (:func:`global_norm`)."""
    if not grads:
        return grads
    if total is None:
        total = global_norm(grads)
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    return list(torch._foreach_mul(grads, scale))


class FunctionalOptimizer:
    """Adam, RMSprop or SGD whose state and learning rate are tensors updated in place.

    Every slot is allocated up front (zeros, step 0), so the compiled program never sees the
    state change shape or identity; :meth:`set_state` copies into the existing tensors.

    Args:
        spec: the validated optimizer spec dict (see ``Backend.train_step``).
        params: the variables the step optimises, in order.
    """

    def __init__(self, spec: dict, params: Sequence[torch.Tensor]):
        self.kind = spec["type"]
        if self.kind not in ("adam", "rmsprop", "sgd"):
            raise ValueError(f"Unknown optimizer type '{self.kind}'; use adam, rmsprop or sgd.")
        self.params = list(params)
        device = self.params[0].device if self.params else torch.device("cpu")
        self.lr = torch.tensor(float(spec["learning_rate"]), dtype=torch.float32, device=device)
        self.eps = float(spec.get("eps", 1e-8))
        self.betas = tuple(float(b) for b in spec.get("betas", (0.9, 0.999)))
        self.alpha = float(spec.get("alpha", 0.99))
        self.momentum = float(spec.get("momentum", 0.0))
        #: slot name -> one tensor per parameter (``torch.optim``'s names and dtypes)
        self.slots: dict[str, list[torch.Tensor]] = {}
        names = {"adam": ["exp_avg", "exp_avg_sq"], "rmsprop": ["square_avg"], "sgd": []}[self.kind]
        if self.kind != "adam" and self.momentum != 0.0:
            names.append("momentum_buffer")
        for name in names:
            self.slots[name] = [torch.zeros_like(p, memory_format=torch.preserve_format).detach() for p in self.params]
        # SGD has no step in torch.optim's state; it is kept here to tell used slots from unused.
        self.slots["step"] = [torch.zeros((), dtype=torch.float32, device=device) for _ in self.params]

    def update(self, indices: Sequence[int], grads: Sequence[torch.Tensor]) -> None:
        """Apply one update to ``params[i]`` for each ``i`` in ``indices`` with its gradient
        (traceable: no Python branch on a tensor value; call under ``torch.no_grad``)."""
        if not indices:
            return
        params = [self.params[i] for i in indices]
        grads = list(grads)
        steps = [self.slots["step"][i] for i in indices]
        torch._foreach_add_(steps, 1.0)
        if self.kind == "adam":
            self._adam(indices, params, grads, steps)
        elif self.kind == "rmsprop":
            self._rmsprop(indices, params, grads)
        else:
            self._sgd(indices, params, grads)

    def state_of(self, indices: Sequence[int]) -> list[torch.Tensor]:
        """Every tensor :meth:`update` changes for ``indices``: the parameters and all their slots."""
        return [self.params[i] for i in indices] + [t for name in self.slots for t in self._slot(name, indices)]

    def _slot(self, name: str, indices: Sequence[int]) -> list[torch.Tensor]:
        return [self.slots[name][i] for i in indices]

    def _adam(self, indices, params, grads, steps) -> None:
        beta1, beta2 = self.betas
        exp_avgs, exp_avg_sqs = self._slot("exp_avg", indices), self._slot("exp_avg_sq", indices)
        torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)
        # torch.optim.Adam's capturable branch: step_size = -lr / (1 - beta1^t) and
        # denom = sqrt(v / (1 - beta2^t)) + eps, divided through so one addcdiv applies it.
        bias1 = torch._foreach_pow(beta1, steps)
        bias2 = torch._foreach_pow(beta2, steps)
        torch._foreach_sub_(bias1, 1)
        torch._foreach_sub_(bias2, 1)
        torch._foreach_neg_(bias2)
        torch._foreach_div_(bias1, self.lr)
        torch._foreach_reciprocal_(bias1)
        torch._foreach_sqrt_(bias2)
        denom = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_div_(denom, bias2)
        torch._foreach_add_(denom, self.eps)
        torch._foreach_div_(denom, bias1)
        torch._foreach_addcdiv_(params, exp_avgs, denom)

    def _rmsprop(self, indices, params, grads) -> None:
        square_avgs = self._slot("square_avg", indices)
        torch._foreach_mul_(square_avgs, self.alpha)
        torch._foreach_addcmul_(square_avgs, grads, grads, 1 - self.alpha)
        avg = torch._foreach_sqrt(square_avgs)
        torch._foreach_add_(avg, self.eps)
        if self.momentum != 0.0:
            bufs = self._slot("momentum_buffer", indices)
            torch._foreach_mul_(bufs, self.momentum)
            torch._foreach_addcdiv_(bufs, grads, avg)
            torch._foreach_add_(params, torch._foreach_mul(bufs, -self.lr))
        else:
            torch._foreach_add_(params, torch._foreach_mul(torch._foreach_div(grads, avg), -self.lr))

    def _sgd(self, indices, params, grads) -> None:
        if self.momentum != 0.0:
            # torch.optim.SGD starts the buffer as the first gradient: momentum * 0 + g is the same.
            bufs = self._slot("momentum_buffer", indices)
            torch._foreach_mul_(bufs, self.momentum)
            torch._foreach_add_(bufs, grads)
            grads = bufs
        torch._foreach_add_(params, torch._foreach_mul(grads, -self.lr))

    # --- state ------------------------------------------------------------------------------
    def get_state(self) -> dict[str, torch.Tensor]:
        """The used slots as ``"<param index>/<slot>"`` -> tensor, as ``torch.optim`` would hold
        them: only parameters updated at least once, and no ``step`` for SGD."""
        out: dict[str, torch.Tensor] = {}
        for i, step in enumerate(self.slots["step"]):
            if float(step) <= 0.0:
                continue
            for name, tensors in self.slots.items():
                if name == "step" and self.kind == "sgd":
                    continue
                out[f"{i}/{name}"] = tensors[i]
        return out

    def set_state(self, state: dict[str, object]) -> None:
        """Copy ``"<param index>/<slot>"`` values into the slots (in place: compiled programs keep
        reading the same tensors). A parameter given state but no step (SGD) counts as used."""
        for name, value in state.items():
            i, key = name.split("/", 1)
            if key not in self.slots:
                raise KeyError(f"optimizer state '{name}': a {self.kind} optimizer has no slot '{key}'")
            target = self.slots[key][int(i)]
            with torch.no_grad():
                target.copy_(torch.as_tensor(value, device=target.device).reshape(target.shape))
            if "step" not in {k.split("/", 1)[1] for k in state if k.split("/", 1)[0] == i}:
                self.slots["step"][int(i)].fill_(max(float(self.slots["step"][int(i)]), 1.0))
