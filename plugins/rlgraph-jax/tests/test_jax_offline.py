"""Offline RL on the jax backend (CI's jax session): behaviour cloning from a CartPole dataset
recorded here from a scripted expert (nothing downloaded) reaches 90% of the expert's return, and
discrete CQL runs its updates as fused static rounds from the same data. The torch session runs
the full offline suite; tests/tf the CQL-against-BC comparison."""

from __future__ import annotations

import pytest

pytest.importorskip("minari", reason="the offline extra (minari) is not installed")

import rlgraph_core as rl  # noqa: E402
from rlgraph_core.testing.datasets import cartpole_expert, record_policy  # noqa: E402

SMALL = dict(network={"type": "mlp", "hidden": [64, 64]}, batch_size=64, backend="jax")


@pytest.mark.learning
def test_bc_clones_a_scripted_expert_on_jax(tmp_path):
    expert_return = record_policy(tmp_path / "expert", cartpole_expert, episodes=4)
    assert expert_return == 500.0
    bc = rl.make("bc", dataset=str(tmp_path / "expert"), mode="eager", eval_interval=500, eval_episodes=5, **SMALL)
    bc.learn(updates=500)
    assert bc.last_summary["eval_return_mean"] >= 0.9 * expert_return, bc.last_summary
    cql = rl.make("cql", dataset=str(tmp_path / "expert"), mode="static", eval_interval=200, eval_episodes=1, **SMALL)
    cql.learn(updates=200)
    assert cql.updates == 200 and cql.last_summary["eval_return_mean"] is not None
    assert cql.agent._fuses_round()  # the rounds ran as one compiled program each
