"""The recurrent core (``lstm``, ``gru``) against plain numpy, on every backend and mode.

An MLP encoder in front, a sequence with episode starts in the middle, the state carried from
one call into the next: the outputs and states equal the numpy reference of the same weights,
and two calls of 2 steps equal one call of 4 (the state is all the memory there is).
"""

from __future__ import annotations

import numpy as np
import pytest

from rlgraph_core.components.recurrent import RecurrentCore, RecurrentSettings
from rlgraph_core.errors import BuildError
from rlgraph_core.spaces import BoolBox, Dict, FloatBox
from rlgraph_core.testing import ComponentTest, backend_params
from rlgraph_core.testing.recurrent_reference import reference_gru, reference_lstm

rng = np.random.default_rng(5)
X = rng.standard_normal((4, 3, 5)).astype(np.float32)  # T=4, B=3, F=5
RESET = np.zeros((4, 3), bool)
RESET[0, :] = True
RESET[2, 1] = True


def spaces(core: RecurrentCore) -> dict:
    seq = dict(flag=True, time_major=True)
    return {
        "call": {
            "x": FloatBox(shape=(5,)).with_batch_rank().with_time_rank(**seq),
            "state": core.state_space,
            "reset": BoolBox().with_batch_rank().with_time_rank(**seq),
        }
    }


@pytest.fixture(params=backend_params())
def pair(request):
    """Every available ``(backend, mode)``."""
    return request.param


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_recurrent_core_matches_numpy(pair, cell):
    core = RecurrentCore(RecurrentSettings(type=cell, units=6, encoder={"hidden": [7], "activation": "tanh"}))
    test = ComponentTest(core, spaces(core), pair)
    w = test.get_weights()
    order = ["h", "c"] if cell == "lstm" else ["h"]  # the op's argument order
    state = {k: rng.standard_normal((3, 6)).astype(np.float32) for k in order}

    feats = np.tanh(X @ w["encoder/dense_0/W"] + w["encoder/dense_0/b"])
    names = ["w_x", "w_h", "b"] if cell == "lstm" else ["w_x", "w_h", "b_x", "b_h"]
    ref = reference_lstm if cell == "lstm" else reference_gru
    y_ref, *state_ref = ref(feats, *(state[k] for k in order), *(w[n] for n in names), RESET)

    y, out_state = test.call("call", X, state, RESET)
    assert y.shape == (4, 3, 6) and set(out_state) == set(state)
    np.testing.assert_allclose(y, y_ref, rtol=1e-4, atol=1e-5)
    for key, value in zip(order, state_ref):
        np.testing.assert_allclose(out_state[key], value, rtol=1e-4, atol=1e-5)

    # carried state: two calls of 2 steps == one call of 4
    y1, mid = test.call("call", X[:2], state, RESET[:2])
    y2, end = test.call("call", X[2:], mid, RESET[2:])
    np.testing.assert_allclose(np.concatenate([y1, y2]), y, rtol=1e-5, atol=1e-6)
    for key in state:
        np.testing.assert_allclose(end[key], out_state[key], rtol=1e-5, atol=1e-6)


def test_state_space_and_bad_input():
    lstm = RecurrentCore(RecurrentSettings(type="lstm", units=4))
    assert set(lstm.state_space.keys()) == {"h", "c"} and lstm.initial_state(2)["c"].shape == (2, 4)
    assert set(RecurrentCore(RecurrentSettings(type="gru", units=4)).state_space.keys()) == {"h"}
    bad = spaces(lstm)
    bad["call"]["x"] = FloatBox(shape=(5,)).with_batch_rank()
    with pytest.raises(BuildError, match=r"float features \[T, B, F\]"):
        ComponentTest(lstm, bad, "numpy")
    wrong_state = spaces(lstm)
    wrong_state["call"]["state"] = Dict(h=FloatBox(shape=(4,))).with_batch_rank()
    with pytest.raises(BuildError, match="takes a state"):
        ComponentTest(RecurrentCore(RecurrentSettings(type="lstm", units=4)), wrong_state, "numpy")


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_torch_linear_starts_the_cell_as_torch_does(cell):
    """``initializer: torch_linear`` is nn.LSTM / nn.GRU's start: weights and biases U(+-1/sqrt(units))
    whatever the input width (nn.Linear's bound 1/sqrt(fan_in) would be 0.71 for 2 inputs), and no
    forget-gate bias of 1 (the default initializer's LSTM has one)."""
    units, gates = 16, 4 if cell == "lstm" else 3
    settings = RecurrentSettings(type=cell, units=units, encoder={"hidden": []}, initializer="torch_linear")
    x = FloatBox(shape=(2,)).with_batch_rank().with_time_rank(flag=True, time_major=True)
    core = RecurrentCore(settings, np.random.default_rng(0))
    w = ComponentTest(core, {"call": {**spaces(core)["call"], "x": x}}, "numpy").get_weights()
    bound = 1.0 / np.sqrt(units)
    assert w["w_x"].shape == (2, gates * units) and w["w_h"].shape == (units, gates * units)
    for name in ("w_x", "w_h"):
        assert np.abs(w[name]).max() <= bound and np.abs(w[name]).max() > 0.8 * bound, name
    biases = [w["b"]] if cell == "lstm" else [w["b_x"], w["b_h"]]
    limit = 2 * bound if cell == "lstm" else bound  # the LSTM's one b is torch's b_ih + b_hh
    for b in biases:
        assert np.abs(b).max() <= limit and np.abs(b).std() > 0.1 * bound
    if cell == "lstm":  # the forget gate starts open only with the default initializer
        default = RecurrentCore(RecurrentSettings(type="lstm", units=units, encoder={"hidden": []}))
        b = ComponentTest(default, {"call": {**spaces(default)["call"], "x": x}}, "numpy").get_weights()["b"]
        np.testing.assert_array_equal(b[units : 2 * units], 1.0)
        assert np.abs(w["b"][units : 2 * units]).max() <= limit
