"""The jax backend under ``horovodrun -np 2 --gloo``: Horovod has no jax module, so the executor
reduces the gradient hook's numpy buffer through another Horovod module that imports
(``collectives.NEUTRAL_ORDER``). Two ranks that explore with their own seeds end with identical
weights and PPO learns CartPole-v1 (a return of 200 within the step budget, counted over both ranks:
reached at 18432 steps when written; 500 at that evaluation).
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from hvd_launch import HERE, run_horovod

pytest.importorskip("jax")

BUDGET = 40_000
TARGET = 200.0


def test_jax_ranks_stay_identical_and_learn(tmp_path):
    proc = run_horovod(
        sys.executable, str(HERE / "hvd_jax_learn.py"), "static", str(BUDGET), str(TARGET), str(tmp_path), timeout=600
    )
    log = proc.stdout[-4000:] + proc.stderr[-4000:]
    assert proc.returncode == 0, log
    summaries = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert summaries[0]["ranks"] == 2 and summaries[0]["allreduce_calls"] > 0, summaries
    assert summaries[1]["updates"] == summaries[0]["updates"]
    with np.load(tmp_path / "rank0.npz") as w0, np.load(tmp_path / "rank1.npz") as w1:
        assert sorted(w0.files) == sorted(w1.files)
        for name in w0.files:
            np.testing.assert_array_equal(w0[name], w1[name], err_msg=name)
    run = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert run["target_reached"] and run["eval_return_mean"] >= TARGET, run
    assert run["timesteps"] <= BUDGET
