"""Legal-action masks on the jax backend: a masked observation (a Dict whose ``action_mask`` the
heads read) goes through jax's compiled act and train programs; masked DQN trains on an env
that raises on an illegal action (docs/masking.md)."""

import pytest

import rlgraph_core as rl

ENV = {"id": "rlgraph_core.testing.masked_env:PickLegalMax", "num_envs": 4}


# DQN only: its act, greedy and loss programs take the mask (PPO's masked head runs through the
# same jax ops in tests/integration/test_parity_masks.py); each case costs ~20-45 s of jax compiles.
@pytest.mark.parametrize(
    ("name", "settings"), [("dqn", {"learning_starts": 128, "train_freq": 32, "gradient_steps": 4})]
)
def test_masked_agents_act_legally_on_jax(name, settings):
    algo = rl.make(
        name,
        env=ENV,
        backend="jax",
        mode="static",
        network={"type": "mlp", "hidden": [16]},
        eval_interval=10**9,
        **settings,
    )
    algo.learn(512)
    assert algo.timesteps >= 512 and algo.updates > 0
    assert algo.evaluate(2)["eval_length_mean"] == 16.0
