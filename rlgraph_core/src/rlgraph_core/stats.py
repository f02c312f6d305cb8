"""Results across seeds as Agarwal et al. (2021, "Deep RL at the Edge of the Statistical Precipice")
recommend and their library rliable computes: the interquartile mean (IQM: the mean of the middle
50 % of all run x task scores) with a stratified-bootstrap confidence interval (runs resampled
within each task). ``benchmarks/zoo.py`` (the docs/zoo.md table) and ``benchmarks/compare.py``
report it for every config or implementation measured with at least :data:`MIN_SEEDS` seeds.

Needs the extra ``stats`` (rliable; ``pip install -e "./rlgraph_core[stats]"`` in a checkout).
rliable's bootstrap draws from numpy's global random generator whatever ``random_state`` it is
given, so :func:`iqm_interval` seeds that generator for the call and restores its state after:
the same scores and seed give the same interval.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlgraph_core.errors import RLGraphError
from rlgraph_core.install_hints import extra_install_command

__all__ = ["MIN_SEEDS", "Interval", "format_interval", "iqm_interval"]

#: Fewest runs (seeds) per task an interval is computed from (rliable's paper: few runs give wide,
#: unreliable intervals; the zoo shows "-" below this).
MIN_SEEDS = 5


@dataclass(frozen=True)
class Interval:
    """The IQM of one method's scores and its confidence interval ``[low, high]``."""

    iqm: float
    low: float
    high: float
    runs: int
    tasks: int
    confidence: float


def _rliable():
    try:
        from rliable import library, metrics  # the optional extra 'stats'
    except ImportError as exc:
        raise RLGraphError(
            f"The interquartile mean and its bootstrap confidence interval need rliable, which could not be "
            f"imported ({exc}); install the stats extra: {extra_install_command('stats')}."
        ) from None
    return library, metrics


@contextlib.contextmanager
def _global_numpy_seed(seed: int):
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _matrix(name: str, values: Any) -> np.ndarray:
    scores = np.asarray(values, dtype=np.float64)
    if scores.ndim == 1:
        scores = scores[:, None]
    if scores.ndim != 2 or not np.isfinite(scores).all():
        raise ValueError(
            f"scores of '{name}': expected finite numbers, one per run (seed) or a runs x tasks matrix, got "
            f"shape {scores.shape}; pass e.g. the final evaluation return of each seed."
        )
    if scores.shape[0] < MIN_SEEDS:
        raise ValueError(
            f"scores of '{name}': {scores.shape[0]} runs; an interquartile mean with a bootstrap confidence "
            f"interval needs at least {MIN_SEEDS} runs (seeds) per task. Run more seeds."
        )
    return scores


def iqm_interval(
    scores: Mapping[str, Any], *, confidence: float = 0.95, reps: int = 2000, seed: int = 0
) -> dict[str, Interval]:
    """``{method: Interval}`` for ``{method: scores}``; scores are one number per run (seed), or a
    runs x tasks matrix (rliable's layout). Raises ValueError for fewer than :data:`MIN_SEEDS` runs."""
    library, metrics = _rliable()
    matrices = {name: _matrix(name, values) for name, values in scores.items()}

    def aggregate(x: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_iqm(x)])

    with _global_numpy_seed(seed):
        points, intervals = library.get_interval_estimates(
            matrices, aggregate, reps=reps, confidence_interval_size=confidence
        )
    return {
        name: Interval(
            iqm=float(points[name][0]),
            low=float(intervals[name][0, 0]),
            high=float(intervals[name][1, 0]),
            runs=m.shape[0],
            tasks=m.shape[1],
            confidence=confidence,
        )
        for name, m in matrices.items()
    }


def format_interval(interval: Interval | None, digits: int = 1) -> str:
    """``"IQM [low, high]"`` for a table cell; ``"-"`` for None."""
    if interval is None:
        return "-"
    return f"{interval.iqm:.{digits}f} [{interval.low:.{digits}f}, {interval.high:.{digits}f}]"
