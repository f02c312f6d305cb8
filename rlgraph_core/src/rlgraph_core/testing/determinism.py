"""Reproducibility checks for a backend plugin's tests, in the spirit of Stable-Baselines3's
determinism test: two runs with the same seed and config give bit-identical metrics and weights.

A backend package calls :func:`seeded_run` twice (and once with another seed) and compares the
results with :func:`assert_identical` / :func:`weights_differ`. Runs are made through the public
facade (:func:`rlgraph_core.make` / ``learn``) on one CPU thread, so the test covers the whole
path a user takes: env seeding, exploration, replay sampling, minibatch shuffling and updates.

:func:`check_resume_determinism` checks that a run stopped half-way and resumed matches an
uninterrupted one. Which combinations are deterministic is stated in ``docs/reproducibility.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlgraph_core.execution.run_dir import read_metrics

#: metric fields that read a clock, so differ between identical runs
WALL_CLOCK_FIELDS = frozenset(
    {"wall_time", "session_wall_time", "env_steps_per_s", "updates_per_s", "first_update_s", "first_update_seconds"}
)

#: tiny configs of the facade that train (and update) within a few hundred CartPole steps
TINY = {
    "dqn": dict(
        network={"hidden": [16]},
        learning_starts=64,
        train_freq=32,
        gradient_steps=4,
        batch_size=16,
        eval_interval=128,
        eval_episodes=1,
    ),
    "ppo": dict(
        network={"hidden": [16]}, num_envs=2, n_steps=32, batch_size=32, n_epochs=2, eval_interval=128, eval_episodes=1
    ),
}


@dataclass
class RunResult:
    """What a seeded run ends with: its metrics rows without clock fields and its weights."""

    metrics: list[dict[str, Any]]
    weights: dict[str, np.ndarray]


def strip_clock(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The metrics rows without the fields that read a clock (:data:`WALL_CLOCK_FIELDS`)."""
    return [{k: v for k, v in row.items() if k not in WALL_CLOCK_FIELDS} for row in rows]


def result_of(algo, out: str | Path) -> RunResult:
    """The :class:`RunResult` of an :class:`~rlgraph_core.api.Algorithm` that learned into ``out``."""
    return RunResult(strip_clock(read_metrics(Path(out) / "metrics.jsonl")), algo.agent.get_weights())


def make_tiny(make, algo: str, backend: str, mode: str, seed: int, out: str | Path | None, **overrides: Any):
    """``make`` (:func:`rlgraph_core.make`, passed in: the api is a floor above this module) of a
    :data:`TINY` ``algo`` on CartPole-v1 for ``backend``/``mode`` on one CPU thread."""
    settings = {**TINY[algo], **overrides}
    return make(algo, env="CartPole-v1", backend=backend, mode=mode, device="cpu", seed=seed, out=out, **settings)


def seeded_run(
    make, algo: str, backend: str, mode: str, seed: int, out: str | Path, steps: int = 256, **overrides: Any
) -> RunResult:
    """Train a :data:`TINY` (made by ``make``) ``algo`` for ``steps`` env steps into ``out``; its :class:`RunResult`."""
    agent = make_tiny(make, algo, backend, mode, seed, out, **overrides).learn(steps)
    return result_of(agent, out)


def assert_identical(a: RunResult, b: RunResult) -> None:
    """Fail unless ``a`` and ``b`` have equal metrics rows and bit-identical weights."""
    assert a.metrics == b.metrics, f"metrics differ:\n{a.metrics}\n{b.metrics}"
    assert a.metrics, "the runs wrote no metrics rows: the check would prove nothing"
    assert sorted(a.weights) == sorted(b.weights)
    differing = [k for k in a.weights if not np.array_equal(a.weights[k], b.weights[k])]
    assert not differing, f"weights differ bitwise: {differing[:5]}"


def weights_differ(a: RunResult, b: RunResult) -> bool:
    """Whether any weight array of ``a`` differs from ``b``'s (another seed must give other weights)."""
    return any(not np.array_equal(a.weights[k], b.weights[k]) for k in a.weights)


def check_seed_determinism(make, algo: str, backend: str, mode: str, folder: str | Path) -> None:
    """The whole check: two seed-0 runs are identical and a seed-1 run has other weights."""
    folder = Path(folder)
    first = seeded_run(make, algo, backend, mode, 0, folder / "a")
    assert_identical(first, seeded_run(make, algo, backend, mode, 0, folder / "b"))
    assert weights_differ(first, seeded_run(make, algo, backend, mode, 1, folder / "c")), "another seed, same weights"


def joined_rows(first: str | Path, resumed: list[dict[str, Any]], stop: int, expected: list[dict[str, Any]]) -> list:
    """The rows (clock fields left out) of a run stopped at ``stop`` (folder ``first``) and of its
    resumption ``resumed``; the stop's own final row (its final evaluation) is left out where the
    uninterrupted run's rows ``expected`` have none at that step."""
    rows = strip_clock(read_metrics(Path(first) / "metrics.jsonl")) + resumed
    if stop in {row["timesteps"] for row in expected}:
        return rows
    return [row for row in rows if row["timesteps"] != stop]


def check_resume_determinism(make, load, algo: str, backend: str, mode: str, folder: str | Path, total: int) -> Path:
    """A :data:`TINY` ``algo`` run stopped by its budget at ``total // 2`` steps and resumed (``load``
    of its final checkpoint, and of ``save``, then ``learn``) gives the metrics rows and weights of
    an uninterrupted ``total``-step run. ``make``/``load``: :func:`rlgraph_core.make`/:func:`~rlgraph_core.load`.
    Returns the stopped run's folder (``folder/first``), e.g. for a ``--resume`` check."""
    folder, stop = Path(folder), total // 2
    expected = seeded_run(make, algo, backend, mode, 0, folder / "whole", steps=total)
    make_tiny(make, algo, backend, mode, 0, folder / "first").learn(stop).save(folder / "saved")
    for source in (folder / "first" / "checkpoint", folder / "saved"):
        out = folder / f"resumed_{source.name}"
        resumed = result_of(load(source, out=out).learn(total - stop), out)
        assert joined_rows(folder / "first", resumed.metrics, stop, expected.metrics) == expected.metrics
        assert not weights_differ(expected, resumed), f"resumed from {source.name}: other weights"
    return folder / "first"
