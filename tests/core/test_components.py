"""Component tests: every component alone, from spaces, against a plain numpy reference.

Each backend-dependent test runs on every available ``(backend, mode)`` pair through the
``backend`` fixture: the numpy harness always, and every installed backend plugin (torch, tf ...)
in eager and static mode. The numpy references below are written out here, independently of
the components and of the numpy harness's ops.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from rlgraph_core.backend import OPS_CONTRACT
from rlgraph_core.components.dqn_loss import DQNLoss
from rlgraph_core.components.exploration import EpsilonGreedy
from rlgraph_core.components.initializers import INITIALIZERS, initialize, orthogonal
from rlgraph_core.components.network import ACTIVATIONS, MLP, DenseLayer, NetworkSpec
from rlgraph_core.components.preprocessors import BoxNormalizer
from rlgraph_core.components.q_head import QNetwork, QValueHead
from rlgraph_core.components.schedules import ConstantSchedule, ExponentialSchedule, LinearSchedule, as_schedule
from rlgraph_core.components.target_sync import TargetSync
from rlgraph_core.errors import BuildError, ConfigError
from rlgraph_core.graph import Component, api, build
from rlgraph_core.spaces import BoolBox, FloatBox, IntBox, SpaceError
from rlgraph_core.testing.recurrent_reference import reference_gru, reference_lstm
from rlgraph_core.testing import (
    SELECT_ENV,
    ComponentTest,
    NumpyBackend,
    available_backends,
    backend_pairs,
    backend_params,
    make_test_backend,
)

RTOL, ATOL = 1e-5, 1e-5


def fbatch(*shape, low=-np.inf, high=np.inf) -> FloatBox:
    """A batched float box of value shape ``shape``."""
    return FloatBox(low, high, shape=shape).with_batch_rank()


def ibatch(low: int, high: int) -> IntBox:
    """A batched scalar int box with inclusive bounds."""
    return IntBox(low, high, shape=()).with_batch_rank()


@pytest.fixture(params=backend_params())
def backend(request):
    """A ``(backend_name, mode)`` pair: numpy-eager, and each plugin backend eager and static."""
    return request.param


@pytest.fixture(params=[p for p in backend_params() if p.values[0][1] == "eager"])
def eager_backend(request):
    """A ``(backend_name, "eager")`` pair, for tests where the mode cannot matter (no calls)."""
    return request.param


# --------------------------------------------------------------------------- numpy references
def np_activation(name: str, x: np.ndarray) -> np.ndarray:
    """Reference activations (float64)."""
    x = x.astype(np.float64)
    return {
        "relu": lambda: np.maximum(x, 0.0),
        "tanh": lambda: np.tanh(x),
        "sigmoid": lambda: 1.0 / (1.0 + np.exp(-x)),
        "elu": lambda: np.where(x > 0, x, np.exp(np.minimum(x, 0.0)) - 1.0),
        "softplus": lambda: np.log1p(np.exp(x)),
        "leaky_relu": lambda: np.where(x >= 0, x, 0.2 * x),
        "linear": lambda: x,
    }[name]()


def np_dense(x, w, b, activation="linear"):
    """Reference dense layer."""
    return np_activation(activation, x.astype(np.float64) @ w + b)


def random_weights(test: ComponentTest, rng: np.random.Generator, scale: float = 0.5) -> dict[str, np.ndarray]:
    """Random values for every variable of ``test``'s component (trainable ones only)."""
    non_trainable = set(test.component.variables()) - set(test.component.variables(trainable_only=True))
    return {
        k: (rng.standard_normal(v.shape) * scale).astype(np.float32)
        for k, v in test.get_weights().items()
        if k not in non_trainable
    }


# --------------------------------------------------------------------------- dense and MLP
def test_dense_layer_forward_with_known_weights(backend):
    test = ComponentTest(DenseLayer(3, name="dense"), {"call": {"x": fbatch(4)}}, backend)
    w = np.arange(12, dtype=np.float32).reshape(4, 3) / 10.0 - 0.5
    b = np.array([0.1, -0.2, 0.3], np.float32)
    test.set_weights({"W": w, "b": b})
    x = np.array([[1.0, 2.0, -1.0, 0.5], [0.0, -3.0, 2.0, 1.0], [0.5, 0.5, 0.5, 0.5]], np.float32)
    y = test.call("call", x)
    assert y.dtype == np.float32 and y.shape == (3, 3)
    np.testing.assert_allclose(y, x.astype(np.float64) @ w + b, rtol=RTOL, atol=ATOL)
    assert sorted(test.get_weights()) == ["W", "b"]
    np.testing.assert_array_equal(test.get_weights()["W"], w)


class ActivationBank(Component):
    """One DenseLayer per activation, all applied to the same input (one build, tuple output)."""

    def __init__(self, units: int):
        super().__init__("bank")
        self.layers = [DenseLayer(units, act, name=f"dense_{act}") for act in ACTIVATIONS]
        self.add_components(*self.layers)

    @api
    def call(self, x):
        """Every layer's output, in ACTIVATIONS order."""
        return tuple(layer.call(x) for layer in self.layers)


def test_dense_layer_every_activation(backend):
    test = ComponentTest(ActivationBank(4), {"call": {"x": fbatch(3)}}, backend)
    rng = np.random.default_rng(0)
    weights = random_weights(test, rng, scale=1.5)
    test.set_weights(weights)
    x = rng.uniform(-2, 2, size=(6, 3)).astype(np.float32)
    outs = test.call("call", x)
    assert isinstance(outs, tuple) and len(outs) == len(ACTIVATIONS)
    for act, y in zip(ACTIVATIONS, outs):
        pre = np_dense(x, weights[f"dense_{act}/W"], weights[f"dense_{act}/b"])
        assert pre.min() < -1.0 and pre.max() > 1.0  # both sides of every nonlinearity are hit
        ref = np_activation(act, pre)
        np.testing.assert_allclose(y, ref, rtol=RTOL, atol=ATOL, err_msg=f"activation {act}")


def test_mlp_forward(backend):
    spec = NetworkSpec(hidden=[6, 4], activation="tanh")
    test = ComponentTest(MLP(spec, np.random.default_rng(1), name="trunk"), {"call": {"x": fbatch(5)}}, backend)
    assert sorted(test.get_weights()) == ["dense_0/W", "dense_0/b", "dense_1/W", "dense_1/b"]
    rng = np.random.default_rng(2)
    weights = random_weights(test, rng)
    test.set_weights(weights)
    x = rng.standard_normal((7, 5)).astype(np.float32)
    h = np_dense(x, weights["dense_0/W"], weights["dense_0/b"], "tanh")
    ref = np_dense(h, weights["dense_1/W"], weights["dense_1/b"], "tanh")
    np.testing.assert_allclose(test.call("call", x), ref, rtol=RTOL, atol=ATOL)


# --------------------------------------------------------------------------- Q heads and network
@pytest.mark.parametrize("dueling", [False, True], ids=["plain", "dueling"])
def test_q_value_head(backend, dueling):
    test = ComponentTest(QValueHead(3, dueling=dueling), {"call": {"features": fbatch(4)}}, backend)
    rng = np.random.default_rng(3)
    weights = random_weights(test, rng)
    test.set_weights(weights)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    if dueling:
        assert sorted(weights) == ["advantage/W", "advantage/b", "value/W", "value/b"]
        v = np_dense(x, weights["value/W"], weights["value/b"])
        a = np_dense(x, weights["advantage/W"], weights["advantage/b"])
        ref = v + a - a.mean(axis=1, keepdims=True)
    else:
        assert sorted(weights) == ["q/W", "q/b"]
        ref = np_dense(x, weights["q/W"], weights["q/b"])
    q = test.call("call", x)
    assert q.shape == (5, 3)
    np.testing.assert_allclose(q, ref, rtol=RTOL, atol=ATOL)


def test_q_network_with_box_normalizer(backend):
    low = np.array([-2.0, 0.0, -np.inf], np.float32)
    high = np.array([2.0, 10.0, np.inf], np.float32)
    net = QNetwork(
        NetworkSpec(hidden=[8, 6], activation="relu"),
        num_actions=2,
        dueling=True,
        preprocessor=BoxNormalizer(low, high, name="preprocessor"),
        seed=4,
    )
    test = ComponentTest(net, {"call": {"obs": FloatBox(low, high).with_batch_rank()}}, backend)
    assert set(test.component.variables()) - set(test.component.variables(trainable_only=True)) == {
        "preprocessor/scale",
        "preprocessor/shift",
    }
    rng = np.random.default_rng(5)
    weights = random_weights(test, rng)
    test.set_weights(weights, strict=False)
    obs = np.stack([rng.uniform(-2, 2, 6), rng.uniform(0, 10, 6), rng.standard_normal(6) * 3], axis=1)
    obs = obs.astype(np.float32)
    # [-1, 1] scaling on bounded dims, pass-through on the unbounded one.
    normed = obs.astype(np.float64).copy()
    normed[:, 0] = 2 * (obs[:, 0] + 2.0) / 4.0 - 1
    normed[:, 1] = 2 * (obs[:, 1] - 0.0) / 10.0 - 1
    h = np_dense(normed, weights["trunk/dense_0/W"], weights["trunk/dense_0/b"], "relu")
    h = np_dense(h, weights["trunk/dense_1/W"], weights["trunk/dense_1/b"], "relu")
    v = np_dense(h, weights["head/value/W"], weights["head/value/b"])
    a = np_dense(h, weights["head/advantage/W"], weights["head/advantage/b"])
    ref = v + a - a.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(test.call("call", obs), ref, rtol=RTOL, atol=ATOL)


# --------------------------------------------------------------------------- DQN loss
DQN_LOSS_SPACES = {
    "loss": {
        "q_values": fbatch(3),
        "actions": ibatch(0, 2),
        "rewards": fbatch(),
        "terminals": BoolBox().with_batch_rank(),
        "discounts": fbatch(),
        "q_next_target": fbatch(3),
        "q_next_online": fbatch(3),
        "weights": fbatch(),
    }
}


def dqn_batch() -> dict[str, np.ndarray]:
    """A hand-made batch: n-step discounts, terminals, importance weights, |td| above and below 1."""
    gamma = 0.9
    return {
        "q_values": np.array(
            [[1.0, 2.0, 0.5], [0.0, -1.0, 3.0], [2.5, 0.2, 1.0], [-0.5, 0.4, 0.1], [1.5, 1.0, -2.0]], np.float32
        ),
        "actions": np.array([1, 2, 0, 1, 0], np.int64),
        "rewards": np.array([1.0, -0.5, 2.0, 0.3, 0.0], np.float32),
        "terminals": np.array([False, False, True, False, True]),
        "discounts": np.array([gamma, gamma**3, gamma, gamma**2, gamma**3], np.float32),
        "q_next_target": np.array(
            [[0.5, 1.5, 0.2], [2.0, 0.1, -1.0], [9.0, 9.0, 9.0], [0.3, -0.2, 0.8], [4.0, 4.0, 4.0]], np.float32
        ),
        "q_next_online": np.array(
            [[3.0, 0.0, 1.0], [0.0, 0.0, 5.0], [1.0, 0.0, 0.0], [2.0, 1.0, 0.0], [0.0, 1.0, 0.0]], np.float32
        ),
        "weights": np.array([1.0, 0.5, 0.25, 0.8, 1.0], np.float32),
    }


def np_dqn_loss(batch, loss_type, double_q, delta=1.0):
    """Reference DQN loss and |td| (float64)."""
    rows = np.arange(len(batch["actions"]))
    q = batch["q_values"].astype(np.float64)[rows, batch["actions"]]
    selector = batch["q_next_online"] if double_q else batch["q_next_target"]
    v_next = batch["q_next_target"].astype(np.float64)[rows, np.argmax(selector, axis=1)]
    target = batch["rewards"] + batch["discounts"] * (1.0 - batch["terminals"]) * v_next
    td = q - target
    if loss_type == "huber":
        per = np.where(np.abs(td) <= delta, 0.5 * td**2, delta * (np.abs(td) - 0.5 * delta))
    else:
        per = td**2
    return np.mean(batch["weights"] * per), np.abs(td)


def test_dqn_batch_exercises_every_branch():
    """The hand-made batch distinguishes double-Q from plain and huber from mse."""
    b = dqn_batch()
    assert not np.array_equal(
        np.argmax(b["q_next_online"], 1)[~b["terminals"]], np.argmax(b["q_next_target"], 1)[~b["terminals"]]
    )
    _, td = np_dqn_loss(b, "huber", True)
    assert (td > 1.0).any() and (td < 1.0).any()
    losses = {(lt, dq): np_dqn_loss(b, lt, dq)[0] for lt in ("huber", "mse") for dq in (True, False)}
    assert len({round(v, 6) for v in losses.values()}) == 4


@pytest.mark.parametrize("double_q", [True, False], ids=["double", "single"])
@pytest.mark.parametrize("loss_type", ["huber", "mse"])
def test_dqn_loss(backend, loss_type, double_q):
    test = ComponentTest(DQNLoss(loss_type, double_q), DQN_LOSS_SPACES, backend)
    b = dqn_batch()
    loss, abs_td = test.call("loss", *b.values())
    ref_loss, ref_td = np_dqn_loss(b, loss_type, double_q)
    assert np.shape(loss) == () and abs_td.shape == (5,)
    np.testing.assert_allclose(loss, ref_loss, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(abs_td, ref_td, rtol=RTOL, atol=ATOL)


def test_dqn_loss_rejects_unknown_type():
    with pytest.raises(ConfigError, match="huber, mse"):
        DQNLoss("l1")


# --------------------------------------------------------------------------- exploration
def test_epsilon_greedy_with_fixed_draws(backend):
    spaces = {"explore": {"q_values": fbatch(3), "noise": fbatch(2), "value": FloatBox(0.0, 1.0, shape=())}}
    test = ComponentTest(EpsilonGreedy(3), spaces, backend)
    q_values = np.array([[3, 1, 0], [0, 2, 1], [0, 1, 5], [9, 0, 0], [-1, 0, -2]], np.float32)
    greedy = q_values.argmax(-1)
    random = np.array([2, 2, 0, 1, 0], np.int64)
    draws = np.array([0.05, 0.5, 0.3, 0.299, 0.9], np.float32)
    noise = np.stack([draws, random.astype(np.float32)], axis=-1)
    for eps, expected in [
        (0.3, [2, 1, 2, 1, 1]),  # draw == epsilon keeps the greedy action
        (0.0, greedy),
        (1.0, random),
        (0.6, [2, 2, 0, 1, 1]),
    ]:
        out = test.call("explore", q_values, noise, np.float32(eps))
        assert out.dtype == np.int64
        np.testing.assert_array_equal(out, np.where(draws < np.float32(eps), random, greedy))
        np.testing.assert_array_equal(out, expected, err_msg=f"epsilon={eps}")


def test_epsilon_greedy_noise_keeps_the_seeded_draw_order():
    """The noise is the action then the draw, as DQN always drew them: seeded runs act as before."""
    explore = EpsilonGreedy(4, LinearSchedule(start=1.0, end=0.1, steps=10))
    noise = explore.draw_noise(np.random.default_rng(7), 6)
    rng = np.random.default_rng(7)
    actions, draws = rng.integers(0, 4, 6), rng.random(6, dtype=np.float32)
    assert noise.dtype == np.float32 and noise.shape == (6, *explore.noise_shape)
    np.testing.assert_array_equal(noise[:, 0], draws)
    np.testing.assert_array_equal(noise[:, 1], actions)
    assert explore.parameter == "epsilon" and explore.value(5) == pytest.approx(0.55)
    np.testing.assert_array_equal(explore.actions_without_values(noise, 1.0), actions)
    assert explore.actions_without_values(noise, 0.0) is None


# --------------------------------------------------------------------------- target sync
class SyncRoot(Component):
    """A source and a target Q-network and the TargetSync between them."""

    def __init__(self, tau: float):
        super().__init__("root")
        spec = NetworkSpec(hidden=[4], activation="tanh")
        self.source = QNetwork(spec, 2, seed=1, name="source")
        self.target = QNetwork(spec, 2, seed=2, name="target")
        self.syncer = TargetSync(self.source, self.target, tau)
        self.add_components(self.source, self.target, self.syncer)

    @api
    def q(self, obs):
        """Q-values of both networks."""
        return self.source.call(obs), self.target.call(obs)

    @api
    def sync(self):
        """One synchronisation step."""
        return self.syncer.sync()


@pytest.mark.parametrize("tau", [1.0, 0.3], ids=["hard", "soft"])
def test_target_sync(backend, tau):
    test = ComponentTest(SyncRoot(tau), {"q": {"obs": fbatch(3)}, "sync": {}}, backend)
    rng = np.random.default_rng(6)
    src = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in test.component.source.variables().items()}
    dst = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in test.component.target.variables().items()}
    assert sorted(src) == sorted(dst) == ["head/q/W", "head/q/b", "trunk/dense_0/W", "trunk/dense_0/b"]
    test.set_weights({**{f"source/{k}": v for k, v in src.items()}, **{f"target/{k}": v for k, v in dst.items()}})
    expected = dict(dst)
    for _ in range(2):  # two steps: Polyak averaging compounds
        assert test.call("sync") is None
        expected = {k: (1 - tau) * expected[k].astype(np.float64) + tau * src[k] for k in src}
        weights = test.get_weights()
        for k in src:
            np.testing.assert_allclose(weights[f"target/{k}"], expected[k], rtol=RTOL, atol=ATOL, err_msg=k)
            np.testing.assert_array_equal(weights[f"source/{k}"], src[k])  # the source never moves
    q_src, q_dst = test.call("q", rng.standard_normal((4, 3)).astype(np.float32))
    if tau == 1.0:
        np.testing.assert_allclose(q_dst, q_src, rtol=RTOL, atol=ATOL)
    else:
        assert not np.allclose(q_dst, q_src)


def test_target_sync_does_not_depend_on_the_order_of_the_build_spaces():
    """``sync`` listed before the API method that builds the networks still syncs afterwards."""
    test = ComponentTest(SyncRoot(1.0), {"sync": {}, "q": {"obs": fbatch(3)}}, ("numpy", "eager"))
    rng = np.random.default_rng(7)
    weights = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in test.get_weights().items()}
    test.set_weights(weights)
    test.call("sync")
    after = test.get_weights()
    for k in test.component.source.variables():
        np.testing.assert_array_equal(after[f"target/{k}"], weights[f"source/{k}"], err_msg=k)


def test_target_sync_rejects_bad_tau():
    spec = NetworkSpec(hidden=[2])
    for tau in (0.0, 1.5):
        with pytest.raises(BuildError, match="tau"):
            TargetSync(QNetwork(spec, 2, name="a"), QNetwork(spec, 2, name="b"), tau)


# --------------------------------------------------------------------------- initializers
@pytest.mark.parametrize(
    "name, limit",
    [
        ("glorot_uniform", lambda i, o: np.sqrt(6.0 / (i + o))),
        ("he_uniform", lambda i, o: np.sqrt(6.0 / i)),
        ("lecun_uniform", lambda i, o: 1.0 / np.sqrt(i)),
    ],
)
@pytest.mark.parametrize("fan_in, fan_out", [(64, 32), (20, 200)])
def test_uniform_initializers(name, limit, fan_in, fan_out):
    w = initialize(name, np.random.default_rng(0), fan_in, fan_out)
    a = limit(fan_in, fan_out)
    assert w.shape == (fan_in, fan_out) and w.dtype == np.float32
    assert np.abs(w).max() <= a + 1e-7
    assert np.abs(w).max() > 0.95 * a  # fills the interval ...
    assert abs(float(w.mean())) < 0.05 * a  # ... symmetrically around zero
    assert abs(float(w.var()) - a * a / 3) < 0.1 * a * a / 3  # variance of U(-a, a)
    np.testing.assert_array_equal(w, initialize(name, np.random.default_rng(0), fan_in, fan_out))
    assert not np.array_equal(w, initialize(name, np.random.default_rng(1), fan_in, fan_out))


@pytest.mark.parametrize("fan_in, fan_out", [(8, 8), (16, 4), (4, 16)])
@pytest.mark.parametrize("gain", [1.0, np.sqrt(2)])
def test_orthogonal_initializer(fan_in, fan_out, gain):
    w = orthogonal(np.random.default_rng(0), fan_in, fan_out, gain).astype(np.float64)
    assert w.shape == (fan_in, fan_out)
    small = min(fan_in, fan_out)
    gram = w.T @ w if fan_in >= fan_out else w @ w.T  # orthonormal columns (or rows) x gain
    np.testing.assert_allclose(gram, gain**2 * np.eye(small), atol=1e-5)
    via_name = initialize("orthogonal", np.random.default_rng(0), fan_in, fan_out, gain=gain)
    np.testing.assert_allclose(via_name, w, atol=1e-7)


def test_initializer_names():
    assert set(INITIALIZERS) == {"glorot_uniform", "he_uniform", "lecun_uniform", "orthogonal", "torch_linear"}
    with pytest.raises(ConfigError, match="glorot_uniform"):
        initialize("zeros", np.random.default_rng(0), 2, 2)


def test_seeded_initial_weights_equal_on_every_backend(eager_backend):
    """Variables start from numpy initial values, so a seed gives the same weights everywhere."""
    layer = DenseLayer(5, initializer="glorot_uniform", rng=np.random.default_rng(7))
    test = ComponentTest(layer, {"call": {"x": fbatch(3)}}, eager_backend)
    weights = test.get_weights()
    np.testing.assert_array_equal(weights["W"], initialize("glorot_uniform", np.random.default_rng(7), 3, 5))
    np.testing.assert_array_equal(weights["b"], np.zeros(5, np.float32))
    assert weights["W"].dtype == np.float32


def test_torch_linear_draws_pytorch_default_biases_after_its_weights(eager_backend):
    """``torch_linear`` is nn.Linear's start: the weights lecun_uniform draws, then biases
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) from the same generator; other initializers keep zero biases."""
    fan_in, units = 9, 400
    layer = DenseLayer(units, initializer="torch_linear", rng=np.random.default_rng(7))
    weights = ComponentTest(layer, {"call": {"x": fbatch(fan_in)}}, eager_backend).get_weights()
    rng = np.random.default_rng(7)
    np.testing.assert_array_equal(weights["W"], initialize("lecun_uniform", rng, fan_in, units))
    limit = 1.0 / np.sqrt(fan_in)
    np.testing.assert_array_equal(weights["b"], rng.uniform(-limit, limit, units).astype(np.float32))
    assert np.abs(weights["b"]).max() <= limit and np.abs(weights["b"]).max() > 0.9 * limit
    assert weights["b"].dtype == np.float32


# --------------------------------------------------------------------------- schedules
@pytest.mark.parametrize("step, value", [(-5, 1.0), (0, 1.0), (25, 0.775), (50, 0.55), (100, 0.1), (1000, 0.1)])
def test_linear_schedule(step, value):
    assert LinearSchedule(start=1.0, end=0.1, steps=100)(step) == pytest.approx(value)


@pytest.mark.parametrize("step", [0, 50, 100, 150, 1000])
def test_exponential_schedule(step):
    decaying = ExponentialSchedule(start=1.0, end=0.05, decay=0.1, steps=100)
    assert decaying(step) == pytest.approx(max(0.05, 1.0 * 0.1 ** (step / 100)))
    growing = ExponentialSchedule(start=0.01, end=0.5, decay=0.5, steps=10)  # start < end: capped above
    assert growing(step) == pytest.approx(min(0.5, 0.01 * 0.5 ** (step / 10)))


def test_exponential_schedule_known_points():
    s = ExponentialSchedule(start=1.0, end=0.05, decay=0.1, steps=100)
    assert [round(s(t), 6) for t in (0, 50, 100, 200)] == [1.0, round(0.1**0.5, 6), 0.1, 0.05]


@pytest.mark.parametrize("step", [0, 7, 10_000])
def test_constant_schedule(step):
    assert ConstantSchedule(value=0.25)(step) == 0.25
    assert as_schedule(0.25)(step) == 0.25
    assert as_schedule(3)(step) == 3.0


def test_schedules_validate():
    with pytest.raises(ValueError):
        LinearSchedule(start=1.0, end=0.0, steps=0)
    with pytest.raises(ValueError):
        ExponentialSchedule(start=1.0, end=0.1, decay=1.5, steps=10)
    lin = LinearSchedule(start=1.0, end=0.0, steps=10)
    assert as_schedule(lin) is lin


# --------------------------------------------------------------------------- build-time errors
class Trunk(Component):
    """A root holding an MLP, to check error messages name the nested scope."""

    def __init__(self):
        super().__init__("policy")
        self.mlp = MLP(NetworkSpec(hidden=[4]), name="trunk")
        self.add_components(self.mlp)

    @api
    def call(self, obs):
        """The MLP's output."""
        return self.mlp.call(obs)


def test_wrong_rank_space_raises_build_error_naming_scope_method_and_spaces(eager_backend):
    backend = make_test_backend(*eager_backend)
    given = FloatBox(shape=(3, 4)).with_batch_rank()
    with pytest.raises(BuildError) as info:
        build(Trunk(), {"call": {"obs": given}}, backend)
    msg = str(info.value)
    assert "'policy/trunk/dense_0'" in msg  # the component's scope
    assert "API method 'call'" in msg  # the API method
    assert "rank 1" in msg and "FloatBox(shape=(n,))" in msg  # expected space
    assert "shape=(3, 4)" in msg  # given space
    assert "called from 'policy/trunk'" in msg


def test_dense_layer_rejects_non_float_and_changed_width(eager_backend):
    with pytest.raises(BuildError, match=r"'dense'.*'call'.*float box"):
        ComponentTest(DenseLayer(2), {"call": {"x": IntBox(0, 3, shape=(4,)).with_batch_rank()}}, eager_backend)


class TwoApis(Component):
    """A root with two API methods."""

    def __init__(self):
        super().__init__("two")
        self.dense = DenseLayer(2)
        self.add_components(self.dense)

    @api
    def forward(self, x):
        """Dense output."""
        return self.dense.call(x)

    @api
    def doubled(self, x):
        """Twice the dense output."""
        return self.dense.call(x) * 2.0


def test_missing_root_api_input_spaces(eager_backend):
    backend = make_test_backend(*eager_backend)
    with pytest.raises(BuildError, match=r"\['doubled'\] with no input spaces"):
        build(TwoApis(), {"forward": {"x": fbatch(3)}}, backend)


def test_unknown_api_names(eager_backend):
    backend = make_test_backend(*eager_backend)
    with pytest.raises(BuildError) as info:
        build(
            TwoApis(), {"forward": {"x": fbatch(3)}, "doubled": {"x": fbatch(3)}, "predict": {"x": fbatch(3)}}, backend
        )
    assert "['predict']" in str(info.value) and "['doubled', 'forward']" in str(info.value)


def test_misnamed_api_arguments(eager_backend):
    backend = make_test_backend(*eager_backend)
    with pytest.raises(BuildError, match=r"name \['inputs'\] but the method takes \['x'\]"):
        build(DenseLayer(2), {"call": {"inputs": fbatch(3)}}, backend)


class Forgetful(Component):
    """Adds a sub-component it never calls."""

    def __init__(self):
        super().__init__("forgetful")
        self.used = DenseLayer(2, name="used")
        self.unused = DenseLayer(2, name="unused")
        self.add_components(self.used, self.unused)

    @api
    def call(self, x):
        """Only the first layer."""
        return self.used.call(x)


def test_sub_component_never_called(eager_backend):
    backend = make_test_backend(*eager_backend)
    with pytest.raises(BuildError) as info:
        build(Forgetful(), {"call": {"x": fbatch(3)}}, backend)
    assert "['forgetful/unused']" in str(info.value) and "never called" in str(info.value)


def test_error_inside_graph_function_names_component(eager_backend):
    class Broken(Component):
        """Calls an op no backend has."""

        @api
        def call(self, x):
            """Fails while building."""
            return self.ops.no_such_op(x)

    with pytest.raises(BuildError, match=r"inside component 'broken'.*'call'.*no_such_op"):
        ComponentTest(Broken("broken"), {"call": {"x": fbatch(2)}}, eager_backend)


# --------------------------------------------------------------------------- the harness itself
def test_harness_checks_inputs_and_methods(backend):
    test = ComponentTest(DenseLayer(2), {"call": {"x": fbatch(3)}}, backend)
    with pytest.raises(SpaceError, match=r"call\(x\)"):
        test.call("call", np.zeros((2, 4), np.float32))
    with pytest.raises(BuildError, match="not built"):
        test.call("forward", np.zeros((2, 3), np.float32))
    with pytest.raises(KeyError, match="missing"):
        test.set_weights({"W": np.zeros((3, 2), np.float32)})
    with pytest.raises(ValueError, match="shape"):
        test.set_weights({"W": np.zeros((2, 3), np.float32), "b": np.zeros(2, np.float32)})
    # float64 inputs are cast to the space's float32
    assert test.call("call", np.ones((2, 3))).dtype == np.float32


def test_numpy_backend_has_no_autodiff():
    test = ComponentTest(DenseLayer(2), {"call": {"x": fbatch(3)}}, ("numpy", "eager"))
    assert NumpyBackend.supports_autodiff is False
    with pytest.raises(NotImplementedError, match="no automatic differentiation"):
        test.gradients("call", np.ones((2, 3), np.float32), objective=lambda ops, y: ops.reduce_sum(y))
    with pytest.raises(NotImplementedError, match="no automatic differentiation"):
        test.backend.train_step(lambda x: (x,), [], {"type": "sgd", "learning_rate": 0.1})


def test_numpy_backend_is_not_a_registered_plugin():
    from rlgraph_core.plugins import get_plugin_manager

    # no shipped distribution registers it (tests/core/core_backend.py does, for the core tests'
    # whole configs, where rlgraph-torch is absent)
    entry = get_plugin_manager().names("backends").get("numpy")
    assert entry is None or entry.distribution == "rlgraph-core-tests"
    assert available_backends()["numpy"] is NumpyBackend
    assert list(available_backends())[0] == "numpy"
    numpy_static = NumpyBackend(mode="static")
    fn = lambda x: x  # noqa: E731
    assert numpy_static.function(fn) is fn
    with pytest.raises(ConfigError, match="CPU"):
        NumpyBackend(device="cuda")


def test_backend_params_cover_every_backend_in_both_modes(monkeypatch):
    monkeypatch.delenv(SELECT_ENV, raising=False)
    ids = [p.id for p in backend_params()]
    assert ids[0] == "numpy-eager" and "numpy-static" not in ids
    plugins = [name for name in available_backends() if name != "numpy"]
    assert len(ids) == 1 + 2 * len(plugins)
    for name in plugins:
        assert f"{name}-eager" in ids and f"{name}-static" in ids
    assert [p.id for p in backend_params(modes=("eager",))] == ["numpy-eager"] + [f"{n}-eager" for n in plugins]


def test_backend_selection_by_environment(monkeypatch):
    monkeypatch.setenv(SELECT_ENV, "numpy")
    assert backend_pairs() == [("numpy", "eager")]
    monkeypatch.setenv(SELECT_ENV, "numpy, nonesuch-static")
    with pytest.raises(KeyError, match="nonesuch-static"):
        backend_pairs()
    plugins = [name for name in available_backends() if name != "numpy"]
    if plugins:
        monkeypatch.setenv(SELECT_ENV, f"{plugins[0]}-static,numpy")
        assert backend_pairs() == [("numpy", "eager"), (plugins[0], "static")]
        monkeypatch.setenv(SELECT_ENV, plugins[0])
        assert backend_pairs() == [(plugins[0], "eager"), (plugins[0], "static")]


# --------------------------------------------------------------------------- ops contract parity
def _ops_cases(rng):
    """(op name, args builder(backend), numpy reference) for every op of OPS_CONTRACT."""
    x = rng.standard_normal((3, 4)).astype(np.float32) * 2
    pos = np.abs(x) + 0.5
    w = rng.standard_normal((4, 2)).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    idx = np.array([3, 0, 2], np.int64)
    cond = x > 0
    y = rng.standard_normal((3, 4)).astype(np.float32)
    ex = np.exp(x - x.max(-1, keepdims=True))
    img = rng.standard_normal((3, 2, 2, 4)).astype(np.float32)
    kernel = rng.standard_normal((2, 2, 4, 2)).astype(np.float32)
    pixels = np.array([[0, 7, 255]], np.uint8)
    seq, state = rng.standard_normal((3, 2, 4)).astype(np.float32), rng.standard_normal((2, 2)).astype(np.float32)
    lstm_w = [(rng.standard_normal(shape) * 0.5).astype(np.float32) for shape in ((4, 8), (2, 8), (8,))]
    gru_w = [(rng.standard_normal(shape) * 0.5).astype(np.float32) for shape in ((4, 6), (2, 6), (6,), (6,))]
    lstm_args, gru_args = (seq, state, state[::-1].copy(), *lstm_w), (seq, state, *gru_w)
    T = lambda be, v: be.to_tensor(v)  # noqa: E731
    return [
        ("dense", lambda be: (T(be, x), T(be, w), T(be, b)), x.astype(np.float64) @ w + b),
        ("activation", lambda be: ("elu", T(be, x)), np_activation("elu", x)),
        ("reduce_sum", lambda be: (T(be, x),), x.sum()),
        ("reduce_sum", lambda be: (T(be, x), 1, True), x.sum(1, keepdims=True)),
        ("reduce_mean", lambda be: (T(be, x), 0), x.mean(0)),
        ("reduce_max", lambda be: (T(be, x), -1), x.max(-1)),
        ("reduce_max", lambda be: (T(be, x),), x.max()),
        ("argmax", lambda be: (T(be, np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 1.0]], np.float32)),), np.array([1, 0])),
        ("gather_last", lambda be: (T(be, x), T(be, idx)), x[np.arange(3), idx]),
        ("take", lambda be: (T(be, x), T(be, np.array([2, 0, 2, 1], np.int64))), x[[2, 0, 2, 1]]),
        ("one_hot", lambda be: (T(be, idx), 4), np.eye(4)[idx]),
        ("where", lambda be: (T(be, cond), T(be, x), T(be, y)), np.where(cond, x, y)),
        ("abs", lambda be: (T(be, x),), np.abs(x)),
        ("square", lambda be: (T(be, x),), x.astype(np.float64) ** 2),
        ("sqrt", lambda be: (T(be, pos),), np.sqrt(pos.astype(np.float64))),
        ("exp", lambda be: (T(be, x),), np.exp(x.astype(np.float64))),
        ("log", lambda be: (T(be, pos),), np.log(pos.astype(np.float64))),
        ("minimum", lambda be: (T(be, x), T(be, y)), np.minimum(x, y)),
        ("maximum", lambda be: (T(be, x), T(be, y)), np.maximum(x, y)),
        ("clip", lambda be: (T(be, x), -0.5, 0.7), np.clip(x, -0.5, 0.7)),
        ("stop_gradient", lambda be: (T(be, x),), x),
        ("cast", lambda be: (T(be, np.array([1.7, -2.2, 0.0], np.float32)), "int64"), np.array([1, -2, 0])),
        ("cast", lambda be: (T(be, np.array([True, False])), "float32"), np.array([1.0, 0.0])),
        (
            "huber",
            lambda be: (T(be, x), 1.5),
            np.where(np.abs(x) <= 1.5, 0.5 * x.astype(np.float64) ** 2, 1.5 * (np.abs(x) - 0.75)),
        ),
        ("softmax", lambda be: (T(be, x),), ex / ex.sum(-1, keepdims=True)),
        ("log_softmax", lambda be: (T(be, x),), np.log(ex / ex.sum(-1, keepdims=True))),
        ("concat", lambda be: ([T(be, x), T(be, y)], 0), np.concatenate([x, y], 0)),
        ("stack", lambda be: ([T(be, x), T(be, y)], 1), np.stack([x, y], 1)),
        ("reshape", lambda be: (T(be, x), (4, 3)), x.reshape(4, 3)),
        ("transpose", lambda be: (T(be, img), (0, 3, 1, 2)), img.transpose(0, 3, 1, 2)),
        ("expand_dims", lambda be: (T(be, x), 1), x[:, None, :]),
        ("squeeze", lambda be: (T(be, x[:, :1]), 1), x[:, 0]),
        ("zeros_like", lambda be: (T(be, x),), np.zeros_like(x)),
        ("constant", lambda be: ([1, 2], "int64"), np.array([1, 2])),
        # The image ops in one small case each; tests/core/test_conv_ops.py checks them in depth.
        (
            "conv2d",
            lambda be: (T(be, img), T(be, kernel), T(be, b)),
            np.einsum("nyxc,yxcf->nf", img, kernel)[:, None, None] + b,
        ),
        ("max_pool2d", lambda be: (T(be, img), 2), img.max((1, 2))[:, None, None]),
        ("flatten", lambda be: (T(be, img),), img.reshape(3, -1)),
        ("split_leading", lambda be: (T(be, seq.reshape(6, 4)), T(be, seq[..., 0])), seq),
        ("image_to_float", lambda be: (T(be, pixels), 0.5), pixels * 0.5),
        # The recurrent ops (several outputs, compared flattened and joined); the conformance
        # suite checks them in depth (resets, gradients, static mode).
        ("lstm", lambda be: tuple(T(be, v) for v in lstm_args), _joined(reference_lstm(*lstm_args))),
        ("gru", lambda be: tuple(T(be, v) for v in gru_args), _joined(reference_gru(*gru_args))),
    ]


def _joined(outputs):
    """Several outputs as one flat vector."""
    return np.concatenate([np.asarray(o).reshape(-1) for o in outputs])


def test_every_backend_implements_the_ops_contract(eager_backend):
    be = make_test_backend(*eager_backend)
    missing = [name for name in OPS_CONTRACT if not callable(getattr(be.ops, name, None))]
    assert not missing, f"{be.name} ops lack {missing}"
    cases = _ops_cases(np.random.default_rng(8))
    assert {c[0] for c in cases} | {"assign", "polyak"} == set(OPS_CONTRACT)
    for name, make_args, ref in cases:
        out = getattr(be.ops, name)(*make_args(be))
        out = _joined([be.to_numpy(o) for o in out]) if isinstance(out, tuple) else be.to_numpy(out)
        assert out.shape == np.shape(ref), name
        if np.asarray(ref).dtype.kind == "f":
            assert out.dtype == np.float32, f"{name} gives {out.dtype}"
            np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6, err_msg=name)
        else:
            assert out.dtype == np.int64, f"{name} gives {out.dtype}"
            np.testing.assert_array_equal(out, ref, err_msg=name)


def test_every_backend_activation_matches_reference(eager_backend):
    be = make_test_backend(*eager_backend)
    x = np.linspace(-6, 6, 25, dtype=np.float32)
    for name in ACTIVATIONS:
        out = be.to_numpy(be.ops.activation(name, be.to_tensor(x)))
        np.testing.assert_allclose(out, np_activation(name, x), rtol=1e-5, atol=1e-6, err_msg=name)


def test_every_backend_assign_and_polyak_in_place(eager_backend):
    be = make_test_backend(*eager_backend)
    t0 = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    s0 = np.array([[0.0, -1.0], [5.0, 1.0]], np.float32)
    t, s = be.variable("t", t0), be.variable("s", s0)
    be.ops.polyak([t], [s], 0.25)
    np.testing.assert_allclose(be.to_numpy(t), 0.75 * t0 + 0.25 * s0, rtol=1e-6)
    be.ops.polyak([t], [s], 1.0)
    np.testing.assert_array_equal(be.to_numpy(t), s0)
    be.ops.assign(t, be.to_tensor(t0))
    np.testing.assert_array_equal(be.to_numpy(t), t0)
    # A tensor tau (a fused loop's per-step tau): 0 leaves t bit for bit, 1 copies s bit for bit.
    be.ops.polyak([t], [s], be.to_tensor(np.float32(0.0)))
    np.testing.assert_array_equal(be.to_numpy(t), t0)
    be.ops.polyak([t], [s], be.to_tensor(np.float32(0.25)))
    np.testing.assert_allclose(be.to_numpy(t), 0.75 * t0 + 0.25 * s0, rtol=1e-6)
    be.ops.polyak([t], [s], be.to_tensor(np.float32(1.0)))
    np.testing.assert_array_equal(be.to_numpy(t), s0)
    be.ops.assign(t, be.to_tensor(t0))
    be.assign_numpy(s, t0 * 2)
    np.testing.assert_array_equal(be.to_numpy(s), t0 * 2)
    assert re.fullmatch(r"\w+ \(eager, .+\)", be.describe())
