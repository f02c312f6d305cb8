"""The stats extra (rliable; nox session ``stats``, whose lock holds the pandas<3 that rliable's
arch<8 needs): the interquartile mean equals a numpy computation, its stratified-bootstrap
interval holds it and is reproducible from the seed, and the zoo table carries both for a config
measured with at least five seeds."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rliable")

from rlgraph_core.errors import RLGraphError  # noqa: E402
from rlgraph_core.stats import MIN_SEEDS, format_interval, iqm_interval  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def numpy_iqm(scores: np.ndarray) -> float:
    """The mean of the middle half of all run x task scores, 25 % cut from each end (scipy's trim_mean)."""
    flat = np.sort(np.asarray(scores, np.float64).ravel())
    cut = int(0.25 * flat.size)
    return float(flat[cut : flat.size - cut].mean())


def test_the_iqm_is_numpys_and_its_interval_holds_it():
    rng = np.random.default_rng(0)
    seeds = rng.normal(200.0, 80.0, 7)  # one task, 7 seeds
    seeds[0] = 5_000.0  # an outlier seed: the IQM is not pulled up as the mean is
    suite = rng.gamma(2.0, 50.0, (10, 3))  # 10 runs x 3 tasks (stratified: runs resampled per task)
    got = iqm_interval({"seeds": seeds, "suite": suite}, reps=300)
    for name, scores in (("seeds", seeds), ("suite", suite)):
        iv = got[name]
        assert iv.iqm == pytest.approx(numpy_iqm(scores), rel=1e-12), name
        assert iv.low < iv.iqm < iv.high, (name, iv)
        assert (iv.runs, iv.tasks, iv.confidence) == (scores.shape[0], 1 if scores.ndim == 1 else 3, 0.95)
    assert got["seeds"].iqm < seeds.mean() - 400
    assert got["seeds"].high < seeds.max()
    # a wider confidence gives a wider interval
    wide = iqm_interval({"suite": suite}, reps=300, confidence=0.99)["suite"]
    assert wide.low <= got["suite"].low and wide.high >= got["suite"].high


def test_the_interval_is_reproducible_and_leaves_numpys_global_generator_alone():
    scores = np.random.default_rng(1).normal(0.0, 1.0, (6, 2))
    np.random.seed(123)
    expected_next = np.random.random()
    np.random.seed(123)
    a = iqm_interval({"m": scores}, reps=500, seed=4)["m"]
    assert np.random.random() == expected_next  # the global state was restored
    assert iqm_interval({"m": scores}, reps=500, seed=4)["m"] == a
    assert iqm_interval({"m": scores}, reps=500, seed=5)["m"] != a


def test_fewer_than_five_seeds_or_non_finite_scores_are_refused_in_one_paragraph():
    with pytest.raises(ValueError, match=r"'few': 4 runs; .* at least 5 runs \(seeds\)"):
        iqm_interval({"few": [1.0, 2.0, 3.0, 4.0]})
    with pytest.raises(ValueError, match=r"'bad': expected finite numbers"):
        iqm_interval({"bad": [1.0, 2.0, np.nan, 4.0, 5.0]})
    assert MIN_SEEDS == 5


def test_a_missing_rliable_names_the_stats_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "rliable", None)
    with pytest.raises(RLGraphError, match=r"need rliable.*install the stats extra: pip install .*\[stats\]"):
        iqm_interval({"m": np.arange(5.0)})


def test_the_zoo_table_carries_the_iqm_and_its_interval_from_five_seeds():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import zoo
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))

    finals = [500.0, 480.0, 120.0, 495.0, 500.0]
    row = {"exit_code": 0, "ended_by": "total_timesteps", "env_steps": 1000, "updates": 10, "train_wall_s": 1.0}
    row |= {"env_steps_per_s": 1000.0, "cpu_s": 1.0, "date": "d", "cpus": 2, "load_1min": 1.0}
    runs = {f"ppo_cartpole/seed_{s}": {**row, "seed": s, "final_eval_return": r} for s, r in enumerate(finals)}
    runs |= {f"a2c_cartpole/seed_{s}": {**row, "seed": s, "final_eval_return": r} for s, r in enumerate(finals[:4])}
    text = zoo.render_table(zoo.discover(), {"runs": runs, "estimates": {}}, max_hours=1.0)
    header = next(line for line in text.splitlines() if line.startswith("| config |"))
    column = [c.strip() for c in header.strip("|").split("|")].index("IQM [95% CI]")

    def cell(name):
        line = next(line for line in text.splitlines() if line.startswith(f"| `{name}`"))
        return [c.strip() for c in line.strip("|").split("|")][column]

    expected = iqm_interval({"final": finals})["final"]
    assert cell("ppo_cartpole") == format_interval(expected)
    assert format_interval(expected).startswith(f"{numpy_iqm(np.array(finals)):.1f} [")
    assert cell("a2c_cartpole") == "-"  # four seeds: no interval


def test_the_committed_zoo_intervals_are_what_rliable_computes_from_the_committed_runs():
    """docs/zoo.md renders its intervals from the results file (so the core session's docs test
    needs no rliable); they are rliable's own for those runs, recomputed here."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import zoo
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))

    results = zoo.load_results(zoo.RESULTS)
    assert len(results["intervals"]) >= 1
    for name, stored in results["intervals"].items():
        rows = [results["runs"][f"{name}/seed_{s}"] for s in stored["seeds"]]
        assert [r["final_eval_return"] for r in rows] == stored["returns"], name
        assert iqm_interval({name: stored["returns"]})[name].__dict__ == stored["interval"], name
