"""torch's lstm / gru ops inside a compiled (static) train step: the step compiles (no fallback to
eager: compiling ``torch.lstm`` itself fails on CPU, so the ops step the fused cell there) and
its loss equals the numpy reference, with and without resets."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from rlgraph_core.testing.optimizer_reference import spec
from rlgraph_core.testing.harness import make_test_backend
from rlgraph_core.testing.recurrent_reference import reference_gru, reference_lstm

rng = np.random.default_rng(0)
X = rng.standard_normal((5, 4, 3)).astype(np.float32)
H = (rng.standard_normal((4, 2)) * 0.5).astype(np.float32)
RESET = np.zeros((5, 4), bool)
RESET[2, 1] = True


# Each case compiles (~20 s on 2 shared cores): the whole-sequence path of both ops, which is the
# one that needs the guard (the reset path compiles as it is).
@pytest.mark.parametrize("cell,with_reset", [("lstm", False), ("gru", False)], ids=["lstm", "gru"])
def test_recurrent_ops_compile_in_a_static_train_step(cell, with_reset):
    be = make_test_backend("torch", "static", device="cpu", seed=0)
    shapes = ((3, 8), (2, 8), (8,)) if cell == "lstm" else ((3, 6), (2, 6), (6,), (6,))
    weights = [(rng.standard_normal(s) * 0.5).astype(np.float32) for s in shapes]
    variables = [be.variable(f"w{i}", w) for i, w in enumerate(weights)]
    state = [H, H[::-1].copy()] if cell == "lstm" else [H]
    ref = reference_lstm if cell == "lstm" else reference_gru

    def loss(x, *reset):
        y = getattr(be.ops, cell)(x, *(be.to_tensor(s) for s in state), *variables, reset=reset[0] if reset else None)[
            0
        ]
        return (be.ops.reduce_mean(be.ops.square(y)),)

    step = be.train_step(loss, variables, spec("sgd", learning_rate=0.0))
    args = [be.to_tensor(X)] + ([be.to_tensor(RESET)] if with_reset else [])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "torch.compile of the train step failed"
        value = float(be.to_numpy(step(*args)[0]))
    expected = np.mean(ref(X, *state, *weights, RESET if with_reset else None)[0] ** 2)
    np.testing.assert_allclose(value, expected, rtol=1e-5)
    assert step.trace_count == 1
