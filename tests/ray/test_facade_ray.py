"""The Python facade drives a distributed executor: ``make(..., executor="ray_sync")`` learns in
the module's private Ray session, hands the learner its agent through a checkpoint, and carries
the counters over from one ``learn`` to the next; nothing is written without an output folder."""

from __future__ import annotations

import numpy as np
import pytest

import rlgraph_core as rl
from rlgraph_core.plugins import get_plugin_manager

if "ray_sync" not in get_plugin_manager().names("executors"):
    pytest.skip("rlgraph-ray is not installed", allow_module_level=True)


def test_facade_learns_twice_with_ray_sync(ray_session, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    algo = rl.make(
        "ppo",
        env="CartPole-v1",
        executor={"type": "ray_sync", "num_workers": 1},
        num_envs=2,
        n_steps=32,
        batch_size=64,
        n_epochs=1,
        eval_interval=128,
        eval_episodes=1,
        train={"loggers": []},
    )
    assert algo.config.train.executor == "ray_sync" and algo.config.executor.num_workers == 1
    obs = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    before = algo.predict(obs)
    algo.learn(128)
    assert algo.timesteps == 128 and algo.updates > 0 and algo.last_summary["checkpoint"] is None
    first_updates = algo.updates
    algo.learn(128)
    assert algo.timesteps == 256 and algo.updates > first_updates
    assert algo.predict(obs).shape == before.shape
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("executor", ["ray_apex", "ray_impala"])
def test_facade_learns_without_an_output_folder(executor, ray_session, tmp_path, monkeypatch):
    """Without ``out=`` a distributed run writes nothing: ray_apex's shard snapshots (which need a
    folder for restarts) live in a temporary one, removed when the run ends. Before, ray_apex
    failed at start with a TypeError from ``Path(None)``."""
    import tempfile

    from rlgraph_core.testing.executor_suite import CASES

    case = CASES[executor]
    monkeypatch.chdir(tmp_path)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where a temporary folder would be left
    algo = rl.make(
        case["algo"],
        env="CartPole-v1",
        executor={"type": executor, **case["executor_settings"]},
        train={"loggers": [], "eval_interval": 256, "eval_episodes": 1},
        **case["overrides"],
    )
    algo.learn(256)
    assert algo.timesteps >= 256 and algo.updates > 0 and algo.last_summary["checkpoint"] is None
    assert list(scratch.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]
