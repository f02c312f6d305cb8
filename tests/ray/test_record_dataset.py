"""ray_sync and ray_impala record what their workers collect (``train.record_dataset``) as one
Minari dataset, each worker env's episodes whole, which the offline side (:class:`DatasetSource`)
reads back."""

from __future__ import annotations

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("minari", reason="the offline extra (minari) is not installed")

from rlgraph_core.assemble import train  # noqa: E402
from rlgraph_core.config.run import apply_overrides, load_shipped_config, validate_config  # noqa: E402
from rlgraph_core.datasets import DatasetSource  # noqa: E402

TAU = 0.02  # CartPole's Euler step: x' = x + TAU * x_dot
QUIET = ["train.progress_bar=false", "train.loggers=[jsonl]", "train.eval_interval=100000"]


def record(config: str, path, out, *overrides: str) -> dict:
    """Run shipped ``config`` with 2 workers of 2 CartPole envs each, recording into ``path``."""
    more = ["executor.num_workers=2", "env.num_envs=4", f"train.record_dataset={path}", *overrides]
    return train(validate_config(apply_overrides(load_shipped_config(config), QUIET + more)), out)


def check_whole_episodes(path, summary: dict, envs: int = 4) -> None:
    """The dataset holds every step the workers delivered, once, in episodes of one env each."""
    source = DatasetSource(path)
    assert source.env_section()["id"] == "CartPole-v1"
    assert source.total_steps == summary["timesteps"]
    episodes = list(source.episodes())
    ended = [e for e in episodes if e.terminations[-1] or (e.truncations[-1] and len(e.rewards) >= 500)]
    cut = len(episodes) - len(ended)  # running when the run stopped: at most one per env
    assert len(ended) == summary["episodes"] and 0 < cut <= envs and source.total_episodes == len(episodes)
    for e in episodes:
        obs = np.asarray(e.observations)
        assert len(obs) == len(e.actions) + 1 == len(e.rewards) + 1 and e.terminations[:-1].sum() == 0
        assert np.all(np.abs(obs[0]) <= 0.05)  # starts at a reset
        # one env's consecutive states (a step of another env or worker would break the dynamics)
        np.testing.assert_allclose(obs[1:, 0], obs[:-1, 0] + TAU * obs[:-1, 1], atol=1e-5)


def test_ray_sync_records_every_workers_episodes_whole(ray_session, tmp_path):
    path = tmp_path / "ppo_data"
    summary = record(
        "ppo_cartpole_ray", path, tmp_path / "run", "train.total_timesteps=512", "train.log_interval=512",
        "agent.batch_size=64", "agent.n_epochs=2",
    )  # fmt: skip
    assert summary["ended_by"] == "total_timesteps" and summary["timesteps"] == 512
    check_whole_episodes(path, summary)


def test_ray_impala_records_every_delivered_fragment_in_order(ray_session, tmp_path):
    path = tmp_path / "impala_data"
    summary = record("impala_cartpole_ray", path, tmp_path / "run", "train.total_timesteps=512")
    assert summary["ended_by"] == "total_timesteps" and summary["timesteps"] >= 512
    check_whole_episodes(path, summary)
