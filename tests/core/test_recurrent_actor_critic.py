"""The recurrent actor-critic (recurrent PPO's policy) against plain numpy, on every backend and mode.

Separate actor and critic cores (or one shared), an MLP encoder in front (and one MLP per head
after the cores, ``head``), a sequence with episode
starts in the middle: log-probabilities, entropies, values, greedy actions and the state after the
sequence equal a numpy reference built from the reference LSTM/GRU of the same weights; sampled
actions are scored by ``evaluate`` as ``act`` scored them. Every installed backend (torch, tf,
jax) is compared with the same numbers, so backends agree with each other through numpy.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlgraph_core.components.recurrent import RecurrentSettings
from rlgraph_core.components.recurrent_actor_critic import RecurrentActorCritic
from rlgraph_core.spaces import BoolBox, Discrete, FloatBox
from rlgraph_core.testing import ComponentTest, backend_params
from rlgraph_core.testing.recurrent_reference import reference_gru, reference_lstm

T, B, F, A, UNITS = 4, 3, 4, 3, 6
rng = np.random.default_rng(11)
OBS = rng.standard_normal((T, B, F)).astype(np.float32)
RESET = np.zeros((T, B), bool)
RESET[0, 0] = RESET[2, 1] = True
ACTIONS = rng.integers(0, A, (T, B))


def make(cell: str, shared: bool, head: list[int]):
    settings = RecurrentSettings(
        type=cell,
        units=UNITS,
        encoder={"hidden": [5], "activation": "tanh"},
        head={"hidden": head, "activation": "tanh"},
    )
    policy = RecurrentActorCritic(settings, Discrete(A), shared_trunk=shared, seed=3)
    seq = dict(flag=True, time_major=True)
    obs = FloatBox(shape=(F,)).with_batch_rank().with_time_rank(**seq)
    reset = BoolBox().with_batch_rank().with_time_rank(**seq)
    state = policy.state_space
    spaces = {
        "act": {
            "obs": obs,
            "state": state,
            "reset": reset,
            "noise": FloatBox(0, 1, (A,)).with_batch_rank().with_time_rank(**seq),
        },
        "deterministic": {"obs": obs, "state": state, "reset": reset},
        "value": {"obs": obs, "state": state, "reset": reset},
        "evaluate": {
            "obs": obs,
            "state": state,
            "reset": reset,
            "actions": Discrete(A).with_batch_rank().with_time_rank(**seq),
        },
    }
    return policy, spaces


def reference(w, cell, prefix, state):
    """``(outputs [T * B, units], state after)`` of one core in numpy."""
    feats = np.tanh(OBS @ w[f"{prefix}encoder/dense_0/W"] + w[f"{prefix}encoder/dense_0/b"])
    if cell == "lstm":
        y, h, c = reference_lstm(
            feats,
            state[f"{prefix_key(prefix)}h"],
            state[f"{prefix_key(prefix)}c"],
            *(w[prefix + n] for n in ("w_x", "w_h", "b")),
            RESET,
        )
        return y.reshape(T * B, UNITS), {"h": h, "c": c}
    y, h = reference_gru(
        feats, state[f"{prefix_key(prefix)}h"], *(w[prefix + n] for n in ("w_x", "w_h", "b_x", "b_h")), RESET
    )
    return y.reshape(T * B, UNITS), {"h": h}


def prefix_key(prefix: str) -> str:
    """``pi_core/`` -> the state keys' prefix ``pi_``; ``core/`` (shared) -> none."""
    return {"pi_core/": "pi_", "vf_core/": "vf_", "core/": ""}[prefix]


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


@pytest.fixture(params=backend_params())
def pair(request):
    return request.param


@pytest.mark.parametrize("cell, shared, head", [("lstm", False, []), ("gru", False, [7]), ("lstm", True, [])])
def test_recurrent_actor_critic_matches_numpy(pair, cell, shared, head):
    policy, spaces = make(cell, shared, head)
    test = ComponentTest(policy, spaces, pair)
    w = test.get_weights()
    state = {k: rng.standard_normal((B, UNITS)).astype(np.float32) for k in policy.state_space.keys()}
    pi_prefix, vf_prefix = ("core/", "core/") if shared else ("pi_core/", "vf_core/")
    h_pi, pi_state = reference(w, cell, pi_prefix, state)
    h_v, vf_state = reference(w, cell, vf_prefix, state)
    if head:  # one MLP per head after the cores
        h_pi = np.tanh(h_pi @ w["pi_mlp/dense_0/W"] + w["pi_mlp/dense_0/b"])
        h_v = np.tanh(h_v @ w["vf_mlp/dense_0/W"] + w["vf_mlp/dense_0/b"])
    logp_all = log_softmax(h_pi @ w["distribution/logits/W"] + w["distribution/logits/b"])
    values = (h_v @ w["value_head/W"] + w["value_head/b"])[:, 0]
    flat = ACTIONS.reshape(-1)

    log_probs, entropy, got_values = test.call("evaluate", OBS, state, RESET, ACTIONS)
    np.testing.assert_allclose(log_probs, logp_all[np.arange(T * B), flat], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(entropy, -(np.exp(logp_all) * logp_all).sum(-1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_values, values, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(test.call("value", OBS, state, RESET), values, rtol=1e-4, atol=1e-5)

    greedy, out_state = test.call("deterministic", OBS, state, RESET)
    np.testing.assert_array_equal(greedy, logp_all.argmax(-1))
    expected = {prefix_key(pi_prefix) + k: v for k, v in pi_state.items()}
    expected.update({prefix_key(vf_prefix) + k: v for k, v in vf_state.items()})
    assert set(out_state) == set(state) == set(expected)
    for key, value in expected.items():
        np.testing.assert_allclose(out_state[key], value, rtol=1e-4, atol=1e-5, err_msg=key)

    noise = rng.uniform(1e-6, 1.0, (T, B, A)).astype(np.float32)
    actions, act_log_probs, act_values, act_state = test.call("act", OBS, state, RESET, noise)
    np.testing.assert_allclose(act_log_probs, logp_all[np.arange(T * B), actions], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(act_values, values, rtol=1e-4, atol=1e-5)
    for key, value in expected.items():
        np.testing.assert_allclose(act_state[key], value, rtol=1e-4, atol=1e-5, err_msg=key)
