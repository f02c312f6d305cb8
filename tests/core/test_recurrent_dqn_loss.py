"""R2D2's sequence loss (recurrent DQN) against plain numpy, on every installed backend and mode.

Windows of ``seq_len`` steps with a burn-in, episode starts and a termination and a truncation
inside, prioritized weights: the loss and the per-step ``|TD|`` of
:class:`~rlgraph_core.agents.recurrent_dqn.RecurrentDQNGraph` equal a numpy reference written
step by step from the definitions (reference LSTM/GRU of the same weights, double-Q n-step
targets inside the window, no bootstrap past a termination, no loss where a truncation meets the
n-step window), and so do R2D2's sequence priorities. On a framework backend the gradient equals
finite differences of the reference with the burn-in state held fixed (no gradient through the
burn-in) and differs from the one through it.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlgraph_core.agents.dqn import DQNConfig
from rlgraph_core.agents.recurrent_dqn import RecurrentDQNGraph
from rlgraph_core.components.recurrent import RecurrentSettings
from rlgraph_core.memories.sequences import sequence_batch, sequence_priorities
from rlgraph_core.spaces import BoolBox, FloatBox, IntBox
from rlgraph_core.testing import ComponentTest, NumpyOps, backend_params
from rlgraph_core.testing.recurrent_reference import reference_gru, reference_lstm

B, L, F, A, UNITS, GAMMA, ETA = 3, 7, 3, 2, 4, 0.9, 0.9


def window_sample(rng, cell):
    """Three sequence records as replay holds them: an episode start inside, a termination in
    the first, a truncation in the second, stored states that are not zero."""
    starts = np.zeros((B, L + 1), bool)
    terminated = np.zeros((B, L), bool)
    truncated = np.zeros((B, L), bool)
    terminated[0, 4] = starts[0, 5] = True
    truncated[1, 5] = starts[1, 6] = True
    starts[2, 0] = True
    keys = ("h", "c") if cell == "lstm" else ("h",)
    return {
        "obs": rng.standard_normal((B, L + 1, F)).astype(np.float32),
        "starts": starts,
        "actions": rng.integers(0, A, (B, L)),
        "rewards": rng.standard_normal((B, L)).astype(np.float32),
        "terminated": terminated,
        "truncated": truncated,
        "state": {k: rng.standard_normal((B, UNITS)).astype(np.float32) * 0.5 for k in keys},
        "weights": np.array([1.0, 0.5, 0.8], np.float32),
    }


def make(cell, burn_in, n_step, loss_type, encoder=None, obs_space=None):
    """The graph and its input spaces; ``encoder`` in front of the cell reads ``obs_space`` (default:
    none on float vectors of ``F``)."""
    obs_space = obs_space or FloatBox(shape=(F,))
    config = DQNConfig(
        network=RecurrentSettings(type=cell, units=UNITS, encoder=encoder or {"hidden": []}, seq_len=L),
        burn_in=burn_in,
        n_step=n_step,
        gamma=GAMMA,
        loss_type=loss_type,
        double_q=True,
    )
    graph = RecurrentDQNGraph(config, obs_space, A, seed=5)
    seq = dict(flag=True, time_major=True)
    obs = obs_space.with_batch_rank().with_time_rank(**seq)
    reset = BoolBox().with_batch_rank().with_time_rank(**seq)
    state = graph.policy.state_space
    float_b = FloatBox(shape=()).with_batch_rank()
    rows = IntBox(0, 2**31 - 1, shape=()).with_batch_rank()
    spaces = {
        "act": {
            "obs": obs,
            "state": state,
            "reset": reset,
            "noise": FloatBox(shape=graph.exploration.noise_shape).with_batch_rank().with_time_rank(**seq),
            "value": FloatBox(shape=()),
        },
        "greedy": {"obs": obs, "state": state, "reset": reset},
        "q_values": {"obs": obs, "state": state, "reset": reset},
        "loss": {
            "burn_obs": obs,
            "burn_reset": reset,
            "obs": obs,
            "reset": reset,
            "state": state,
            "rows": rows,
            "boot_rows": rows,
            "actions": IntBox(0, A - 1, shape=()).with_batch_rank(),
            "returns": float_b,
            "discounts": float_b,
            "weights": float_b,
        },
        "sync_target": {},
    }
    return graph, spaces


def unroll(w, prefix, cell, obs, state, reset):
    """``(Q [T, B, A], state after)`` of one network in numpy (float64)."""
    core = f"{prefix}/core/"
    if cell == "lstm":
        y, h, c = reference_lstm(obs, state["h"], state["c"], w[core + "w_x"], w[core + "w_h"], w[core + "b"], reset)
        out = {"h": h, "c": c}
    else:
        y, h = reference_gru(obs, state["h"], *(w[core + n] for n in ("w_x", "w_h", "b_x", "b_h")), reset)
        out = {"h": h}
    return y @ w[f"{prefix}/head/q/W"] + w[f"{prefix}/head/q/b"], out


def reference(w, cell, sample, burn_in, n_step, loss_type, warm=None, features=None):
    """``(loss, |TD| [S, B], mask [S, B])`` of R2D2's loss, step by step from its definition.
    ``warm``: the online state after the burn-in to use (None: unrolled from these weights);
    ``features``: what each network's cell reads, ``{"policy" | "target": [B, L + 1, F]}`` (None: the observations)."""
    obs = np.swapaxes(sample["obs"], 0, 1).astype(np.float64)
    if features is not None:
        obs = np.swapaxes(features["policy"], 0, 1).astype(np.float64)
        target_obs = np.swapaxes(features["target"], 0, 1).astype(np.float64)
    else:
        target_obs = obs
    reset = np.swapaxes(sample["starts"], 0, 1)
    state = {k: v.astype(np.float64) for k, v in sample["state"].items()}
    if warm is None:
        warm = unroll(w, "policy", cell, obs[:burn_in], state, reset[:burn_in])[1] if burn_in else state
    target_warm = unroll(w, "target", cell, target_obs[:burn_in], state, reset[:burn_in])[1] if burn_in else state
    q_on = unroll(w, "policy", cell, obs[burn_in:], warm, reset[burn_in:])[0]
    q_tg = unroll(w, "target", cell, target_obs[burn_in:], target_warm, reset[burn_in:])[0]
    trained = L - burn_in
    td = np.zeros((trained, B))
    mask = np.ones((trained, B))
    per_row = np.zeros((trained, B))
    for b in range(B):
        for k in range(trained):
            t = burn_in + k
            ret, bootstrap, steps = 0.0, True, min(n_step, L - t)
            for i in range(steps):
                ret += GAMMA**i * sample["rewards"][b, t + i]
                if sample["truncated"][b, t + i]:
                    mask[k, b] = 0.0
                if sample["terminated"][b, t + i] or sample["truncated"][b, t + i]:
                    bootstrap = False
                    break
            target = ret
            if bootstrap:
                best = np.argmax(q_on[k + steps, b])
                target += GAMMA**steps * q_tg[k + steps, b, best]
            td[k, b] = q_on[k, b, sample["actions"][b, t]] - target
            x = abs(td[k, b])
            loss = (0.5 * x * x if x <= 1.0 else x - 0.5) if loss_type == "huber" else x * x
            per_row[k, b] = sample["weights"][b] * mask[k, b] * loss
    return per_row.mean(), np.abs(td), mask


def _pairs(framework_only: bool = False) -> list:
    """Every installed backend's eager pair in CI; static (tracing/compiling: 5-15 s a case on tf
    under load) is heavy."""
    out = []
    for param in backend_params():
        (name, mode), marks = param.values[0], list(param.marks)
        if framework_only and name == "numpy":
            continue
        if mode == "static":
            marks.append(pytest.mark.heavy)
        out.append(pytest.param((name, mode), id=param.id, marks=marks))
    return out


@pytest.fixture(params=_pairs())
def pair(request):
    return request.param


@pytest.mark.parametrize("cell, burn_in, n_step", [("lstm", 3, 2), ("gru", 2, 3), ("lstm", 0, 1)])
def test_sequence_loss_with_burn_in_matches_numpy(pair, cell, burn_in, n_step):
    rng = np.random.default_rng(1)
    graph, spaces = make(cell, burn_in, n_step, "huber")
    test = ComponentTest(graph, spaces, pair)
    w = test.get_weights()
    # a target network that differs from the online one, so double Q reads both
    w.update({k: v + 0.3 * rng.standard_normal(v.shape).astype(np.float32) for k, v in w.items() if "target" in k})
    test.set_weights(w)
    sample = window_sample(rng, cell)
    inputs, mask = sequence_batch(sample, burn_in, n_step, GAMMA)
    loss, td = test.call("loss", *inputs)
    ref_loss, ref_td, ref_mask = reference(w, cell, sample, burn_in, n_step, "huber")
    np.testing.assert_array_equal(mask, ref_mask)
    assert ref_mask.min() == 0.0  # the truncation masks steps
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(td.reshape(L - burn_in, B) * mask, ref_td * ref_mask, rtol=1e-4, atol=1e-5)
    priorities = sequence_priorities(td.reshape(L - burn_in, B), mask, ETA)
    valid = [ref_td[:, b][ref_mask[:, b] > 0] for b in range(B)]
    expected = [ETA * v.max() + (1 - ETA) * v.mean() for v in valid]
    np.testing.assert_allclose(priorities, expected, rtol=1e-4, atol=1e-5)


#: R2D2 on uint8 frames: one 3x3 convolution of stride 2 on 7x7x2 images, then F features for the cell
CNN = {"type": "cnn", "preset": "custom", "conv": [{"filters": 3, "kernel": 3, "stride": 2}], "hidden": [F]}
FRAMES = IntBox(0, 255, shape=(7, 7, 2), dtype=np.uint8)


def np_cnn_features(w, prefix, frames):
    """:data:`CNN` on uint8 ``frames [..., 7, 7, 2]`` with the weights under ``prefix``, in numpy (float64)."""
    lead = frames.shape[:-3]
    x = frames.reshape(-1, 7, 7, 2).astype(np.float64) / 255
    x = np.maximum(NumpyOps().conv2d(x, w[f"{prefix}conv_0/W"], w[f"{prefix}conv_0/b"], 2, "valid"), 0)
    x = np.maximum(x.reshape(len(x), -1) @ w[f"{prefix}dense_0/W"] + w[f"{prefix}dense_0/b"], 0)
    return x.reshape(*lead, F)


def test_sequence_loss_of_a_cnn_lstm_on_uint8_windows_matches_numpy(pair):
    """R2D2 on image observations: the CNN runs on every step of a window of uint8 frames (time folded
    into the batch) before the LSTM; the loss and |TD| equal the reference on the CNN's features
    recomputed in numpy from each network's weights."""
    rng = np.random.default_rng(3)
    burn_in, n_step = 2, 2
    graph, spaces = make("lstm", burn_in, n_step, "huber", encoder=CNN, obs_space=FRAMES)
    test = ComponentTest(graph, spaces, pair)
    w = test.get_weights()
    w.update({k: v + 0.3 * rng.standard_normal(v.shape).astype(np.float32) for k, v in w.items() if "target" in k})
    test.set_weights(w)
    sample = dict(window_sample(rng, "lstm"), obs=rng.integers(0, 256, (B, L + 1, 7, 7, 2), dtype=np.uint8))
    inputs, mask = sequence_batch(sample, burn_in, n_step, GAMMA)
    assert inputs[0].dtype == inputs[2].dtype == np.uint8  # the frames reach the graph as uint8
    loss, td = test.call("loss", *inputs)
    w64 = {k: v.astype(np.float64) for k, v in w.items()}
    features = {p: np_cnn_features(w64, f"{p}/core/encoder/", sample["obs"]) for p in ("policy", "target")}
    ref_loss, ref_td, ref_mask = reference(w64, "lstm", sample, burn_in, n_step, "huber", features=features)
    np.testing.assert_array_equal(mask, ref_mask)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(td.reshape(L - burn_in, B) * mask, ref_td * ref_mask, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("pair", _pairs(framework_only=True))
def test_no_gradient_flows_through_the_burn_in(pair):
    """Gradients of the loss (mse: smooth for finite differences) w.r.t. the online weights equal
    central differences of the reference with the post-burn-in state held at its value."""
    rng = np.random.default_rng(2)
    cell, burn_in, n_step = "lstm", 3, 2
    graph, spaces = make(cell, burn_in, n_step, "mse")
    test = ComponentTest(graph, spaces, pair)
    w = {k: v.astype(np.float64) for k, v in test.get_weights().items()}
    sample = window_sample(rng, cell)
    inputs, _ = sequence_batch(sample, burn_in, n_step, GAMMA)
    _, grads = test.gradients("loss", *inputs)
    obs = np.swapaxes(sample["obs"], 0, 1).astype(np.float64)
    reset = np.swapaxes(sample["starts"], 0, 1)
    state = {k: v.astype(np.float64) for k, v in sample["state"].items()}
    warm = unroll(w, "policy", cell, obs[:burn_in], state, reset[:burn_in])[1]

    def numeric(name, held):
        out = np.zeros_like(w[name])
        for i in np.ndindex(out.shape):
            values = []
            for sign in (1.0, -1.0):
                shifted = dict(w)
                shifted[name] = w[name].copy()
                shifted[name][i] += sign * 1e-5
                values.append(reference(shifted, cell, sample, burn_in, n_step, "mse", warm if held else None)[0])
            out[i] = (values[0] - values[1]) / 2e-5
        return out

    for name in ("policy/core/w_h", "policy/core/b", "policy/head/q/W"):
        np.testing.assert_allclose(grads[name], numeric(name, held=True), rtol=2e-3, atol=2e-5, err_msg=name)
    through = numeric("policy/core/w_h", held=False)
    assert np.abs(through - grads["policy/core/w_h"]).max() > 1e-3  # the burn-in would change it
