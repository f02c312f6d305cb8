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
