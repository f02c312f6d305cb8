"""Offline RL on the jax backend (CI's jax session): behaviour cloning from a CartPole dataset
recorded here from a scripted expert (nothing downloaded) reaches 90% of the expert's return, and
discrete CQL runs its updates as fused static rounds from the same data; a dataset Minari's own
DataCollector wrote (it needs jax: ``minari[create]``, which this session has and the torch one
does not) is found by its id and cloned. The torch session runs the full offline suite; tests/tf
the CQL-against-BC comparison."""

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


@pytest.mark.learning
def test_a_dataset_minaris_data_collector_wrote_is_learned_from(tmp_path, monkeypatch):
    import gymnasium as gym
    import minari

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    env = minari.DataCollector(gym.make("CartPole-v1"))
    for seed in range(2):
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            obs, _, terminated, truncated, _ = env.step(int(cartpole_expert(obs[None])[0]))
            done = terminated or truncated
    env.create_dataset(
        "cartpole/collector-v0",
        algorithm_name="scripted",
        author="tests",
        author_email="tests@example.org",
        code_permalink="tests",
        description="two expert episodes",
    )
    env.close()
    bc = rl.make("bc", dataset="cartpole/collector-v0", mode="static", eval_interval=300, eval_episodes=3, **SMALL)
    assert bc.config.env.id == "CartPole-v1"  # from the dataset's env spec
    bc.learn(updates=300)
    summary = bc.last_summary
    assert summary["dataset_episodes"] == 2 and summary["dataset_transitions"] == 1000
    assert bc.agent._fuses_round() and summary["eval_return_mean"] >= 450.0, summary
