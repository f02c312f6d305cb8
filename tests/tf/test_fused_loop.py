"""The tf backend's fused update loop (static mode: one program per signature) and TrainStep.inline.

A fused loop over K steps must do exactly what K separate calls do: the same weights, optimizer
state and target network (polyak with a per-step tensor tau) as K calls of the train step and
``ops.polyak``. Static mode traces the loop once per input signature and the step once per
input shape, however often the learning rate changes.
"""

import warnings

import numpy as np
import pytest

from rlgraph_tf import TFBackend

tf = pytest.importorskip("tensorflow")

OPTIMIZER = {"type": "adam", "learning_rate": 3e-2, "max_grad_norm": 0.5, "eps": 1e-8, "betas": (0.9, 0.999)}
N, OBS, HIDDEN, BATCH = 48, 3, 8, 16


class Model:
    """A 1-hidden-layer regressor with a target copy; the loss bootstraps from the target."""

    def __init__(self, backend: TFBackend, seed: int = 0):
        rng = np.random.default_rng(seed)
        ops = backend.ops
        self.backend = backend
        init = {
            "w0": rng.standard_normal((OBS, HIDDEN)).astype(np.float32),
            "b0": np.zeros(HIDDEN, np.float32),
            "w1": rng.standard_normal((HIDDEN, 1)).astype(np.float32) * 0.3,
            "b1": np.zeros(1, np.float32),
        }
        self.params = [backend.variable(f"q/{k}", v) for k, v in init.items()]
        self.target = [backend.variable(f"t/{k}", v, trainable=False) for k, v in init.items()]

        def q(weights, x):
            h = ops.activation("tanh", ops.dense(x, weights[0], weights[1]))
            return ops.squeeze(ops.dense(h, weights[2], weights[3]), -1)

        def loss(x, y):
            pred = q(self.params, x)
            err = pred - (y + 0.5 * ops.stop_gradient(q(self.target, x)))
            return ops.reduce_mean(ops.huber(err)), err

        self.step = backend.train_step(loss, self.params, dict(OPTIMIZER))

    def state(self) -> dict[str, np.ndarray]:
        """Weights, target weights and optimizer state as numpy."""
        out = {f"p{i}": self.backend.to_numpy(v) for i, v in enumerate(self.params)}
        out.update({f"t{i}": self.backend.to_numpy(v) for i, v in enumerate(self.target)})
        out.update(self.step.get_state())
        return out


def data(seed: int = 1, steps: int = 6):
    """A small dataset, per-step minibatch index rows and a target-sync schedule (0/1 per step)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, OBS)).astype(np.float32)
    y = (x.sum(-1) + 0.1 * rng.standard_normal(N)).astype(np.float32)
    idx = np.stack([rng.choice(N, BATCH, replace=False) for _ in range(steps)]).astype(np.int64)
    due = np.zeros(steps, np.float32)
    due[[1, 4]] = 1.0
    return x, y, idx, due


def make_loop(model: Model):
    """The loop body an agent writes: take the minibatch rows, one inline step, maybe sync."""
    ops = model.backend.ops

    def body(idx, due, x, y):
        loss, err = model.step.inline(ops.take(x, idx), ops.take(y, idx))
        ops.polyak(model.target, model.params, due)
        return loss, err

    return model.backend.fused_loop(body)


LOOP_VARIANTS = [("eager", True), ("static", True), ("static", False)]


@pytest.mark.parametrize("mode,jit", LOOP_VARIANTS, ids=["eager", "static-xla", "static-plain"])
def test_fused_loop_equals_separate_steps(mode, jit):
    """K fused steps == K train_step calls + ops.polyak on the due steps (weights, moments, target)."""
    x, y, idx, due = data()
    fused = Model(TFBackend(mode=mode, device="cpu", jit_compile=jit))
    single = Model(TFBackend(mode=mode, device="cpu", jit_compile=jit))
    be = fused.backend
    assert be.fuses_loops == (mode == "static")
    loop = make_loop(fused)
    for round_ in range(2):  # the second round starts from the first one's variables and moments
        lr = OPTIMIZER["learning_rate"] / (1 + round_)
        fused.step.learning_rate = single.step.learning_rate = lr
        losses, errs = loop([be.to_tensor(idx), be.to_tensor(due)], [be.to_tensor(x), be.to_tensor(y)])
        assert tuple(losses.shape) == (len(idx),) and tuple(errs.shape) == (len(idx), BATCH)
        want_losses, want_errs = [], []
        for k in range(len(idx)):
            loss, err = single.step(be.to_tensor(x[idx[k]]), be.to_tensor(y[idx[k]]))
            if due[k]:
                single.backend.ops.polyak(single.target, single.params, 1.0)
            want_losses.append(be.to_numpy(loss))
            want_errs.append(be.to_numpy(err))
        np.testing.assert_allclose(be.to_numpy(losses), want_losses, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(be.to_numpy(errs), np.stack(want_errs), rtol=1e-5, atol=1e-5)
        got, want = fused.state(), single.state()
        assert got.keys() == want.keys()
        for key in want:
            np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-5, err_msg=key)
    # the target really moved on the due steps only: it is not the initial copy, nor the policy
    assert not np.allclose(got["t0"], Model(be).state()["t0"])
    assert not np.allclose(got["t0"], got["p0"])
    if mode == "static":
        assert loop.trace_count == 1 and fused.step.trace_count == 0
        assert loop.jit_compiled == jit  # XLA compiled this body (no fallback)
        assert single.step.trace_count == 1
    else:
        assert loop.trace_count is None and fused.step.trace_count is None


@pytest.mark.parametrize("jit", [True, False], ids=["xla", "plain"])
def test_each_step_sees_the_previous_steps_updates(jit):
    """A body that increments a variable and returns it: the outputs are 1..K, in order."""
    be = TFBackend(mode="static", device="cpu", jit_compile=jit)
    counter = be.variable("counter", np.zeros(2, np.float32), trainable=False)

    def body(inc):
        be.ops.assign(counter, counter + inc)
        return (counter + 0.0,)

    loop = be.fused_loop(body)
    (out,) = loop([be.to_tensor(np.ones((5, 2), np.float32))])
    np.testing.assert_array_equal(be.to_numpy(out), np.repeat(np.arange(1, 6, dtype=np.float32)[:, None], 2, 1))
    np.testing.assert_array_equal(be.to_numpy(counter), [5.0, 5.0])


def test_traces_once_per_shape_across_learning_rates():
    """100 updates each, the learning rate changed before every one: one trace per input shape."""
    x, y, idx, due = data(steps=5)
    model = Model(TFBackend(mode="static", device="cpu"))
    be, step = model.backend, model.step
    assert step.trace_count == 0
    for i in range(100):
        step.learning_rate = 1e-2 / (1 + i)
        rows = idx[i % len(idx)]
        step(be.to_tensor(x[rows]), be.to_tensor(y[rows]))
    assert step.trace_count == 1
    for i in range(10):
        step.learning_rate = 1e-3 * (1 + i)
        step(be.to_tensor(x[: BATCH // 2]), be.to_tensor(y[: BATCH // 2]))
    assert step.trace_count == 2

    loop = make_loop(model)
    per_step = [be.to_tensor(idx), be.to_tensor(due)]
    constants = [be.to_tensor(x), be.to_tensor(y)]
    for i in range(20):  # 20 rounds of 5 steps
        step.learning_rate = 1e-2 / (1 + i)
        loop(per_step, constants)
    assert loop.trace_count == 1
    # the learning rate is read inside the program: 0 leaves the weights where they are
    step.learning_rate = 0.0
    before = model.state()
    loop(per_step, constants)
    after = model.state()
    for i in range(len(model.params)):
        np.testing.assert_array_equal(after[f"p{i}"], before[f"p{i}"])
    assert after["0/step"] == before["0/step"] + len(idx)
    step.learning_rate = 1e-2
    loop([be.to_tensor(idx[:3]), be.to_tensor(due[:3])], constants)  # K = 3: a new signature
    loop([be.to_tensor(idx[:3]), be.to_tensor(due[:3])], constants)
    assert loop.trace_count == 2
    assert step.trace_count == 2  # the loop's traces are the loop's, not the step's


def test_xla_failure_falls_back_to_a_plain_graph():
    """A body XLA cannot compile (a numpy_function) runs as a plain graph, with a RuntimeWarning."""
    be = TFBackend(mode="static", device="cpu", jit_compile=True)
    total = be.variable("total", np.zeros((), np.float32), trainable=False)

    def body(x):
        doubled = tf.numpy_function(lambda a: (2 * a).astype(np.float32), [x], tf.float32, stateful=False)
        be.ops.assign(total, total + tf.ensure_shape(doubled, []))
        return (total + 0.0,)

    loop = be.fused_loop(body)
    assert loop.jit_compiled
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (out,) = loop([be.to_tensor(np.arange(4, dtype=np.float32))])
    assert any(issubclass(w.category, RuntimeWarning) and "fused loop" in str(w.message) for w in caught)
    assert not loop.jit_compiled
    np.testing.assert_array_equal(be.to_numpy(out), [0.0, 2.0, 6.0, 12.0])
    (out,) = loop([be.to_tensor(np.ones(2, np.float32))])  # a new signature: plain from the start
    np.testing.assert_array_equal(be.to_numpy(out), [14.0, 16.0])


def test_loop_rejects_mismatched_leading_dimensions():
    be = TFBackend(mode="static", device="cpu")
    loop = be.fused_loop(lambda a, b: (a + b,))
    with pytest.raises(ValueError, match="leading dimension"):
        loop([be.to_tensor(np.ones(3, np.float32)), be.to_tensor(np.ones(4, np.float32))])
    with pytest.raises(ValueError, match="at least one"):
        loop([])
