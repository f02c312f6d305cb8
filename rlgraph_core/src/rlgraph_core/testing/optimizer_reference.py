"""The optimizer references of the backend conformance suite: torch.optim's formulas in numpy.

A linear least-squares problem (``XS``, ``YS``, initial ``W0``, ``B0``), its loss and gradients
in numpy, torch's gradient clipping and Adam/RMSprop/SGD update rules (``NumpyTorchOptimizer``),
the optimizer specs the suite runs (``SPECS``) and :func:`make_step`, which builds the same
problem as a backend train step. Backend tests import these to compare their own optimizers.
"""

from __future__ import annotations

import numpy as np

OPT_RTOL, OPT_ATOL = 2e-5, 1e-6
rng3 = np.random.default_rng(3)
XS = rng3.standard_normal((16, 3)).astype(np.float32)
YS = rng3.standard_normal((16, 2)).astype(np.float32)
W0 = rng3.standard_normal((3, 2)).astype(np.float32)
B0 = rng3.standard_normal(2).astype(np.float32)


def np_loss_and_grads(w, b, x, y):
    """``mean((x w + b - y)^2)`` and its gradients w.r.t. ``w`` and ``b``."""
    err = x @ w + b - y
    g = 2.0 * err / err.size
    return float(np.mean(err**2)), [x.T @ g, g.sum(0)]


def np_clip(grads, max_norm):
    """torch.nn.utils.clip_grad_norm_: scale by min(1, max_norm / (norm + 1e-6))."""
    if max_norm is None:
        return grads
    total = np.sqrt(sum(float(np.sum(g**2)) for g in grads))
    coef = min(1.0, max_norm / (total + 1e-6))
    return [g * coef for g in grads]


class NumpyTorchOptimizer:
    """torch.optim update rules in numpy (float64)."""

    def __init__(self, spec, params):
        self.spec = spec
        self.t = 0
        self.state = [dict(m=np.zeros_like(p), v=np.zeros_like(p), buf=np.zeros_like(p)) for p in params]

    def step(self, params, grads):
        s = self.spec
        lr = s["learning_rate"]
        self.t += 1
        out = []
        for p, g, st in zip(params, grads, self.state):
            if s["type"] == "adam":
                b1, b2 = s["betas"]
                st["m"] = b1 * st["m"] + (1 - b1) * g
                st["v"] = b2 * st["v"] + (1 - b2) * g * g
                denom = np.sqrt(st["v"]) / np.sqrt(1 - b2**self.t) + s["eps"]
                p = p - lr / (1 - b1**self.t) * st["m"] / denom
            elif s["type"] == "rmsprop":
                st["v"] = s["alpha"] * st["v"] + (1 - s["alpha"]) * g * g
                avg = np.sqrt(st["v"]) + s["eps"]
                if s["momentum"] > 0:
                    st["buf"] = s["momentum"] * st["buf"] + g / avg
                    p = p - lr * st["buf"]
                else:
                    p = p - lr * g / avg
            else:
                if s["momentum"] > 0:
                    st["buf"] = s["momentum"] * st["buf"] + g if self.t > 1 else g.copy()
                    p = p - lr * st["buf"]
                else:
                    p = p - lr * g
            out.append(p)
        return out


def spec(kind: str, **kw) -> dict:
    """An optimizer spec dict with every field set (defaults as the config's)."""
    base = {
        "type": kind,
        "learning_rate": 0.05,
        "max_grad_norm": None,
        "eps": 1e-8,
        "betas": (0.9, 0.999),
        "alpha": 0.99,
        "momentum": 0.0,
    }
    base.update(kw)
    return base


#: Optimizer specs the formula test runs (each with and without clipping).
SPECS = {
    "adam": spec("adam"),
    "adam-betas-eps": spec("adam", betas=(0.8, 0.95), eps=1e-3, learning_rate=0.1),
    "rmsprop": spec("rmsprop", alpha=0.9, eps=1e-3),
    "rmsprop-momentum": spec("rmsprop", momentum=0.9, learning_rate=0.01),
    "sgd": spec("sgd"),
    "sgd-momentum": spec("sgd", momentum=0.9),
}


def make_step(backend, opt_spec, counter=None):
    """A train step of ``mean((x w + b - y)^2)`` over fresh variables ``w``, ``b``."""
    w = backend.variable("w", W0)
    b = backend.variable("b", B0)
    ops = backend.ops

    def loss_fn(x, y):
        if counter is not None:
            counter.append(1)
        err = ops.dense(x, w, b) - y
        return ops.reduce_mean(ops.square(err)), ops.abs(err)

    return backend.train_step(loss_fn, [w, b], opt_spec), w, b
