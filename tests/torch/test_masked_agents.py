"""Masked agents end to end on :class:`~rlgraph_core.testing.masked_env.PickLegalMax`, whose step
*raises* on an illegal action: PPO (sb3-contrib's ``action_masks()`` convention) and DQN
(PettingZoo's ``action_mask`` key) train through thousands of env steps without one, masked DQN
learns the task to an asserted return, ``predict`` takes the mask in the observation, and an
all-false mask stops at the first step that has one, naming it."""

from __future__ import annotations

import numpy as np
import pytest

import rlgraph_core as rl
from rlgraph_core.testing.masked_env import PickLegalMax

ENV = "rlgraph_core.testing.masked_env:PickLegalMax"

#: A small DQN that learns PickLegalMax (6 actions, 16 steps) in a few thousand env steps.
SMALL_DQN = dict(
    network={"type": "mlp", "hidden": [64]},
    gamma=0.5,
    learning_starts=256,
    train_freq=32,
    gradient_steps=16,
    target_update_interval=50,
    exploration={"type": "linear", "start": 1.0, "end": 0.02, "steps": 1500},
    optimizer={"learning_rate": 3e-3},
    memory={"type": "replay", "capacity": 5000},
    eval_interval=10**9,
)


def test_ppo_trains_through_an_env_that_raises_on_illegal_actions():
    algo = rl.make(
        "ppo",
        env={"id": ENV, "num_envs": 4, "kwargs": {"mask_in": "method"}},
        backend="torch",
        network={"type": "mlp", "hidden": [32]},
        n_steps=64,
        batch_size=128,
        n_epochs=1,
        eval_interval=10**9,
    )
    assert set(algo.observation_space.spaces) == {"observation", "action_mask"}
    algo.learn(2048)
    assert algo.timesteps >= 2048 and algo.updates > 0


@pytest.mark.parametrize("name", ["a2c", "impala"])
def test_a2c_and_impala_act_legally(name):
    algo = rl.make(
        name,
        env={"id": ENV, "num_envs": 4},
        backend="torch",
        network={"type": "mlp", "hidden": [16]},
        n_steps=16,
        eval_interval=10**9,
    )
    algo.learn(1024)
    assert algo.timesteps >= 1024 and algo.updates > 0


def test_masked_dqn_learns_without_an_illegal_action():
    """Random legal play earns ~5.6 of 16; the masked greedy policy must reach 12."""
    algo = rl.make("dqn", env={"id": ENV, "num_envs": 4}, backend="torch", seed=0, **SMALL_DQN)
    before = algo.evaluate(10)["eval_return_mean"]
    algo.learn(3000)
    after = algo.evaluate(20)["eval_return_mean"]
    assert before < 9.0
    assert after >= 12.0, f"masked DQN reached {after} (from {before}) in 3000 env steps"
    # replay stores the mask with the observation, and the next observation's with it
    stored = algo.agent.memory.state_dict()
    assert stored["data/obs/action_mask"].dtype == np.int8 and stored["data/next_obs/action_mask"].shape[1:] == (6,)


def test_predict_takes_the_mask_and_refuses_an_all_false_one():
    algo = rl.make("dqn", env={"id": ENV, "num_envs": 1}, backend="torch", **SMALL_DQN)
    env = PickLegalMax()
    obs, _ = env.reset(seed=3)
    for _ in range(20):
        action = algo.predict(obs)
        assert obs["action_mask"][action] == 1
        sampled = algo.predict(obs, deterministic=False)
        assert obs["action_mask"][sampled] == 1
        obs, _, terminated, _, _ = env.step(action)
        if terminated:
            obs, _ = env.reset()
    batch = {"observation": np.full((3, 6), 0.5, np.float32), "action_mask": np.eye(6, dtype=np.int8)[[5, 0, 2]]}
    np.testing.assert_array_equal(algo.predict(batch), [5, 0, 2])
    batch["action_mask"][1] = 0
    with pytest.raises(ValueError, match=r"legal-action mask of env 1 at env step \d+ allows no action"):
        algo.predict(batch)


def test_docs_masking_blocks_run():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "masking.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    assert blocks and "algo.predict(obs)" in blocks[0]
    exec(compile("\n".join(blocks), "<docs/masking.md>", "exec"), {"__name__": "__docs__"})
