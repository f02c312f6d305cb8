"""Weight initializers computed in numpy, so a seed gives the same weights on every backend."""

from __future__ import annotations

import numpy as np

from rlgraph_core.errors import ConfigError


def glorot_uniform(rng: np.random.Generator, fan_in: int, fan_out: int) -> np.ndarray:
    """Glorot/Xavier uniform: U(-a, a) with a = sqrt(6 / (fan_in + fan_out))."""
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=(fan_in, fan_out)).astype(np.float32)


def he_uniform(rng: np.random.Generator, fan_in: int, fan_out: int) -> np.ndarray:
    """He/Kaiming uniform for ReLU: U(-a, a) with a = sqrt(6 / fan_in)."""
    limit = np.sqrt(6.0 / fan_in)
    return rng.uniform(-limit, limit, size=(fan_in, fan_out)).astype(np.float32)


def lecun_uniform(rng: np.random.Generator, fan_in: int, fan_out: int) -> np.ndarray:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's default for ``nn.Linear`` weights."""
    limit = 1.0 / np.sqrt(fan_in)
    return rng.uniform(-limit, limit, size=(fan_in, fan_out)).astype(np.float32)


def orthogonal(rng: np.random.Generator, fan_in: int, fan_out: int, gain: float = np.sqrt(2)) -> np.ndarray:
    """Orthogonal matrix (QR of a Gaussian matrix, sign-corrected) scaled by ``gain``."""
    a = rng.standard_normal((max(fan_in, fan_out), min(fan_in, fan_out)))
    q, r = np.linalg.qr(a)
    q *= np.sign(np.diag(r))
    if fan_in < fan_out:
        q = q.T
    return (gain * q[:fan_in, :fan_out]).astype(np.float32)


INITIALIZERS = {
    "glorot_uniform": glorot_uniform,
    "he_uniform": he_uniform,
    "lecun_uniform": lecun_uniform,
    "orthogonal": orthogonal,
    # PyTorch's nn.Linear: lecun_uniform weights and U(-1/sqrt(fan_in), 1/sqrt(fan_in)) biases
    # (initial_bias), the start of d3rlpy's and CleanRL's networks
    "torch_linear": lecun_uniform,
}

#: initializers whose dense layers draw their biases (after the weights) instead of starting at zero
UNIFORM_BIASES = frozenset({"torch_linear"})


def initial_bias(name: str, rng: np.random.Generator, fan_in: int, units: int) -> np.ndarray:
    """Initial biases ``[units]`` of a dense layer whose weights ``initialize(name, ...)`` drew:
    zeros, or for ``torch_linear`` U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (drawn from ``rng`` after the
    weights, so the other initializers draw exactly what they always drew)."""
    if name not in UNIFORM_BIASES:
        return np.zeros(units, np.float32)
    limit = 1.0 / np.sqrt(fan_in)
    return rng.uniform(-limit, limit, size=units).astype(np.float32)


def initialize(name: str, rng: np.random.Generator, fan_in: int, fan_out: int, gain: float | None = None) -> np.ndarray:
    """Initial weight matrix ``[fan_in, fan_out]`` from the initializer registered as ``name``."""
    if name not in INITIALIZERS:
        raise ConfigError(f"Unknown initializer '{name}'; use one of {', '.join(sorted(INITIALIZERS))}.")
    if name == "orthogonal" and gain is not None:
        return orthogonal(rng, fan_in, fan_out, gain)
    return INITIALIZERS[name](rng, fan_in, fan_out)
