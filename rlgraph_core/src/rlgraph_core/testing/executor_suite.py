"""The executor suite: one set of checks run against every executor, through the Python facade.

Every executor gathers experience with the shared env loop
(:class:`~rlgraph_core.execution.env_runner.EnvRunner`) and counts it into the run recorder, so
what a run reports has the same shape whichever executor ran it. :func:`check_executor` trains
a tiny CartPole run with ``rlgraph_core.make(..., executor=NAME).learn(...)`` into a folder and
checks:

* the counters: the summary's, the facade's (``algo.timesteps``), the final checkpoint's and
  the last metrics row's env steps agree; the budget was reached and overshot by at most what
  the executor collects in one round (:data:`CASES`' ``slack``); updates were made;
* the episode bookkeeping: finished episodes are counted (``summary["episodes"]``), and every
  metrics row that has a training return also has the mean episode length, equal to it
  (CartPole pays 1 per step, so a return and a length computed from the same steps agree);
* the rows: env steps strictly increasing, speeds reported.

An executor plugin runs it on itself in a few lines::

    from rlgraph_core.testing.executor_suite import check_executor

    def test_my_executor(tmp_path):
        check_executor("my_executor", tmp_path, algo="ppo", executor_settings={...})

Each executor's tests run the case in their own test session (local with torch, the Ray
executors in the Ray session, Horovod's single rank in the Horovod session).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import rlgraph_core as rl
from rlgraph_core.checkpoint import read_meta

__all__ = ["CASES", "check_executor"]

#: A DQN small enough for a few hundred steps (shared by the single-process executors).
_DQN = dict(
    num_envs=2,
    network={"hidden": [16], "activation": "relu"},
    learning_starts=64,
    batch_size=16,
    train_freq=16,
    gradient_steps=1,
    target_update_interval=64,
)

#: What each built-in executor trains in the suite: the agent, its overrides (as ``make`` takes
#: them), the executor's settings, and ``slack``: env steps one round may overshoot the budget by.
CASES: dict[str, dict[str, Any]] = {
    "local": dict(algo="dqn", overrides=_DQN, executor_settings={}, slack=2),
    "horovod": dict(algo="dqn", overrides=_DQN, executor_settings={}, slack=2),
    "ray_sync": dict(
        algo="ppo",
        overrides=dict(num_envs=4, n_steps=16, batch_size=64, n_epochs=1, network={"hidden": [16]}),
        executor_settings={"num_workers": 2},
        slack=64,
    ),
    "ray_apex": dict(
        algo="dqn",
        overrides={**_DQN, "memory": {"type": "prioritized_replay", "capacity": 4096}},
        executor_settings={"num_workers": 2, "fragment_length": 16, "num_replay_shards": 1},
        slack=2 * 2 * 16,
    ),
    "ray_impala": dict(
        algo="impala",
        overrides=dict(num_envs=4, n_steps=16, n_epochs=1, network={"hidden": [16]}),
        executor_settings={"num_workers": 2, "learner_batch_fragments": 1, "queue_size": 4},
        slack=4 * 2 * 16,
    ),
}


def _rows(out: Path) -> list[dict]:
    path = out / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def check_executor(
    executor: str,
    out: str | Path,
    *,
    budget: int = 512,
    algo: str | None = None,
    overrides: dict | None = None,
    executor_settings: dict | None = None,
    slack: int | None = None,
    backend: str = "torch",
    again: int = 0,
    env: Any = "CartPole-v1",
) -> dict:
    """Train ``budget`` env steps of CartPole-v1 with ``executor`` into ``out``; check; return the summary.

    ``env`` is what :func:`rlgraph_core.make` takes (an id or an env section dict): another
    CartPole-v1 (one that pays 1 per step, which the episode checks rely on) for an executor that
    needs its own kind of env.

    ``algo``, ``overrides``, ``executor_settings`` and ``slack`` default to the executor's entry
    in :data:`CASES` (required for an executor not listed there). With ``again``, a second
    ``learn(again)`` continues the run in the same folder, and the checks hold for the whole run
    (counters carried on, rows still in order); the second summary is returned.
    """

    case = CASES.get(executor, {})
    algo = algo or case["algo"]
    overrides = {**case.get("overrides", {}), **(overrides or {})}
    settings = {**case.get("executor_settings", {}), **(executor_settings or {})}
    slack = case.get("slack", 0) if slack is None else slack
    out = Path(out)
    model = rl.make(
        algo,
        env=env,
        backend=backend,
        executor={"type": executor, **settings},
        seed=0,
        train={"loggers": ["jsonl"], "log_interval": 64, "eval_interval": budget, "eval_episodes": 1},
        **overrides,
    )
    model.learn(budget, out=out)
    summary = _check_run(executor, model, out, budget, slack)
    if not again:
        return summary
    first_steps, first_updates = summary["timesteps"], summary["updates"]
    model.learn(again, out=out)
    summary = _check_run(executor, model, out, first_steps + again, slack)
    assert summary["updates"] > first_updates, (first_updates, summary["updates"])  # carried on, and more
    return summary


def _check_run(executor: str, model, out: Path, budget: int, slack: int) -> dict:
    """The checks of :func:`check_executor` after a ``learn`` that should end at ``budget`` steps."""

    summary = model.last_summary
    assert summary is not None and summary["ended_by"] == "total_timesteps", summary
    steps = summary["timesteps"]
    assert budget <= steps <= budget + slack, f"{executor}: {steps} env steps for a budget of {budget} (+{slack})"
    assert model.timesteps == steps, (model.timesteps, steps)
    counters = read_meta(out / "checkpoint")[0]["counters"]
    assert counters["timesteps"] == steps and counters["updates"] == summary["updates"], (counters, summary)
    assert summary["updates"] > 0, f"{executor}: no update in {steps} env steps"
    # Episode bookkeeping: counted, and returns and lengths from the same steps.
    assert summary["episodes"] >= 1, summary
    assert summary["episodes"] * 8 <= steps, summary  # a CartPole episode lasts at least 8 steps (this session's)
    rows = _rows(out)
    assert rows, f"{executor}: no metrics rows"
    with_returns = [r for r in rows if r["episode_return_mean"] is not None]
    assert with_returns, f"{executor}: no row reports a training return"
    for row in with_returns:
        assert row["episode_length_mean"] is not None, row
        assert abs(row["episode_length_mean"] - row["episode_return_mean"]) < 1e-6, row
    stamps = [r["timesteps"] for r in rows]
    # One row per report, in step order; the run's final evaluation may add one more row at the
    # last report's step (it carries the evaluation that report did not have).
    periodic = (
        stamps[:-1] if len(rows) > 1 and stamps[-1] == stamps[-2] and rows[-1].get("eval_return_mean") else stamps
    )
    assert periodic == sorted(set(periodic)) and stamps == sorted(stamps) and stamps[-1] <= steps, stamps
    assert all(r["env_steps_per_s"] >= 0 and r["updates_per_s"] >= 0 for r in rows)
    return summary
