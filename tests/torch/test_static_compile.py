"""Static mode's compiled programs: learning-rate schedules never recompile, and the fused loop
(``TorchBackend.fused_loop``) makes the same updates as separate train-step calls.

The references are eager mode's ``torch.optim`` steps (a different implementation of the same
optimizer math) and separate ``ops.polyak`` calls with a float tau.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rlgraph_torch.backend import TorchBackend  # noqa: E402

ADAM = {"type": "adam", "learning_rate": 1e-2, "max_grad_norm": 0.5, "eps": 1e-5, "betas": (0.9, 0.999)}
rng = np.random.default_rng(3)
INIT = {
    "W0": rng.standard_normal((3, 8)).astype(np.float32) * 0.5,
    "b0": rng.standard_normal(8).astype(np.float32) * 0.1,
    "W1": rng.standard_normal((8, 2)).astype(np.float32) * 0.5,
    "b1": np.zeros(2, np.float32),
}


class Net:
    """A 3-8-2 tanh regression net with a target copy, built on ``backend`` from :data:`INIT`."""

    def __init__(self, backend: TorchBackend, spec: dict = ADAM):
        self.backend = backend
        self.vars = [backend.variable(k, v) for k, v in INIT.items()]
        self.target = [backend.variable(f"target/{k}", v * 0.0, trainable=False) for k, v in INIT.items()]
        self.step = backend.train_step(self.loss, self.vars, dict(spec))

    def loss(self, x, y):
        """(mean squared error, per-row error)."""
        ops = self.backend.ops
        w0, b0, w1, b1 = self.vars
        out = ops.dense(ops.activation("tanh", ops.dense(x, w0, b0)), w1, b1)
        err = ops.reduce_sum(ops.square(out - y), axis=-1)
        return ops.reduce_mean(err), err

    def weights(self) -> list[np.ndarray]:
        """Online then target weights, copied."""
        return [self.backend.to_numpy(v).copy() for v in self.vars + self.target]


def batch(n: int, seed: int):
    """(x [n, 3], y [n, 2]) as torch tensors."""
    r = np.random.default_rng(seed)
    x = r.standard_normal((n, 3)).astype(np.float32)
    return torch.from_numpy(x), torch.from_numpy(np.tanh(x[:, :2] * 2.0).astype(np.float32))


def schedule(i: int) -> float:
    """A learning rate that changes before every update."""
    return 1e-2 * (1.0 - i / 200.0)


def assert_state_close(a: dict, b: dict) -> None:
    """Optimizer states with the same keys and values (float32 tolerance)."""
    assert set(a) == set(b)
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.slow
def test_learning_rate_schedule_never_recompiles_and_matches_eager():
    static, eager = Net(TorchBackend("static", "cpu")), Net(TorchBackend("eager", "cpu"))
    assert eager.step.trace_count is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no fallback to eager
        for i in range(100):
            x, y = batch(16, i % 4)
            for net in (static, eager):
                net.step.learning_rate = schedule(i)
                loss, err = net.step(x, y)
        assert static.step.trace_count == 1
        assert static.step.learning_rate == pytest.approx(schedule(99))
        for a, b in zip(static.weights(), eager.weights()):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
        assert_state_close(static.step.get_state(), eager.step.get_state())
        for i in range(5):  # a second input shape: one more program, and no more after it
            static.step.learning_rate = schedule(i)
            static.step(*batch(32, i))
            static.step(*batch(16, i))
        assert static.step.trace_count == 2
    assert static.step.compiled


def fused_body(net: Net):
    """A loop body: one step on rows ``rows`` of (x, y), then a target sync with tau ``due``."""
    ops = net.backend.ops

    def body(rows, due, x, y):
        out = net.step.inline(ops.take(x, rows), ops.take(y, rows))
        ops.polyak(net.target, net.vars, due)
        return out

    return body


@pytest.mark.slow
def test_fused_loop_matches_separate_steps_and_syncs():
    k, n = 6, 24
    x, y = batch(n, 7)
    r = np.random.default_rng(8)
    rows = torch.from_numpy(np.stack([r.permutation(n)[:16] for _ in range(k)]).astype(np.int64))
    due = torch.tensor([0.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    fused, reference = Net(TorchBackend("static", "cpu")), Net(TorchBackend("eager", "cpu"))
    assert fused.backend.fuses_loops and not reference.backend.fuses_loops
    loop = fused.backend.fused_loop(fused_body(fused))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for round_ in range(3):
            lr = schedule(round_ * 10)
            fused.step.learning_rate = lr
            losses, errs = loop([rows, due], [x, y])
            reference.step.learning_rate = lr
            expected = []
            for j in range(k):
                expected.append(reference.step(x[rows[j]], y[rows[j]]))
                if float(due[j]) == 1.0:
                    reference.backend.ops.polyak(reference.target, reference.vars, 1.0)
            assert losses.shape == (k,) and errs.shape == (k, 16) and not losses.requires_grad
            np.testing.assert_allclose(losses.numpy(), [float(e[0]) for e in expected], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(errs.numpy(), np.stack([e[1].numpy() for e in expected]), rtol=1e-4, atol=1e-5)
            for a, b in zip(fused.weights(), reference.weights()):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
            assert_state_close(fused.step.get_state(), reference.step.get_state())
        # a shorter round reuses the program: the body sees one step's shapes whatever K is
        loop([rows[:2], due[:2]], [x, y])
        assert loop.trace_count == 1
    assert fused.step.trace_count == 0  # the loop compiled the inline step, not the step itself


@pytest.mark.slow
def test_tensor_tau_zero_leaves_the_target_exactly_and_one_copies_exactly():
    net = Net(TorchBackend("static", "cpu"))
    ops = net.backend.ops
    before = net.weights()[4:]
    loop = net.backend.fused_loop(lambda tau: (ops.polyak(net.target, net.vars, tau) or tau,))
    loop([torch.zeros(2)])
    for a, b in zip(net.weights()[4:], before):
        np.testing.assert_array_equal(a, b)
    loop([torch.tensor([0.0, 1.0])])
    for a, b in zip(net.weights()[4:], net.weights()[:4]):
        np.testing.assert_array_equal(a, b)
    assert loop.trace_count == 1


def test_optimizer_state_moves_between_eager_and_static_and_sgd_rmsprop_match():
    """Functional static-mode optimizers (run uncompiled through ``inline``) against torch.optim."""
    for spec in (
        {"type": "sgd", "learning_rate": 0.05, "momentum": 0.9, "max_grad_norm": None},
        {"type": "rmsprop", "learning_rate": 0.01, "alpha": 0.99, "eps": 1e-5, "momentum": 0.5, "max_grad_norm": 1.0},
        ADAM,
    ):
        static, eager = Net(TorchBackend("static", "cpu"), spec), Net(TorchBackend("eager", "cpu"), spec)
        for i in range(3):
            x, y = batch(16, i)
            for net in (static, eager):
                net.step.learning_rate = schedule(i * 30)
            static.step.inline(x, y)
            eager.step(x, y)
        for a, b in zip(static.weights(), eager.weights()):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=spec["type"])
        assert_state_close(static.step.get_state(), eager.step.get_state())
        # eager's state into a fresh static step (and back) continues identically
        other = Net(TorchBackend("static", "cpu"), spec)
        other.step.set_state(eager.step.get_state())
        other.step.learning_rate = eager.step.learning_rate
        assert_state_close(other.step.get_state(), eager.step.get_state())
        for net in (other, eager):
            for v, w in zip(net.vars, static.vars):
                net.backend.assign_numpy(v, static.backend.to_numpy(w))
        other.step.inline(*batch(16, 9))
        eager.step(*batch(16, 9))
        for a, b in zip(other.weights()[:4], eager.weights()[:4]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=spec["type"])


@pytest.mark.slow
def test_split_step_uses_the_same_optimizer_as_the_fused_step():
    """compute_gradients + apply_gradients in static mode (the gradient-hook path) equals eager."""
    static, eager = Net(TorchBackend("static", "cpu")), Net(TorchBackend("eager", "cpu"))
    for i in range(3):
        x, y = batch(16, i)
        for net in (static, eager):
            net.step.learning_rate = schedule(i * 50)
            net.step.gradient_hook = lambda flat: flat * 0.5
            net.step(x, y)
    for a, b in zip(static.weights(), eager.weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert static.step.trace_count == 1  # the compiled loss forward, once
