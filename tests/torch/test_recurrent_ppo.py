"""Recurrent PPO (``network: {type: lstm | gru}``) on torch: sequences unrolled in training give
the numbers acting gave, the memory env is learned only with memory, and the state goes through
``predict``, checkpoints and evaluation."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import rlgraph_core as rl
from rlgraph_core.agents.recurrent_ppo import RecurrentPPOAgent
from rlgraph_core.testing.memory_env import RecallCue

ENV = "rlgraph_core.testing.memory_env:RecallCue"


def small(cell: str, seed: int = 0, mode: str = "eager", **overrides):
    """PPO on RecallCue (delay 2: 4 steps an episode) with a small network of type ``cell``."""
    network = (
        {"type": "mlp", "hidden": [16]}
        if cell == "mlp"
        else {"type": cell, "units": 16, "encoder": {"hidden": []}, "seq_len": 4}
    )
    settings = dict(
        network=network,
        n_steps=16,
        batch_size=64,
        n_epochs=4,
        ent_coef=0.01,
        optimizer={"learning_rate": 3e-3},
        eval_interval=10**9,
    )
    settings.update(overrides)
    return rl.make("ppo", env={"id": ENV, "num_envs": 8}, backend="torch", mode=mode, seed=seed, **settings)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_sequences_unrolled_from_stored_states_give_what_acting_gave(cell):
    """Before any update, the loss's view of a rollout (sequences of seq_len steps from the state
    stored at each start, reset at the episode starts inside) equals the step-by-step acting: same
    log-probabilities and values at every step, although episodes (4 steps) straddle sequences."""
    algo = small(cell, n_steps=24, batch_size=96, network={"type": cell, "units": 8, "seq_len": 6})
    agent = algo.agent
    assert isinstance(agent, RecurrentPPOAgent)
    from rlgraph_core.testing.rollouts import collect_rollout

    rollout = collect_rollout(algo)
    starts = rollout["episode_starts"]
    assert starts[0].all() and starts[1:].any() and not starts[1:].all()
    # the state stored at each sequence start is the one the runner passed to act there
    steps, n = starts.shape
    pieces = steps // 6
    assert rollout["sequence_states"]["pi_h"].shape == (pieces, n, 8)
    to_t, to_np = agent.backend.to_tensor, agent.backend.to_numpy
    for piece in range(pieces):
        rows = slice(piece * 6, (piece + 1) * 6)
        state = {k: to_t(v[piece]) for k, v in rollout["sequence_states"].items()}
        log_probs, _, values = agent.graph.evaluate_actions(
            to_t(rollout["obs"][rows]), state, to_t(starts[rows]), to_t(rollout["actions"][rows])
        )
        np.testing.assert_allclose(to_np(log_probs).reshape(6, n), rollout["log_probs"][rows], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(to_np(values).reshape(6, n), rollout["values"][rows], rtol=1e-5, atol=1e-6)
    if cell == "lstm":  # a stored state that is not zero: memory crosses sequence boundaries
        assert np.abs(rollout["sequence_states"]["pi_c"][1:]).max() > 1e-3


def test_lstm_learns_the_memory_task_where_an_mlp_cannot():
    """RecallCue pays 1 for naming at the last step the cue of the first; a feed-forward policy
    can only guess (0.5). 2,000 env steps, seed 0."""
    lstm = small("lstm")
    lstm.learn(2000)
    remembered = lstm.evaluate(50)["eval_return_mean"]
    mlp = small("mlp")
    mlp.learn(2000)
    guessed = mlp.evaluate(50)["eval_return_mean"]
    assert remembered >= 0.9, f"LSTM PPO reached {remembered} on RecallCue after 2,000 env steps"
    assert guessed <= 0.7, f"MLP PPO reached {guessed}: the task no longer needs memory"


def test_predict_checkpoint_and_refusals(tmp_path):
    algo = small("gru", seed=1)
    algo.learn(256)
    env = RecallCue()
    obs, _ = env.reset(seed=0)
    action, state = algo.predict(obs)
    assert set(state) == {"pi_h", "vf_h"} and state["pi_h"].shape == (1, 16)
    action2, state2 = algo.predict(np.zeros(3, np.float32), state, episode_start=np.array([False]))
    assert int(action2) in (0, 1) and not np.allclose(state2["pi_h"], state["pi_h"])
    # the same steps after a round trip through a checkpoint (weights only: the state is the caller's)
    loaded = rl.load(algo.save(tmp_path / "ckpt"))
    assert isinstance(loaded.agent, RecurrentPPOAgent)
    again, state3 = loaded.predict(obs)
    np.testing.assert_allclose(state3["pi_h"], state["pi_h"], rtol=1e-6)
    assert int(again) == int(action)
    # a checkpoint taken half-way through a rollout resumes with a fresh one
    algo.learn(64)
    assert 0 < len(algo.agent.buffer) < algo.agent.buffer.n_steps
    resumed = rl.load(algo.save(tmp_path / "mid"))
    resumed.learn(256)
    assert resumed.timesteps >= algo.timesteps + 256 and resumed.agent.updates > algo.agent.updates
    with pytest.raises(ValueError, match="acts from a state"):
        algo.agent.act(obs[None])


def test_docs_recurrent_code_runs():
    """docs/recurrent.md's Python blocks, as a reader would paste them."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "recurrent.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    assert blocks
    exec(compile("\n\n".join(blocks), "<docs/recurrent.md>", "exec"), {"__name__": "__docs__"})


@pytest.mark.heavy
@pytest.mark.filterwarnings("error:torch.compile:RuntimeWarning")
def test_static_mode_compiles_and_learns_the_memory_task():
    """torch.compile'd act, greedy, value and train step (a compile failure, which would fall back
    to eager, is an error here); 2,000 env steps: 105.6 s with compilation, load ~9."""
    algo = small("lstm", mode="static")
    algo.learn(2000)
    assert algo.evaluate(50)["eval_return_mean"] >= 0.9


CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _cartpole_nov(tmp_path, overrides: list[str], cell: str = "lstm"):
    from rlgraph_core.assemble import train
    from rlgraph_core.config.run import apply_overrides, load_config_file, validate_config

    quiet = ["train.progress_bar=false", "train.loggers=[jsonl]"]
    raw = apply_overrides(load_config_file(CONFIGS / f"ppo_{cell}_cartpole_nov.yaml"), quiet + overrides)
    config = validate_config(raw)
    return config, (lambda: train(config, tmp_path))


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_cartpole_nov_configs_build_a_recurrent_agent_on_two_observations(tmp_path, cell):
    config, _ = _cartpole_nov(tmp_path, [], cell)
    algo = rl.make(config.to_dict(), eval_interval=10**9)
    assert isinstance(algo.agent, RecurrentPPOAgent) and algo.observation_space.shape == (2,)
    assert algo.config.agent.network.type == cell
    assert algo.config.env.wrappers[0].type == "select_observation"


@pytest.mark.heavy
def test_gru_balances_cartpole_without_velocities_where_an_mlp_cannot(tmp_path):
    """configs/ppo_gru_cartpole_nov.yaml reaches its target (450) within 100k env steps (measured:
    seed 0 500 at 24,576, seed 1 470 at 40,960); the same settings with a 64-64 tanh MLP instead
    of the GRU stay below 200 (measured: best 48.4 in 100k)."""
    _, run = _cartpole_nov(tmp_path / "gru", ["train.total_timesteps=100000"], "gru")
    summary = run()
    assert summary["target_reached"] and summary["best_eval_return"] >= 450, summary
    _, run = _cartpole_nov(
        tmp_path / "mlp",
        ["agent.network={type: mlp, hidden: [64, 64], activation: tanh}", "train.total_timesteps=100000"],
        "gru",
    )
    assert run()["best_eval_return"] < 200


MLP = "agent.network={type: mlp, hidden: [64, 64], activation: tanh}"


def test_lstm_config_balances_cartpole_without_velocities_where_an_mlp_cannot(tmp_path):
    """configs/ppo_lstm_cartpole_nov.yaml, seed 1, reaches its target (450) within 65,536 env steps
    (measured: 500.0 at 24,576, where the run stops; the budget leaves room for another machine's
    float rounding); the same settings with a 64-64 tanh MLP instead of the LSTM stay below 200 in
    40,960 (measured: best 49.1). 21.7 s wall, ~12 CPU-s for both (core 1, load ~2). The full run on seed 0 is the heavy test below."""
    _, run = _cartpole_nov(tmp_path / "lstm", ["train.seed=1", "train.total_timesteps=65536"])
    summary = run()
    assert summary["target_reached"] and summary["best_eval_return"] >= 450, summary
    _, run = _cartpole_nov(tmp_path / "mlp", ["train.seed=1", "train.total_timesteps=40960", MLP])
    assert run()["best_eval_return"] < 200


@pytest.mark.heavy
def test_lstm_config_reaches_its_target_on_seed_0_where_an_mlp_cannot(tmp_path):
    """configs/ppo_lstm_cartpole_nov.yaml as shipped (seed 0, 200k budget) reaches 450 (measured:
    500.0 at 90,112 env steps); the 64-64 tanh MLP stays below 200 in 100k (measured: best 49.2). 64.6 s
    wall, ~33 CPU-s (core 1, load ~2)."""
    _, run = _cartpole_nov(tmp_path / "lstm", [])
    summary = run()
    assert summary["target_reached"] and summary["best_eval_return"] >= 450, summary
    _, run = _cartpole_nov(tmp_path / "mlp", ["train.total_timesteps=100000", MLP])
    assert run()["best_eval_return"] < 200
