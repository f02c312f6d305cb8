"""``rlgraph tune`` (rlgraph-ray with its extra ``tune``: ray[tune], optuna): a 4-trial ASHA search
over DQN's learning rate on CartPole with tiny budgets; the best config is written and trains."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parents[1] / "torch"))
from cli_helpers import run_cli  # noqa: E402
from tune_helpers import TINY as TINY_BASE  # noqa: E402
from tune_helpers import TUNE_MARKS  # noqa: E402

pytestmark = TUNE_MARKS

TINY = ["train.total_timesteps=1000", *TINY_BASE]


def test_asha_search_writes_a_best_config_that_trains(ray_session, tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text("agent.optimizer.learning_rate: {loguniform: [1.0e-4, 1.0e-2]}\n")
    out = tmp_path / "search"
    searcher = ["--searcher", "optuna"] if importlib.util.find_spec("optuna") else []
    sets = [a for s in TINY for a in ("--set", s)]
    code, stdout, stderr = run_cli(
        "tune", "dqn_cartpole", "--space", str(space), "--samples", "4", "--scheduler", "asha",
        "--max-concurrent", "2", *searcher, "--out", str(out), *sets,
    )  # fmt: skip
    assert code == 0, stderr
    with open(out / "trials.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 and all(not r["error"] for r in rows)
    rates = [float(r["agent.optimizer.learning_rate"]) for r in rows]
    assert len(set(rates)) == 4 and all(1e-4 <= r <= 1e-2 for r in rates)
    for row in rows:  # each trial is an ordinary run folder; ASHA may stop one early (fewer steps)
        assert (Path(row["run_dir"]) / "metrics.jsonl").is_file()
        assert 250 <= int(row["timesteps"]) <= 1000
    # Issue 35 §2: a trial that used its budget was stopped by ASHA (max_t = the budget) as it reported
    # its last evaluation, before its final checkpoint, summary and plot were written; the report at
    # the budget is now made after them.
    completed = [Path(r["run_dir"]) for r in rows if int(r["timesteps"]) == 1000]
    assert completed
    for run in completed:
        assert (run / "checkpoint" / "meta.json").is_file(), run
        assert (run / "summary.json").is_file() and (run / "learning_curve.png").is_file(), run
    best = yaml.safe_load((out / "best_config.yaml").read_text())
    best_row = max(rows, key=lambda r: float(r["best_eval_return"]))
    assert best["agent"]["optimizer"]["learning_rate"] == pytest.approx(
        float(best_row["agent.optimizer.learning_rate"])
    )
    code, stdout, stderr = run_cli(
        "train", str(out / "best_config.yaml"), "--set", "train.total_timesteps=300", "--no-progress",
        "--out", str(tmp_path / "best_run"),
    )  # fmt: skip
    assert code == 0, stderr
    assert (tmp_path / "best_run" / "checkpoint" / "meta.json").is_file()


def test_bad_space_is_one_paragraph(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text("agent.optimizer.learning_rate: {logunifrom: [1.0e-4, 1.0e-2]}\n")
    code, _, stderr = run_cli("tune", "dqn_cartpole", "--space", str(space), "--out", str(tmp_path / "o"))
    assert code == 2 and "loguniform" in stderr and "Traceback" not in stderr
    space.write_text("agent.no_such_field: {choice: [1, 2]}\n")
    code, _, stderr = run_cli("tune", "dqn_cartpole", "--space", str(space), "--out", str(tmp_path / "o"))
    assert code == 2 and "agent.no_such_field" in stderr


def test_a_crashing_trial_reports_its_cause_and_a_budget_below_the_eval_interval_is_searched(ray_session, tmp_path):
    """Issue 35 §2: a failed trial was recorded as AttributeError (RunFailed could not be copied), and
    a budget below the evaluation interval crashed ASHA (grace_period must be <= max_t)."""
    space = tmp_path / "space.yaml"
    space.write_text("agent.optimizer.learning_rate: {grid: [1.0e+30, 1.0e-3]}\n")  # the first: inf loss at once
    sets = ["train.total_timesteps=200", "agent.optimizer.type=sgd", "agent.optimizer.max_grad_norm=null", *TINY_BASE]
    out = tmp_path / "search"
    code, _, stderr = run_cli(
        "tune", "dqn_cartpole", "--space", str(space), "--samples", "1", "--scheduler", "asha",
        "--max-concurrent", "2", "--out", str(out), *[a for s in sets for a in ("--set", s)],
    )  # fmt: skip
    assert "grace_period" not in stderr and "Traceback" not in stderr, stderr[-3000:]
    # 200 steps hold no periodic evaluation: exit 0 where the run ends with one, else one paragraph
    assert code == 0 or (code == 2 and "No trial reported an evaluation" in stderr), stderr[-3000:]
    with open(out / "trials.csv") as f:
        rows = {float(r["agent.optimizer.learning_rate"]): r for r in csv.DictReader(f)}
    assert rows[1e30]["error"].startswith("NonFiniteError: The loss is inf"), rows[1e30]["error"]
    good = Path(rows[1e-3]["run_dir"])
    assert (
        not rows[1e-3]["error"] and (good / "checkpoint" / "meta.json").is_file() and (good / "summary.json").is_file()
    )


def test_an_interrupted_search_exits_130_naming_rlgraphs_resume(tmp_path, capsys):
    """Issue 35 §2: after Ctrl-C (Tune stops its trials and returns) the search exited 0 printing "best"
    as if complete, and only Ray's Tuner.restore was suggested. The grid is what Ray 2.60 returns
    then: Tune's cleanup sets the running trial TERMINATED like the finished one; only its last
    result (an intermediate report, not ``done``) tells them apart."""
    import argparse
    import types

    from rlgraph_core.config.run import apply_overrides, load_shipped_config, validate_config
    from rlgraph_ray.tune import _write_results

    class Grid(list):
        num_terminated, num_errors = 2, 0

    def result(name, rate, value, done):
        return types.SimpleNamespace(
            config={"agent.optimizer.learning_rate": rate},
            metrics={"eval_return_mean": value, "timesteps": 500, "done": done},
            metrics_dataframe=None, path=str(tmp_path / name), error=None,
        )  # fmt: skip

    raw = validate_config(apply_overrides(load_shipped_config("dqn_cartpole"), TINY)).to_dict()
    args = argparse.Namespace(config="dqn_cartpole", space="space.yaml")
    grid = Grid([result("trial_a", 1e-3, 20.0, True), result("trial_b", 1e-2, 9.0, False)])
    assert _write_results(args, grid, raw, tmp_path) == 130
    out, err = capsys.readouterr()
    assert "best" not in out and not (tmp_path / "best_config.yaml").exists() and (tmp_path / "trials.csv").is_file()
    assert "interrupted before 1 of 2 trials finished" in err
    assert f"rlgraph tune dqn_cartpole --space space.yaml --out {tmp_path} --resume" in err


def test_rays_tuner_restore_hint_is_dropped_during_a_search(caplog):
    """Issue 35 §2: after Ctrl-C Ray's log suggested ``Tuner.restore(...)``, which is not how an rlgraph
    search resumes (rlgraph's own line names ``rlgraph tune ... --resume``)."""
    import logging

    from rlgraph_ray.tune import _without_ray_resume_hint

    tune_logger = logging.getLogger("ray.tune.tune")
    hint = 'Experiment has been interrupted, but the most recent state was saved.\nResume experiment with: Tuner.restore(path="/x", trainable=...)'
    with caplog.at_level(logging.WARNING, logger="ray.tune.tune"):
        with _without_ray_resume_hint():
            tune_logger.warning(hint)
            tune_logger.warning("another Tune warning")
        tune_logger.warning(hint)  # outside a search Ray's logger is left as it was
    assert [r.getMessage() for r in caplog.records] == ["another Tune warning", hint]


def test_a_failed_trials_row_names_the_runs_own_error():
    """Issue 35 §2: trials.csv said AttributeError (RunFailed could not be copied by Ray) for a crashed trial."""
    import ray.cloudpickle as cloudpickle
    from ray.exceptions import RayTaskError

    from rlgraph_core.execution.stopping import RunFailed
    from rlgraph_ray.tune import _error_text

    wrapped = RayTaskError("trainable", "Traceback ...", RunFailed({"error": "NonFiniteError: The loss is inf"}))
    for error in (wrapped, cloudpickle.loads(cloudpickle.dumps(wrapped.as_instanceof_cause()))):
        assert _error_text(error) == "NonFiniteError: The loss is inf"
    assert _error_text(ValueError("x")) == "ValueError" and _error_text(None) == ""
