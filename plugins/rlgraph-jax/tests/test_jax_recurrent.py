"""Recurrent PPO on the jax backend: the recurrent actor-critic equals the numpy harness (whose
lstm/gru are the float64 reference), unrolled training sequences reproduce acting, an update runs,
and (heavy) the memory task is learned."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jax")

import rlgraph_core as rl  # noqa: E402
from rlgraph_core.components.recurrent import RecurrentSettings  # noqa: E402
from rlgraph_core.components.recurrent_actor_critic import RecurrentActorCritic  # noqa: E402
from rlgraph_core.envs import make_vector_env  # noqa: E402
from rlgraph_core.execution.env_runner import EnvRunner  # noqa: E402
from rlgraph_core.spaces import BoolBox, Discrete, FloatBox  # noqa: E402
from rlgraph_core.testing import ComponentTest  # noqa: E402

ENV = "rlgraph_core.testing.memory_env:RecallCue"


# one case in CI (13.7 s at load ~9); the other three take 18-31 s each there: heavy
@pytest.mark.parametrize(
    "cell, mode",
    [
        ("lstm", "static"),
        pytest.param("lstm", "eager", marks=pytest.mark.heavy),
        pytest.param("gru", "static", marks=pytest.mark.heavy),
        pytest.param("gru", "eager", marks=pytest.mark.heavy),
    ],
)
def test_recurrent_actor_critic_equals_the_numpy_reference(cell, mode):
    rng = np.random.default_rng(2)
    seq = dict(flag=True, time_major=True)
    obs_space = FloatBox(shape=(4,)).with_batch_rank().with_time_rank(**seq)
    reset_space = BoolBox().with_batch_rank().with_time_rank(**seq)
    obs = rng.standard_normal((5, 3, 4)).astype(np.float32)
    reset = np.zeros((5, 3), bool)
    reset[0, 0] = reset[3, 2] = True
    actions = rng.integers(0, 3, (5, 3))
    results = []
    for pair in (("numpy", "eager"), ("jax", mode)):
        settings = RecurrentSettings(type=cell, units=6, encoder={"hidden": [5], "activation": "tanh"})
        policy = RecurrentActorCritic(settings, Discrete(3), seed=4)
        spaces = {
            "evaluate": {
                "obs": obs_space,
                "state": policy.state_space,
                "reset": reset_space,
                "actions": Discrete(3).with_batch_rank().with_time_rank(**seq),
            },
            "deterministic": {"obs": obs_space, "state": policy.state_space, "reset": reset_space},
            "value": {"obs": obs_space, "state": policy.state_space, "reset": reset_space},
            "act": {
                "obs": obs_space,
                "state": policy.state_space,
                "reset": reset_space,
                "noise": FloatBox(0, 1, (3,)).with_batch_rank().with_time_rank(**seq),
            },
        }
        test = ComponentTest(policy, spaces, pair)
        state = {k: np.full((3, 6), 0.1 * i, np.float32) for i, k in enumerate(policy.state_space.keys())}
        results.append(
            (test.call("evaluate", obs, state, reset, actions), test.call("deterministic", obs, state, reset))
        )
    (ref_eval, (ref_greedy, ref_state)), (got_eval, (got_greedy, got_state)) = results
    for ref, got in zip(ref_eval, got_eval):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(got_greedy, ref_greedy)
    for key in ref_state:
        np.testing.assert_allclose(got_state[key], ref_state[key], rtol=1e-4, atol=1e-5, err_msg=key)


def make(mode: str):
    return rl.make(
        "ppo",
        env={"id": ENV, "num_envs": 4},
        backend="jax",
        mode=mode,
        seed=0,
        network={"type": "lstm", "units": 16, "encoder": {"hidden": []}, "seq_len": 4},
        n_steps=16,
        batch_size=32,
        n_epochs=4,
        ent_coef=0.01,
        optimizer={"learning_rate": 3e-3},
        eval_interval=10**9,
    )


@pytest.mark.heavy  # 71 s, mostly jax.jit of the act and train steps (load ~9)
def test_unrolled_sequences_reproduce_acting_and_an_update_runs():
    algo = make("static")
    agent = algo.agent
    envs = make_vector_env(algo.config.env, 0, wrappers=[])
    runner = EnvRunner(agent, envs, seed=0)
    while not agent.buffer.full:
        runner.step()
    rollout = agent.rollout()
    envs.close()
    starts = rollout["episode_starts"]
    to_t, to_np = agent.backend.to_tensor, agent.backend.to_numpy
    n = starts.shape[1]
    for piece in range(starts.shape[0] // 4):
        rows = slice(piece * 4, (piece + 1) * 4)
        state = {k: to_t(v[piece]) for k, v in rollout["sequence_states"].items()}
        log_probs, _, values = agent.graph.evaluate_actions(
            to_t(rollout["obs"][rows]), state, to_t(starts[rows]), to_t(rollout["actions"][rows])
        )
        np.testing.assert_allclose(to_np(log_probs).reshape(4, n), rollout["log_probs"][rows], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(to_np(values).reshape(4, n), rollout["values"][rows], rtol=1e-5, atol=1e-5)
    metrics = agent.update(rollout)
    assert metrics["gradient_steps"] == 8 and np.isfinite(metrics["loss"])


@pytest.mark.heavy
def test_jax_static_lstm_learns_the_memory_task():
    algo = make("static")
    algo.learn(2000)
    assert algo.evaluate(50)["eval_return_mean"] >= 0.9


@pytest.mark.heavy
def test_jax_static_r2d2_cnn_lstm_learns_the_pixel_memory_task():
    """R2D2 (``type: dqn``) with a CNN before the LSTM on RecallCueImage's uint8 frames, jax static:
    1.0 after 1,000 env steps, as on torch and tf (tests/torch/test_recurrent_pixels.py). Measured
    seed 0: 1.0, 19.7 s wall at load ~6 on one shared core."""
    from rlgraph_core.agents.recurrent_dqn import RecurrentDQNAgent
    from rlgraph_core.testing.memory_env import r2d2_recall_settings

    cnn = {"type": "cnn", "preset": "custom", "conv": [{"filters": 8, "kernel": 3, "stride": 3}], "hidden": [16]}
    settings = r2d2_recall_settings()
    del settings["type"]
    settings["network"]["encoder"] = cnn
    algo = rl.make(
        "dqn",
        env={"id": "rlgraph_core.testing.memory_env:RecallCueImage", "num_envs": 8},
        backend="jax",
        mode="static",
        seed=0,
        exploration={"type": "epsilon_greedy", "epsilon": {"type": "linear", "start": 1.0, "end": 0.05, "steps": 500}},
        eval_interval=10**9,
        **settings,
    )
    assert isinstance(algo.agent, RecurrentDQNAgent)
    algo.learn(1000)
    assert algo.agent.memory.sample(1)["obs"].dtype == np.uint8
    assert algo.evaluate(50)["eval_return_mean"] >= 0.9
