"""Cross-backend parity of recurrent PPO (``network: {type: lstm | gru}``): torch and tf, eager and static.

As for feed-forward PPO (test_parity_ppo_sac.py), one config and one seed give on both pairs:
bit-identical initial weights, the same forward pass over a rollout's sequences (log-probabilities,
entropies, values, unrolled from the stored states with resets inside) within ``1e-5``, and the
same losses and weights after an update of two epochs of shuffled sequence minibatches (``atol
1e-5, rtol 1e-4``). The rollout is made up: sequences of 4 steps, episode starts inside them,
non-zero stored states, old log-probabilities off the policy's so the clip is taken. ``cnn_lstm`` is an LSTM with a ``cnn`` encoder on
uint8 frames (``network: {type: lstm, encoder: {type: cnn, ...}}``). CI compares
the eager pairs; the static ones (``torch.compile``, ``tf.function``: a minute per agent on loaded
CPUs) are ``heavy``. All six eager and tf-static comparisons passed here (183 s together, load ~9).
"""

from __future__ import annotations

import numpy as np
import pytest
from parity_pairs import comparison_id, comparisons

from rlgraph_core.agents.ppo import PPOConfig
from rlgraph_core.agents.recurrent_ppo import RecurrentPPOAgent
from rlgraph_core.assemble import make_backend
from rlgraph_core.components.recurrent import RecurrentSettings
from rlgraph_core.spaces import Discrete, FloatBox, IntBox

pytestmark = pytest.mark.filterwarnings("error:torch.compile:RuntimeWarning")

T, N, L = 8, 4, 4  # 8 steps of 4 envs in sequences of 4: 8 sequences, minibatches of 4 sequences
OBS = FloatBox(shape=(3,))
#: the uint8 frames of ``cnn_lstm`` and its encoder: one 3x3 convolution of stride 2, then 5 features
FRAMES = IntBox(0, 255, shape=(7, 7, 2), dtype=np.uint8)
CNN = {"type": "cnn", "preset": "custom", "conv": [{"filters": 3, "kernel": 3, "stride": 2}], "hidden": [5]}


def config(cell: str) -> PPOConfig:
    encoder = CNN if cell == "cnn_lstm" else {"hidden": [5], "activation": "tanh"}
    return PPOConfig(
        network=RecurrentSettings(type=cell.replace("cnn_", ""), units=6, encoder=encoder, seq_len=L),
        n_steps=T,
        batch_size=2 * L * 2,
        n_epochs=2,
        ent_coef=0.01,
        optimizer={"learning_rate": 3e-3},
    )


def rollout(cell: str) -> dict:
    r = np.random.default_rng(7)
    starts = r.random((T, N)) < 0.2
    starts[0] = True
    keys = ("pi_h", "pi_c", "vf_h", "vf_c") if cell != "gru" else ("pi_h", "vf_h")
    frames = cell == "cnn_lstm"
    return {
        "obs": r.integers(0, 256, (T, N, 7, 7, 2), np.uint8)
        if frames
        else r.standard_normal((T, N, 3)).astype(np.float32),
        "actions": r.integers(0, 2, (T, N)),
        "log_probs": (np.log(0.5) + 0.3 * r.standard_normal((T, N))).astype(np.float32),
        "values": (0.5 * r.standard_normal((T, N))).astype(np.float32),
        "rewards": r.standard_normal((T, N)).astype(np.float32),
        "terminated": np.roll(starts, -1, axis=0) & (r.random((T, N)) < 0.5),
        "truncated": np.zeros((T, N), bool),
        "next_values": (0.5 * r.standard_normal((T, N))).astype(np.float32),
        "episode_starts": starts,
        "sequence_states": {k: (0.5 * r.standard_normal((T // L, N, 6))).astype(np.float32) for k in keys},
    }


_RUNS: dict = {}


def run(cell: str, pair) -> dict:
    key = (cell, pair)
    if key not in _RUNS:
        backend = make_backend(pair[0], pair[1], device="cpu", seed=0)
        agent = RecurrentPPOAgent(
            config(cell), FRAMES if cell == "cnn_lstm" else OBS, Discrete(2), backend, seed=0, num_envs=N
        )
        batch = rollout(cell)
        to_t, to_np = backend.to_tensor, backend.to_numpy
        state = {k: to_t(v[0]) for k, v in batch["sequence_states"].items()}
        forward = agent.graph.evaluate_actions(
            to_t(batch["obs"][:L]), state, to_t(batch["episode_starts"][:L]), to_t(batch["actions"][:L])
        )
        out = {"initial": agent.get_weights(), "forward": [to_np(x) for x in forward]}
        out["metrics"] = agent.update(batch)
        out["updated"] = agent.get_weights()
        _RUNS[key] = out
    return _RUNS[key]


# static pairs trace the update's unrolled cells (tf.function: tens of seconds per agent on 2 loaded
# cores): heavy, as torch static is
PARAMS = [
    pytest.param(
        cell,
        ref,
        other,
        id=f"{cell}-{comparison_id(ref, other)}",
        marks=[pytest.mark.heavy] if "static" in (ref[1], other[1]) else [],
    )
    for cell in ("lstm", "gru", "cnn_lstm")
    for ref, other in comparisons()
]


@pytest.mark.parametrize("cell,ref_pair,pair", PARAMS)
def test_recurrent_ppo_same_weights_forward_and_update(cell, ref_pair, pair):
    got, ref = run(cell, pair), run(cell, ref_pair)
    assert sorted(got["initial"]) == sorted(ref["initial"])
    for k in ref["initial"]:
        np.testing.assert_array_equal(got["initial"][k], ref["initial"][k], err_msg=k)
    for a, b in zip(got["forward"], ref["forward"]):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)
    for name in ("loss", "pg_loss", "vf_loss", "entropy", "approx_kl"):
        assert got["metrics"][name] == pytest.approx(ref["metrics"][name], abs=1e-5, rel=1e-4), name
    assert got["metrics"]["gradient_steps"] == 4
    for k in ref["updated"]:
        np.testing.assert_allclose(got["updated"][k], ref["updated"][k], atol=1e-5, rtol=1e-4, err_msg=k)
