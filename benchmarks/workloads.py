"""Synthetic learner inputs of the fused-loop benchmarks: one definition, so that
``bench_tf_fused_loop`` and ``bench_torch_fused_loop`` time their backends on the same arrays."""

from __future__ import annotations

import numpy as np

__all__ = ["ppo_samples"]


def ppo_samples(rng: np.random.Generator, n: int = 256) -> list[np.ndarray]:
    """``n`` CartPole PPO samples in the train step's order: observations, actions, old log-probs,
    old values, advantages and returns (random, of the right shapes and dtypes)."""
    return [
        rng.standard_normal((n, 4)).astype(np.float32),
        rng.integers(0, 2, n).astype(np.int64),
        (rng.standard_normal(n) * 0.1 - 0.7).astype(np.float32),
        rng.standard_normal(n).astype(np.float32),
        rng.standard_normal(n).astype(np.float32),
        rng.standard_normal(n).astype(np.float32),
    ]
