"""Static mode's compile cost is said where the user waits for it (issue 30): the progress bar
notes that the first update compiles until it is done, then the first metrics row
(``first_update_s``, in the console line), summary.json and the closing line give its time.
Eager runs carry none of it."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import numpy as np
from tqdm import tqdm

from rlgraph_core.assemble import assemble
from rlgraph_core.config.run import apply_overrides, validate_config
from rlgraph_core.execution.first_update import PENDING_NOTE, FirstUpdateClock
from rlgraph_core.execution.loggers import ConsoleLogger
from rlgraph_core.execution.recorder import RunRecorder
from rlgraph_core.plugins import get_plugin_manager
from rlgraph_core.spaces import from_gym
from rlgraph_core.training import end_line

from core_backend import DEFAULT_CONFIG
from test_checkpoint import LinearAgent
from test_honest_evaluation import ScoredLivesEnv


def _run(tmp_path, mode: str):
    raw = apply_overrides(
        DEFAULT_CONFIG,
        [f"env.id={ScoredLivesEnv.__module__}:ScoredLivesEnv", "env.num_envs=1", "env.vectorization=sync",
         "train.loggers=[jsonl]", "train.progress_bar=false", "train.eval_episodes=0", "train.target_return=null",
         "train.total_timesteps=60", "train.log_interval=20", f"train.mode={mode}"],
    )  # fmt: skip
    config = validate_config(raw)
    agent = LinearAgent(from_gym(ScoredLivesEnv.observation_space), from_gym(ScoredLivesEnv.action_space))
    agent.build_report = SimpleNamespace(build_seconds=0.0)
    rec = RunRecorder(config, tmp_path / mode, assembly=assemble(config, get_plugin_manager()), agent=agent)

    def loop(rec, stop):  # learning from step 30 on: the first update is pending for a while
        while not rec.done(stop):
            obs = np.zeros((10, 2), np.float32)
            agent.observe(obs, np.zeros(10, np.int64), np.zeros(10), obs, np.zeros(10, bool), np.zeros(10, bool))
            rec.add_env_steps(10)
            if rec.timesteps >= 30:
                agent.update()
            rec.step()

    summary = rec.run(loop)
    rows = [json.loads(line) for line in (tmp_path / mode / "metrics.jsonl").read_text().splitlines()]
    return summary, rows


def test_a_static_run_says_what_its_first_update_cost(tmp_path, monkeypatch):
    summary, rows = _run(tmp_path, "static")
    assert [r["timesteps"] for r in rows] == [20, 40, 60]
    # the row after the first update (at step 30) carries it, no other row does
    assert ["first_update_s" in r for r in rows] == [False, True, False]
    assert rows[1]["first_update_s"] >= 0.0
    assert summary["first_update_seconds"] == rows[1]["first_update_s"]
    assert f"first update {summary['first_update_seconds']:.1f} s (static mode compiles there)" in end_line(summary)
    out = io.StringIO()
    monkeypatch.setattr(tqdm, "write", lambda text, **kw: out.write(text + "\n"))
    ConsoleLogger(None).log(rows[1])
    assert f"first update (static mode: compiled) {rows[1]['first_update_s']:.1f}s" in out.getvalue()


def test_an_eager_run_carries_no_first_update_time(tmp_path):
    summary, rows = _run(tmp_path, "eager")
    assert not any("first_update_s" in r for r in rows) and "first_update_seconds" not in summary
    assert "first update" not in end_line(summary)


class Bar:
    def __init__(self):
        self.postfix = []

    def set_postfix_str(self, text, refresh=True):
        self.postfix.append(text)


def test_the_progress_bar_notes_the_pending_compile_until_the_first_update():
    bar, clock = Bar(), FirstUpdateClock(True, updates=7)  # a resumed agent: 7 updates before this process
    clock.show_pending(bar)
    clock.before_update()
    clock.after_step(7, bar)  # no update yet
    assert bar.postfix == [PENDING_NOTE] and clock.seconds is None
    clock.after_step(8, bar)
    assert bar.postfix == [PENDING_NOTE, ""] and clock.seconds is not None
    assert clock.row_metrics() == {"first_update_s": clock.seconds} and clock.row_metrics() == {}
    eager = FirstUpdateClock(False, updates=0)
    eager.show_pending(bar)
    eager.after_step(1, bar)
    assert bar.postfix == [PENDING_NOTE, ""] and eager.seconds is None
