"""The run recorder's in-memory snapshot (``RunRecorder.snapshot_path``): a complete checkpoint
outside the run folder, refreshed at most once per ``snapshot_interval_s`` and only after the
agent changed, that a watchdog can move into the run folder (``adopt_checkpoint``)."""

from __future__ import annotations

import os
import warnings
from types import SimpleNamespace

import pytest

from rlgraph_core import checkpoint
from rlgraph_core.config.run import apply_overrides, validate_config
from rlgraph_core.execution import recorder as recorder_module
from rlgraph_core.execution.recorder import RunRecorder

from core_backend import DEFAULT_CONFIG
from test_checkpoint import make_numpy_agent, play


def _recorder(tmp_path):
    config = validate_config(apply_overrides(DEFAULT_CONFIG, ["train.checkpoint_interval=1000000"]))
    agent = make_numpy_agent(seed=0)
    rec = RunRecorder(config, tmp_path / "run", assembly=SimpleNamespace(), agent=agent, eval_env=object())
    rec.snapshot_path = tmp_path / "shm" / "checkpoint"
    return rec, agent


def test_the_snapshot_is_refreshed_at_a_bounded_rate_after_the_agent_changed(tmp_path, monkeypatch):
    rec, agent = _recorder(tmp_path)
    clock = [100.0]
    monkeypatch.setattr(recorder_module.time, "monotonic", lambda: clock[0])
    play(agent, 30)
    rec.refresh_snapshot()
    first = checkpoint.read_meta(rec.snapshot_path)[0]["counters"]["timesteps"]
    assert first == agent.timesteps == 30
    play(agent, 10)
    clock[0] += 0.5  # within snapshot_interval_s: not rewritten
    rec.refresh_snapshot()
    assert checkpoint.read_meta(rec.snapshot_path)[0]["counters"]["timesteps"] == 30
    clock[0] += 0.6
    rec.refresh_snapshot()
    assert checkpoint.read_meta(rec.snapshot_path)[0]["counters"]["timesteps"] == 40
    target = os.path.realpath(rec.snapshot_path)
    clock[0] += 5  # due, but nothing changed: not rewritten
    rec.refresh_snapshot()
    assert os.path.realpath(rec.snapshot_path) == target
    adopted = checkpoint.adopt_checkpoint(rec.snapshot_path, rec.out_dir)
    assert checkpoint.latest_checkpoint(rec.out_dir) == adopted
    fresh = make_numpy_agent(seed=3)
    fresh.load(adopted)
    assert fresh.timesteps == 40 and len(fresh.memory) == len(agent.memory)


def test_a_snapshot_that_cannot_be_written_warns_once_and_is_turned_off(tmp_path):
    rec, agent = _recorder(tmp_path)
    (tmp_path / "shm").write_text("a file where the snapshot's folder should be")
    play(agent, 5)
    with pytest.warns(RuntimeWarning, match="in-memory snapshot .* could not be written"):
        rec.refresh_snapshot()
    assert rec.snapshot_path is None
    play(agent, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rec.refresh_snapshot()  # off: no second warning, no error
