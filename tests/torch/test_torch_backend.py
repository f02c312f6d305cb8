"""The torch backend: gradients, optimizer steps and clipping against numpy; weights; static mode.

Compiling with torch.compile on CPU takes seconds per function, so the static-mode checks share
module-scoped fixtures (one compiled QNetwork forward, one compiled train step).
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rlgraph_core.components.dqn_loss import DQNLoss  # noqa: E402
from rlgraph_core.components.network import DenseLayer, NetworkSpec  # noqa: E402
from rlgraph_core.components.preprocessors import BoxNormalizer  # noqa: E402
from rlgraph_core.components.q_head import QNetwork  # noqa: E402
from rlgraph_core.config.common import OptimizerConfig  # noqa: E402
from rlgraph_core.graph import Component, api  # noqa: E402
from rlgraph_core.spaces import BoolBox, FloatBox, IntBox  # noqa: E402
from rlgraph_core.testing import INPUT_PREFIX, ComponentTest  # noqa: E402
from rlgraph_torch.backend import TorchBackend  # noqa: E402

RTOL, ATOL = 1e-5, 1e-6


def fbatch(*shape, low=-np.inf, high=np.inf) -> FloatBox:
    """A batched float box of value shape ``shape``."""
    return FloatBox(low, high, shape=shape).with_batch_rank()


def torch_backend(mode: str = "eager", compile_inference: bool = False) -> TorchBackend:
    """A CPU torch backend (CPU keeps float32 results comparable to numpy at 1e-5)."""
    return TorchBackend(mode=mode, device="cpu", seed=0, compile_inference=compile_inference)


def optimizer(kind: str, lr: float, max_grad_norm: float | None = None, **kw) -> dict:
    """The spec dict a validated optimizer config hands to ``Backend.train_step``."""
    return OptimizerConfig(type=kind, learning_rate=lr, max_grad_norm=max_grad_norm, **kw).backend_spec(lr)


# --------------------------------------------------------------------------- DQN loss gradients
DQN_SPACES = {
    "loss": {
        "q_values": fbatch(3),
        "actions": IntBox(0, 2, shape=()).with_batch_rank(),
        "rewards": fbatch(),
        "terminals": BoolBox().with_batch_rank(),
        "discounts": fbatch(),
        "q_next_target": fbatch(3),
        "q_next_online": fbatch(3),
        "weights": fbatch(),
    }
}


def dqn_batch(rng: np.random.Generator, batch: int = 6) -> dict[str, np.ndarray]:
    """A random batch with n-step discounts, terminals, importance weights and large TD errors."""
    return {
        "q_values": (rng.standard_normal((batch, 3)) * 2).astype(np.float32),
        "actions": rng.integers(0, 3, batch),
        "rewards": rng.standard_normal(batch).astype(np.float32),
        "terminals": np.array([False, True] * (batch // 2)),
        "discounts": (0.95 ** rng.integers(1, 4, batch)).astype(np.float32),
        "q_next_target": rng.standard_normal((batch, 3)).astype(np.float32),
        "q_next_online": rng.standard_normal((batch, 3)).astype(np.float32),
        "weights": rng.uniform(0.1, 1.0, batch).astype(np.float32),
    }


def np_dqn_grad_q(b, loss_type: str, delta: float = 1.0):
    """Loss and analytic d loss / d q_values of the double-Q DQN loss (float64)."""
    n = len(b["actions"])
    rows = np.arange(n)
    q = b["q_values"].astype(np.float64)[rows, b["actions"]]
    v_next = b["q_next_target"].astype(np.float64)[rows, np.argmax(b["q_next_online"], axis=1)]
    td = q - (b["rewards"] + b["discounts"] * (1.0 - b["terminals"]) * v_next)
    if loss_type == "huber":
        per = np.where(np.abs(td) <= delta, 0.5 * td**2, delta * (np.abs(td) - 0.5 * delta))
        dper = np.clip(td, -delta, delta)
    else:
        per, dper = td**2, 2.0 * td
    grad = np.zeros((n, 3))
    grad[rows, b["actions"]] = b["weights"] * dper / n
    return np.mean(b["weights"] * per), grad, td


@pytest.mark.parametrize("loss_type", ["huber", "mse"])
def test_dqn_loss_gradient_wrt_q_values(loss_type):
    test = ComponentTest(DQNLoss(loss_type, double_q=True), DQN_SPACES, torch_backend())
    b = dqn_batch(np.random.default_rng(0))
    ref_loss, ref_grad, td = np_dqn_grad_q(b, loss_type)
    assert (np.abs(td) > 1).any() and (np.abs(td) < 1).any()  # both huber branches are exercised
    loss, grads = test.gradients("loss", *b.values(), wrt_inputs=("q_values", "q_next_target", "q_next_online"))
    np.testing.assert_allclose(loss, ref_loss, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(grads[f"{INPUT_PREFIX}q_values"], ref_grad, rtol=RTOL, atol=ATOL)
    # the target is a stop-gradient and the argmax is not differentiable: no gradient flows there
    np.testing.assert_array_equal(grads[f"{INPUT_PREFIX}q_next_target"], 0.0)
    np.testing.assert_array_equal(grads[f"{INPUT_PREFIX}q_next_online"], 0.0)


# --------------------------------------------------------------------------- dense gradient
def test_dense_layer_gradient():
    test = ComponentTest(DenseLayer(3, "tanh", name="dense"), {"call": {"x": fbatch(4)}}, torch_backend())
    rng = np.random.default_rng(1)
    w, b = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    test.set_weights({"W": w, "b": b})
    x = rng.standard_normal((5, 4)).astype(np.float32)
    c = rng.standard_normal((5, 3)).astype(np.float32)
    loss, grads = test.gradients(
        "call", x, objective=lambda ops, y: ops.reduce_sum(y * ops.constant(c)), wrt_inputs=("x",)
    )
    y = np.tanh(x.astype(np.float64) @ w + b)
    dpre = c * (1.0 - y**2)
    np.testing.assert_allclose(loss, np.sum(c * y), rtol=RTOL, atol=1e-5)
    np.testing.assert_allclose(grads["W"], x.T @ dpre, rtol=RTOL, atol=1e-5)
    np.testing.assert_allclose(grads["b"], dpre.sum(0), rtol=RTOL, atol=1e-5)
    np.testing.assert_allclose(grads[f"{INPUT_PREFIX}x"], dpre @ w.T, rtol=RTOL, atol=1e-5)


def test_gradients_skip_non_trainable_variables():
    norm = BoxNormalizer([-1.0, 0.0], [1.0, 4.0], name="norm")
    test = ComponentTest(norm, {"call": {"x": fbatch(2, low=[-1.0, 0.0], high=[1.0, 4.0])}}, torch_backend())
    _, grads = test.gradients(
        "call", np.zeros((2, 2), np.float32), objective=lambda ops, y: ops.reduce_sum(y), wrt_inputs=("x",)
    )
    assert list(grads) == [f"{INPUT_PREFIX}x"]
    np.testing.assert_allclose(grads[f"{INPUT_PREFIX}x"], [[1.0, 0.5], [1.0, 0.5]], rtol=RTOL)


# --------------------------------------------------------------------------- training steps
class Regression(Component):
    """A dense layer fitted by mean squared error: the smallest trainable root."""

    def __init__(self):
        super().__init__("regression")
        self.dense = DenseLayer(2, name="dense")
        self.add_components(self.dense)

    @api
    def loss(self, x, y):
        """Mean squared error and the per-element error."""
        err = self.dense.call(x) - y
        return self.ops.reduce_mean(self.ops.square(err)), err


REGRESSION_SPACES = {"loss": {"x": fbatch(3), "y": fbatch(2)}}


def regression_problem(seed: int = 2):
    """Initial weights and one batch."""
    rng = np.random.default_rng(seed)
    weights = {
        "dense/W": rng.standard_normal((3, 2)).astype(np.float32),
        "dense/b": rng.standard_normal(2).astype(np.float32),
    }
    x = rng.standard_normal((4, 3)).astype(np.float32)
    y = rng.standard_normal((4, 2)).astype(np.float32)
    return weights, x, y


def np_regression_grads(weights, x, y):
    """Loss and analytic gradients of mean((x W + b - y)^2) (float64)."""
    w, b = weights["dense/W"].astype(np.float64), weights["dense/b"].astype(np.float64)
    err = x @ w + b - y
    derr = 2.0 * err / err.size
    return np.mean(err**2), {"dense/W": x.T @ derr, "dense/b": derr.sum(0)}


def regression_test(weights, mode: str = "eager") -> ComponentTest:
    """A Regression root built on torch with ``weights`` loaded."""
    test = ComponentTest(Regression(), REGRESSION_SPACES, torch_backend(mode))
    test.set_weights(weights)
    return test


def test_sgd_train_step_matches_numpy():
    weights, x, y = regression_problem()
    test = regression_test(weights)
    step = test.train_step("loss", optimizer("sgd", 0.1))
    expected = {k: v.astype(np.float64) for k, v in weights.items()}
    for _ in range(3):
        ref_loss, grads = np_regression_grads(expected, x, y)
        loss, err = step(x, y)
        np.testing.assert_allclose(loss, ref_loss, rtol=RTOL, atol=ATOL)  # loss before the update
        assert err.shape == (4, 2)
        expected = {k: expected[k] - 0.1 * grads[k] for k in expected}
        for k, v in test.get_weights().items():
            np.testing.assert_allclose(v, expected[k], rtol=RTOL, atol=ATOL, err_msg=k)
    assert step.step.learning_rate == pytest.approx(0.1)


@pytest.mark.parametrize("max_norm", [0.3, 100.0], ids=["clipped", "below-threshold"])
def test_gradient_norm_clipping_uses_global_norm(max_norm):
    weights, x, y = regression_problem(3)
    test = regression_test(weights)
    _, grads = np_regression_grads(weights, x, y)
    global_norm = np.sqrt(sum(np.sum(g**2) for g in grads.values()))
    assert global_norm > 0.3 * 1.5 and global_norm < 100.0
    # per-tensor clipping would scale each tensor differently; the global norm scales all by one factor
    assert not np.isclose(np.linalg.norm(grads["dense/W"]), np.linalg.norm(grads["dense/b"]))
    test.train_step("loss", optimizer("sgd", 0.1, max_grad_norm=max_norm))(x, y)
    scale = min(1.0, max_norm / global_norm)
    for k, v in test.get_weights().items():
        np.testing.assert_allclose(v, weights[k] - 0.1 * scale * grads[k], rtol=RTOL, atol=ATOL, err_msg=k)


def test_adam_matches_numpy_formula():
    weights, x, y = regression_problem(4)
    test = regression_test(weights)
    lr, (b1, b2), eps = 0.01, (0.9, 0.999), 1e-8
    step = test.train_step("loss", optimizer("adam", lr, betas=(b1, b2), eps=eps))
    params = {k: v.astype(np.float64) for k, v in weights.items()}
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v2 = {k: np.zeros_like(v) for k, v in params.items()}
    for t in (1, 2):
        _, grads = np_regression_grads(params, x, y)
        for k in params:
            m[k] = b1 * m[k] + (1 - b1) * grads[k]
            v2[k] = b2 * v2[k] + (1 - b2) * grads[k] ** 2
            m_hat, v_hat = m[k] / (1 - b1**t), v2[k] / (1 - b2**t)
            params[k] = params[k] - lr * m_hat / (np.sqrt(v_hat) + eps)
        step(x, y)
        if t == 1:  # the first Adam step moves every weight by lr * sign(grad)
            for k in params:
                np.testing.assert_allclose(params[k], weights[k] - lr * np.sign(grads[k]), rtol=1e-4)
        for k, v in test.get_weights().items():
            np.testing.assert_allclose(v, params[k], rtol=RTOL, atol=ATOL, err_msg=f"{k} after step {t}")
    state = step.step.get_state()
    assert {"0/exp_avg", "0/exp_avg_sq", "1/exp_avg", "1/exp_avg_sq"} <= set(state)


def test_eager_optimizer_is_made_on_first_use_with_the_rate_set_before_it():
    """torch.optim's constructor imports torch._dynamo (~1 s): eager steps make it when first needed.
    Until then the step reports the spec's rate and an empty state, and a rate set then is used."""
    weights, x, y = regression_problem()
    test = regression_test(weights)
    step = test.train_step("loss", optimizer("sgd", 0.5))
    assert step.step._optimizer is None and step.step.get_state() == {}
    assert step.step.learning_rate == pytest.approx(0.5)
    step.step.learning_rate = 0.1  # a schedule's first value, before any update
    _, grads = np_regression_grads(weights, x, y)
    step(x, y)
    for k, v in test.get_weights().items():
        np.testing.assert_allclose(v, weights[k] - 0.1 * grads[k], rtol=RTOL, atol=ATOL, err_msg=k)
    assert step.step.learning_rate == pytest.approx(0.1)


def test_a_process_that_only_acts_never_imports_torch_dynamo():
    code = (
        "import sys, numpy as np; from rlgraph_core.api import make; "
        "algo = make('dqn', env='CartPole-v1', backend='torch', mode='eager'); "
        "algo.predict(np.zeros(4, np.float32)); "
        "print(sorted(m for m in sys.modules if m.startswith('torch._dynamo')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


# --------------------------------------------------------------------------- weights
def test_weights_numpy_round_trip_and_cross_backend():
    spec = NetworkSpec(hidden=[5], activation="elu")
    space = {"call": {"obs": fbatch(3)}}
    source = ComponentTest(QNetwork(spec, 2, dueling=True, seed=0), space, torch_backend())
    weights = source.get_weights()
    assert all(isinstance(v, np.ndarray) and v.dtype == np.float32 for v in weights.values())
    assert weights["trunk/dense_0/W"].shape == (3, 5)  # dense weights are [in, out] everywhere

    # get_weights returns copies: mutating them leaves the variables alone
    weights["trunk/dense_0/W"] += 1.0
    assert not np.array_equal(source.get_weights()["trunk/dense_0/W"], weights["trunk/dense_0/W"])

    other = ComponentTest(QNetwork(spec, 2, dueling=True, seed=99), space, torch_backend())
    other.set_weights(weights)
    for k, v in other.get_weights().items():
        np.testing.assert_array_equal(v, weights[k], err_msg=k)

    # the same weights on the numpy harness give the same outputs
    on_numpy = ComponentTest(QNetwork(spec, 2, dueling=True, seed=7), space, ("numpy", "eager"))
    on_numpy.set_weights(weights)
    obs = np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(other.call("call", obs), on_numpy.call("call", obs), rtol=RTOL, atol=ATOL)


def test_variables_start_from_numpy_values_and_train_only_trainables():
    backend = torch_backend()
    v = backend.variable("a/W", np.ones((2, 2)))
    assert v.dtype == torch.float32 and v.requires_grad
    frozen = backend.variable("a/scale", np.ones(2, np.float32), trainable=False)
    assert not frozen.requires_grad
    backend.assign_numpy(v, np.full((2, 2), 3.0, np.float32))
    np.testing.assert_array_equal(backend.to_numpy(v), 3.0)


# --------------------------------------------------------------------------- static mode
def _compiled_graphs() -> int:
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


@pytest.fixture(scope="module")
def static_and_eager_qnetwork():
    """The same QNetwork (with preprocessor) built eager and static; the static one compiled once."""
    spec = NetworkSpec(hidden=[8, 8], activation="relu")
    low, high = np.array([-1.0, -2.0, 0.0], np.float32), np.array([1.0, 2.0, 5.0], np.float32)
    space = {"call": {"obs": FloatBox(low, high).with_batch_rank()}}

    def make(mode):
        net = QNetwork(spec, 3, dueling=True, preprocessor=BoxNormalizer(low, high, name="pre"), seed=11)
        return ComponentTest(net, space, torch_backend(mode, compile_inference=mode == "static"))

    eager, static = make("eager"), make("static")
    graphs_before = _compiled_graphs()
    obs = np.random.default_rng(0).uniform(low, high, size=(16, 3)).astype(np.float32)
    first = static.call("call", obs)
    return eager, static, obs, first, _compiled_graphs() - graphs_before


@pytest.mark.slow
def test_static_mode_compiles_and_matches_eager(static_and_eager_qnetwork):
    eager, static, obs, first, new_graphs = static_and_eager_qnetwork
    assert new_graphs >= 1, "static mode did not compile anything"
    graphs_before = _compiled_graphs()
    np.testing.assert_allclose(first, eager.call("call", obs), rtol=RTOL, atol=1e-5)
    assert _compiled_graphs() == graphs_before, "eager mode compiled a graph"
    low, high = static.input_spaces["call"]["obs"].low, static.input_spaces["call"]["obs"].high
    rng = np.random.default_rng(1)
    for _ in range(3):  # same batch size: no recompilation, still equal
        batch = rng.uniform(low, high, size=(16, 3)).astype(np.float32)
        np.testing.assert_allclose(static.call("call", batch), eager.call("call", batch), rtol=RTOL, atol=1e-5)


@pytest.mark.slow
def test_static_mode_sees_weight_updates(static_and_eager_qnetwork):
    """Compiled functions read the variables live: set_weights after compilation takes effect."""
    eager, static, obs, _, _ = static_and_eager_qnetwork
    new = {k: v * 0.5 for k, v in eager.get_weights().items()}
    eager.set_weights(new)
    static.set_weights(new)
    np.testing.assert_allclose(static.call("call", obs), eager.call("call", obs), rtol=RTOL, atol=1e-5)


@pytest.mark.slow
def test_static_train_step_is_compiled_and_matches_numpy_sgd():
    """In static mode the whole step (forward, loss, backward, clipping, update) is compiled."""
    weights, x, y = regression_problem(5)
    test = regression_test(weights, mode="static")
    step = test.train_step("loss", optimizer("sgd", 0.1, max_grad_norm=0.2))
    expected = {k: v.astype(np.float64) for k, v in weights.items()}
    for _ in range(2):
        ref_loss, grads = np_regression_grads(expected, x, y)
        scale = min(1.0, 0.2 / np.sqrt(sum(np.sum(g**2) for g in grads.values())))
        loss, _ = step(x, y)
        np.testing.assert_allclose(loss, ref_loss, rtol=RTOL, atol=ATOL)
        expected = {k: expected[k] - 0.1 * scale * grads[k] for k in expected}
        for k, v in test.get_weights().items():
            np.testing.assert_allclose(v, expected[k], rtol=RTOL, atol=ATOL, err_msg=k)
    assert step.step.compiled, "the static train step fell back to eager"


@pytest.mark.slow
def test_static_hooked_step_compiles_the_loss_once_across_learning_rates():
    """With a gradient hook the loss forward is compiled (once); backward and update run eager."""
    weights, x, y = regression_problem(6)
    test = regression_test(weights, mode="static")
    step = test.train_step("loss", optimizer("adam", 0.01))
    seen = []
    step.step.gradient_hook = lambda flat: seen.append(flat.shape) or flat
    graphs_before = _compiled_graphs()
    for i in range(6):
        if i % 2 == 0:
            step.step.learning_rate = 0.01 / (1 + i)
        step(x, y)
    assert seen == [(8,)] * 6
    assert _compiled_graphs() - graphs_before == 1
    assert step.step.compiled and step.step._compiled_loss is not step.step.loss_fn


def test_each_compiled_function_gets_its_own_code_object():
    """Dynamo caches per code object (8 entries); compiled functions must not share one."""
    from rlgraph_torch.compile import fresh_code

    a, b = fresh_code(lambda x: x + 1), fresh_code(lambda x: x * 2)
    assert a.__code__ is not b.__code__
    assert (a(1), b(3)) == (2, 6)


@pytest.mark.parametrize("mode", ["eager", "static"])
def test_inference_functions_run_eagerly_without_gradients_and_restore_the_grad_mode(mode):
    """Acting runs eagerly in both modes by default (faster than compiled for small networks)."""
    backend = torch_backend(mode)
    w = backend.variable("w", np.full((2, 2), 0.5, np.float32))
    seen = []

    def fn(x):
        seen.append(torch.is_grad_enabled())
        if x.shape[0] == 0:
            raise ValueError("empty batch")
        return x @ w

    wrapped = backend.function(fn)
    graphs_before = _compiled_graphs()
    out = wrapped(backend.to_tensor(np.ones((3, 2), np.float32)))
    assert _compiled_graphs() == graphs_before  # nothing was compiled
    assert not out.requires_grad and seen == [False] and torch.is_grad_enabled()
    np.testing.assert_allclose(backend.to_numpy(out), np.ones((3, 2)) @ np.full((2, 2), 0.5))
    with pytest.raises(ValueError, match="empty batch"):
        wrapped(backend.to_tensor(np.ones((0, 2), np.float32)))
    assert torch.is_grad_enabled()  # restored after the error too
    with torch.no_grad():
        wrapped(backend.to_tensor(np.ones((1, 2), np.float32)))
        assert not torch.is_grad_enabled()  # an outer no_grad stays in force


# --------------------------------------------------------------------------- errors in static mode
def _shape_bug_step(mode: str = "static"):
    """A train step whose loss multiplies a [B, 3] by a [B, 4] tensor: a user's shape bug."""
    backend = torch_backend(mode, compile_inference=True)
    w = backend.variable("w", np.ones((3, 3), np.float32))

    def loss_fn(x, y):
        return (backend.ops.reduce_mean(backend.ops.dense(x, w, backend.ops.constant(np.zeros(3))) * y),)

    x, y = (backend.to_tensor(np.ones((5, n), np.float32)) for n in (3, 4))
    return backend, backend.train_step(loss_fn, [w], optimizer("sgd", 0.1)), loss_fn, x, y


def test_shape_bug_in_a_static_loss_raises_the_torch_error_without_a_compile_warning():
    from torch._dynamo.exc import TorchDynamoException

    backend, step, loss_fn, x, y = _shape_bug_step()
    shape_error = r"size of tensor a \(3\) must match the size of tensor b \(4\)"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for run in (
            lambda: step(x, y),  # the fused compiled step
            lambda: step.compute_gradients(x, y),  # the compiled loss of the split step
            lambda: backend.function(loss_fn)(x, y),
        ):  # a compiled inference function
            with pytest.raises(RuntimeError, match=shape_error) as info:
                run()
            assert not isinstance(info.value, TorchDynamoException)  # the eager error itself
            assert info.value.__context__ is None and info.value.__cause__ is None
    assert not [c for c in caught if issubclass(c.category, RuntimeWarning)], [str(c.message) for c in caught]
    assert step.compiled  # the compiler was not to blame: later (fixed) calls still compile


def test_compile_failure_falls_back_to_eager_with_a_warning_and_updates_once():
    from rlgraph_torch.compile import with_eager_fallback

    backend, step, _, x, _ = _shape_bug_step()
    w = step.params[0]
    step.loss_fn = lambda x: (backend.ops.reduce_sum(backend.ops.dense(x, w, backend.ops.constant(np.zeros(3)))),)

    def broken(*args):
        raise RuntimeError("the compiler broke")

    step._step = broken
    with pytest.warns(RuntimeWarning, match="torch.compile of the train step failed .*the compiler broke"):
        step(x)
    assert not step.compiled
    np.testing.assert_allclose(backend.to_numpy(w), 1.0 - 0.1 * 5.0)  # one update, not two
    fn = with_eager_fallback(broken, lambda a: a + 1)
    with pytest.warns(RuntimeWarning, match="inference function failed"):
        assert fn(1) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fn(2) == 3  # eager from now on, no second warning


# --------------------------------------------------------------------------- denormals
def _denormal_survives() -> bool:
    """Whether a float32 denormal (1e-39) survives a multiplication in this thread."""
    return float(torch.tensor(1e-39, dtype=torch.float32) * 1.0001) != 0.0


def test_backend_flushes_denormals_by_default_and_the_setting_turns_it_off():
    """The backend flushes denormals in its thread (as TF and JAX do); ``flush_denormal: false``
    leaves the thread as it was. The thread's state is restored afterwards."""
    from rlgraph_torch.settings import TorchSettings

    before = not _denormal_survives()
    try:
        torch.set_flush_denormal(False)
        backend = TorchBackend(mode="eager", device="cpu", settings=TorchSettings(flush_denormal=False))
        assert backend.flush_denormal is False and _denormal_survives()
        backend = TorchBackend(mode="eager", device="cpu", settings=TorchSettings())
        if backend.flush_denormal:  # False only on a CPU without the flush-to-zero bits
            assert not _denormal_survives()
    finally:
        torch.set_flush_denormal(before)
