"""``train.record_dataset`` under ``horovodrun -np 2 ... --executor horovod``: each rank records the
episodes its own envs play into a Minari dataset of its own (rank 0 ``PATH``, rank 1 ``PATH_rank1``),
together every env step the run counted, each episode one env's consecutive states."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("minari", reason="the offline extra (minari) is not installed")

from hvd_launch import CONFIGS, rlgraph_train, run_horovod  # noqa: E402

from rlgraph_core.datasets import DatasetSource  # noqa: E402

TAU = 0.02  # CartPole's Euler step: x' = x + TAU * x_dot


def test_each_rank_records_its_own_episodes(tmp_path):
    out, path = tmp_path / "ppo", tmp_path / "data"
    settings = {
        "train.total_timesteps": 512, "train.eval_interval": 100000, "train.log_interval": 512,
        "env.num_envs": 2, "agent.n_steps": 32, "agent.batch_size": 64, "agent.n_epochs": 2,
        "train.record_dataset": path,
    }  # fmt: skip
    sets = [arg for k, v in settings.items() for arg in ("--set", f"{k}={v}")]
    cmd = rlgraph_train(str(CONFIGS / "ppo_cartpole.yaml"), "--executor", "horovod", "--out", str(out), *sets)
    proc = run_horovod(*cmd, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    ranks = [DatasetSource(path), DatasetSource(f"{path}_rank1")]
    assert [r.total_steps for r in ranks] == [summary["timesteps"] // 2] * 2  # each rank stepped its share
    observed, starts = [], []
    for source in ranks:
        rank = []
        for e in source.episodes():
            obs = np.asarray(e.observations)
            assert len(obs) == len(e.actions) + 1 and e.terminations[:-1].sum() == 0
            np.testing.assert_allclose(obs[1:, 0], obs[:-1, 0] + TAU * obs[:-1, 1], atol=1e-5)
            rank.append(obs)
            starts.append(obs[0].tobytes())
        observed.append(np.concatenate(rank))
    assert not np.array_equal(*observed)  # two ranks' own data, not one rank's twice
    # every env of every rank resets from a seed of its own: no episode starts from another's state
    assert len(set(starts)) == len(starts), f"{len(starts) - len(set(starts))} repeated episode starts"
