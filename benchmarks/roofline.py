"""Roofline helpers shared by the benchmarks: FLOPs of one gradient step, 1-thread matmul speed.

The networks of the benchmarked agents are small MLPs, so a training run is nowhere near the
arithmetic limit of the CPU. This module puts a number on how far: :func:`update_flops` counts
the dense-layer FLOPs of one gradient step from the network shapes, :func:`matmul_gflops`
measures what one thread of this machine does on matrix products right now, and
:func:`roofline_line` prints the achieved rate (FLOPs per update x updates per second) beside it.

What is counted (and what is not), for every algorithm:

* a dense layer ``in -> out`` on a batch of ``B`` rows costs ``2 * B * in * out`` FLOPs forward
  (one multiply and one add per weight and row);
* backward through a layer costs twice its forward (the input-gradient and the weight-gradient
  matmuls), for every layer a loss is backpropagated through -- also the first layer, whose
  input gradient an implementation may skip (an over-count of at most ``in / (in + hidden)``
  of that layer, a few percent for these networks);
* bias adds, activations, losses, softmax / log-prob / tanh-squash arithmetic, gradient
  clipping and the optimizer update are **not** counted (each is O(B * width) or O(params), a
  few percent of the matmuls at these sizes), nor are acting, evaluation or replay sampling.

Imported by ``bench_ppo.py``, ``bench_dqn.py``, ``bench_sac.py`` and ``compare.py`` (run from
the repository root as ``python benchmarks/<script>.py``, which puts this folder on the path).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import torch

__all__ = [
    "MatmulRate",
    "dense_flops",
    "dqn_update_flops",
    "matmul_gflops",
    "network_matmul",
    "ppo_update_flops",
    "roofline_line",
    "sac_update_flops",
    "update_flops",
]


def dense_flops(batch: int, sizes: Sequence[int]) -> int:
    """Forward FLOPs of an MLP with layer widths ``sizes`` (input first, output last) on ``batch`` rows."""
    return sum(2 * batch * a * b for a, b in zip(sizes[:-1], sizes[1:]))


def _fwd_bwd(forward: int) -> int:
    """FLOPs of a forward pass plus the backward pass through it (2x forward)."""
    return 3 * forward


def ppo_update_flops(obs_dim: int, n_actions: int, hidden: Sequence[int], batch: int) -> int:
    """One PPO minibatch gradient step: separate policy and value trunks (``hidden``) with a
    ``n_actions``-logit head and a scalar value head, forward and backward on ``batch`` samples.

    The rollout's forward passes (acting, values, GAE bootstrap) are not part of the update.
    """
    policy = dense_flops(batch, [obs_dim, *hidden, n_actions])
    value = dense_flops(batch, [obs_dim, *hidden, 1])
    return _fwd_bwd(policy) + _fwd_bwd(value)


def dqn_update_flops(obs_dim: int, n_actions: int, hidden: Sequence[int], batch: int, double_q: bool = True) -> int:
    """One DQN gradient step on ``batch`` transitions: the online net on ``obs`` forward and
    backward, the target net on ``next_obs`` forward, and (double Q) the online net on
    ``next_obs`` forward to pick the bootstrap action. Target syncs are not counted.
    """
    net = dense_flops(batch, [obs_dim, *hidden, n_actions])
    return _fwd_bwd(net) + net + (net if double_q else 0)


def sac_update_flops(
    obs_dim: int, act_dim: int, actor_hidden: Sequence[int], critic_hidden: Sequence[int], batch: int
) -> int:
    """One SAC gradient step on ``batch`` transitions (critic step, then actor step).

    * critic step: actor forward on ``next_obs``; both target Qs forward on ``(next_obs, a')``;
      both Qs forward and backward on ``(obs, a)``;
    * actor step: actor forward and backward on ``obs``; both Qs forward and backward on
      ``(obs, pi(obs))`` (the actor's gradient flows through them);
    * temperature step: reuses the actor step's log-probs (no matmuls); the Polyak update of
      the target twins is not counted.

    The actor has a trunk ``actor_hidden`` and a ``2 * act_dim`` output (mean and log-std);
    each Q has a trunk ``critic_hidden`` on ``obs_dim + act_dim`` inputs and a scalar output.
    """
    actor = dense_flops(batch, [obs_dim, *actor_hidden, 2 * act_dim])
    q = dense_flops(batch, [obs_dim + act_dim, *critic_hidden, 1])
    critic_step = actor + 2 * q + 2 * _fwd_bwd(q)
    actor_step = _fwd_bwd(actor) + 2 * _fwd_bwd(q)
    return critic_step + actor_step


def update_flops(algo: str, **shapes) -> int:
    """FLOPs of one gradient step of ``algo`` (``"ppo"``, ``"dqn"`` or ``"sac"``).

    ``shapes`` are the keyword arguments of :func:`ppo_update_flops`, :func:`dqn_update_flops`
    or :func:`sac_update_flops`; see the module docstring for exactly what is counted.
    """
    table = {"ppo": ppo_update_flops, "dqn": dqn_update_flops, "sac": sac_update_flops}
    if algo not in table:
        raise ValueError(f"unknown algorithm {algo!r}; known: {sorted(table)}")
    return table[algo](**shapes)


@dataclass(frozen=True)
class MatmulRate:
    """Measured single-thread matmul rates: ``(m, k, n) -> GFLOP/s``, small (network-sized) first."""

    rates: tuple[tuple[tuple[int, int, int], float], ...]

    def describe(self) -> str:
        """``256x256x256 41.2, 2048x2048x2048 88.0 GFLOP/s``."""
        return ", ".join(f"{m}x{k}x{n} {g:.1f}" for (m, k, n), g in self.rates) + " GFLOP/s"


def _time_matmul(m: int, k: int, n: int, seconds: float, repeats: int) -> float:
    """Best-of-``repeats`` GFLOP/s of ``[m, k] @ [k, n]`` (float32), each repeat ~``seconds`` long."""
    a, b = torch.randn(m, k), torch.randn(k, n)
    out = torch.empty(m, n)
    torch.matmul(a, b, out=out)  # warm-up: allocation, kernel selection
    flops = 2 * m * k * n
    t0 = time.perf_counter()
    torch.matmul(a, b, out=out)
    calls = max(1, int(seconds / max(time.perf_counter() - t0, 1e-7)))
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            torch.matmul(a, b, out=out)
        best = max(best, flops * calls / (time.perf_counter() - t0) / 1e9)
    return best


def network_matmul(batch: int, hidden: Sequence[int]) -> tuple[int, int, int]:
    """The ``(m, k, n)`` of a network's widest hidden-to-hidden matmul on ``batch`` rows:
    ``(batch, max(hidden), max(hidden))`` -- the size to measure :func:`matmul_gflops` at."""
    width = max(hidden)
    return (batch, width, width)


def matmul_gflops(
    sizes: Sequence[tuple[int, int, int]] = ((256, 256, 256), (2048, 2048, 2048)),
    seconds: float = 0.2,
    repeats: int = 3,
) -> MatmulRate:
    """Single-thread float32 matmul GFLOP/s measured now with torch, for each ``(m, k, n)``.

    The default sizes are one comparable to the benchmarked networks' matmuls (batch 256 x a
    256-wide layer; pass :func:`network_matmul` of the network at hand) and one large enough
    to approach the core's peak. The best of ``repeats``
    timings of ~``seconds`` each is kept (the least disturbed by other load). torch's thread
    count is set to 1 for the measurement and restored afterwards.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return MatmulRate(tuple((s, _time_matmul(*s, seconds, repeats)) for s in sizes))
    finally:
        torch.set_num_threads(threads)


def roofline_line(flops_per_update: float, updates_per_s: float, matmul: MatmulRate) -> str:
    """One line: achieved GFLOP/s of the updates beside the measured matmul rates and the fractions.

    The achieved rate counts only the update's dense-layer FLOPs (see the module docstring), so
    the fraction is what share of one core's matmul speed the gradient steps turn into useful
    matmul work; everything else in the loop (env, acting, replay, framework overhead) shows up
    as the gap.
    """
    achieved = flops_per_update * updates_per_s / 1e9
    parts = [f"{shape[0]}x{shape[1]}x{shape[2]} {g:.1f} GFLOP/s ({achieved / g:.1%})" for shape, g in matmul.rates]
    return (
        f"roofline: {flops_per_update / 1e6:.2f} MFLOP/update x {updates_per_s:.0f} updates/s = "
        f"{achieved:.2f} GFLOP/s; 1-thread matmul " + ", ".join(parts)
    )
