"""The offline-RL components alone, from spaces, against plain numpy: the behaviour-cloning loss
(discrete cross-entropy, continuous squared error), the CQL regularisers (logsumexp of Q minus Q
of the data action) and IQL's expectile value loss and advantage-weighted (AWR) policy loss, values
on every available backend and mode (the numpy harness always), and the gradients (softmax minus
one-hot; the expectile's asymmetric pull on V; AWR's weights on the log-likelihood, none into the
targets) on backends with autodiff. The agents built
from them are tested in tests/torch/test_offline.py."""

from __future__ import annotations

import numpy as np
import pytest

from rlgraph_core.components.offline_losses import (
    AdvantageWeightedLoss,
    BCLoss,
    ContinuousCQLRegularizer,
    CQLRegularizer,
    ExpectileLoss,
)
from rlgraph_core.spaces import FloatBox, IntBox
from rlgraph_core.testing import ComponentTest, available_backends, backend_params

B, A, D = 5, 3, 2
RNG = np.random.default_rng(3)
Q = (RNG.standard_normal((B, A)) * 3.0).astype(np.float32)
Q[0] = [80.0, 81.0, 79.0]  # large values: a naive exp would overflow float32 only beyond ~88, the shift keeps it exact
ACTIONS = np.array([0, 2, 1, 1, 0], np.int64)
WEIGHTS = np.array([1.0, 0.5, 2.0, 1.0, 0.0], np.float32)


def fbatch(*shape):
    return FloatBox(shape=shape).with_batch_rank()


@pytest.fixture(params=backend_params())
def backend(request):
    return request.param


def _autodiff(pair) -> bool:
    return getattr(available_backends()[pair[0]], "supports_autodiff", True)


def np_logsumexp(q: np.ndarray) -> np.ndarray:
    q = q.astype(np.float64)
    m = q.max(axis=-1, keepdims=True)
    return np.log(np.exp(q - m).sum(axis=-1)) + m[:, 0]


def test_cql_regularizer_is_logsumexp_minus_data_q(backend):
    test = ComponentTest(
        CQLRegularizer(),
        {"loss": {"q_values": fbatch(A), "actions": IntBox(0, A - 1).with_batch_rank(), "weights": fbatch()}},
        backend,
    )
    loss, per_sample = test.call("loss", Q, ACTIONS, WEIGHTS)
    ref = np_logsumexp(Q) - Q.astype(np.float64)[np.arange(B), ACTIONS]
    np.testing.assert_allclose(per_sample, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(loss, np.mean(WEIGHTS * ref), rtol=1e-5, atol=1e-5)
    assert np.all(per_sample >= 0) and np.all(per_sample <= np.log(A) + np.ptp(Q, axis=1) + 1e-5)


@pytest.mark.parametrize("pair", [p.values[0] for p in backend_params() if _autodiff(p.values[0])] or [None])
def test_cql_regularizer_gradient_is_softmax_minus_one_hot(pair):
    if pair is None:
        pytest.skip("no backend with automatic differentiation is installed")
    test = ComponentTest(
        CQLRegularizer(),
        {"loss": {"q_values": fbatch(A), "actions": IntBox(0, A - 1).with_batch_rank(), "weights": fbatch()}},
        pair,
    )
    _, grads = test.gradients("loss", Q, ACTIONS, WEIGHTS, wrt_inputs=["q_values"])
    q = Q.astype(np.float64)
    softmax = np.exp(q - q.max(1, keepdims=True))
    softmax /= softmax.sum(1, keepdims=True)
    ref = (softmax - np.eye(A)[ACTIONS]) * WEIGHTS[:, None] / B
    np.testing.assert_allclose(grads["input:q_values"], ref, rtol=1e-4, atol=1e-6)


def test_bc_loss_discrete_is_weighted_cross_entropy(backend):
    test = ComponentTest(
        BCLoss(discrete=True),
        {"loss": {"outputs": fbatch(A), "actions": IntBox(0, A - 1).with_batch_rank(), "weights": fbatch()}},
        backend,
    )
    loss, per_sample = test.call("loss", Q, ACTIONS, WEIGHTS)
    log_softmax = Q.astype(np.float64) - np_logsumexp(Q)[:, None]
    ref = -log_softmax[np.arange(B), ACTIONS]
    np.testing.assert_allclose(per_sample, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(loss, np.mean(WEIGHTS * ref), rtol=1e-5, atol=1e-5)


def test_bc_loss_continuous_is_weighted_squared_error(backend):
    pred = RNG.uniform(-1, 1, (B, D)).astype(np.float32)
    target = RNG.uniform(-1, 1, (B, D)).astype(np.float32)
    test = ComponentTest(
        BCLoss(discrete=False), {"loss": {"outputs": fbatch(D), "actions": fbatch(D), "weights": fbatch()}}, backend
    )
    loss, per_sample = test.call("loss", pred, target, WEIGHTS)
    ref = ((pred.astype(np.float64) - target) ** 2).sum(axis=1)
    np.testing.assert_allclose(per_sample, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loss, np.mean(WEIGHTS * ref), rtol=1e-5, atol=1e-6)


def test_continuous_cql_regularizer_is_importance_sampled_logsumexp_minus_data_q(backend):
    m = 2
    q_data = RNG.standard_normal(B).astype(np.float32)
    q_random = RNG.standard_normal((B, m)).astype(np.float32)
    q_policy = (RNG.standard_normal((B, 2 * m)) * 5.0).astype(np.float32)
    log_probs = RNG.standard_normal((B, 2 * m)).astype(np.float32)
    test = ComponentTest(
        ContinuousCQLRegularizer(action_dim=D),
        {
            "loss": {
                "q_data": fbatch(),
                "q_random": fbatch(m),
                "q_policy": fbatch(2 * m),
                "log_probs": fbatch(2 * m),
                "weights": fbatch(),
            }
        },
        backend,
    )
    loss, per_sample = test.call("loss", q_data, q_random, q_policy, log_probs, WEIGHTS)
    scores = np.concatenate([q_random + D * np.log(2.0), q_policy.astype(np.float64) - log_probs], axis=1)
    ref = np_logsumexp(scores) - q_data
    np.testing.assert_allclose(per_sample, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(loss, np.mean(WEIGHTS * ref), rtol=1e-5, atol=1e-5)


def _iql_test(component, pair):
    """A ComponentTest of IQL's expectile or advantage-weighted loss: three ``[B]`` float inputs."""
    names = ("q_values", "values") if isinstance(component, ExpectileLoss) else ("log_probs", "advantages")
    return ComponentTest(component, {"loss": {name: fbatch() for name in (*names, "weights")}}, pair)


def np_expectile(q: np.ndarray, v: np.ndarray, tau: float) -> np.ndarray:
    u = q.astype(np.float64) - v
    return np.abs(tau - (u < 0)) * u**2


@pytest.mark.parametrize("tau", [0.5, 0.7, 0.9])
def test_expectile_loss_is_asymmetric_squared_error(backend, tau):
    q = (RNG.standard_normal(B) * 3.0).astype(np.float32)
    v = (RNG.standard_normal(B) * 3.0).astype(np.float32)
    v[0] = q[0]  # u = 0: no loss on either side
    loss, u = _iql_test(ExpectileLoss(tau), backend).call("loss", q, v, WEIGHTS)
    ref = np_expectile(q, v, tau)
    np.testing.assert_allclose(u, q.astype(np.float64) - v, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(loss, np.mean(WEIGHTS * ref), rtol=1e-5, atol=1e-5)


def test_expectile_loss_gradient_pulls_v_up_harder_above_than_below():
    pairs = [p.values[0] for p in backend_params() if _autodiff(p.values[0])]
    if not pairs:
        pytest.skip("no backend with automatic differentiation is installed")
    tau = 0.8
    q = np.array([1.0, -1.0, 2.0, 0.5, 3.0], np.float32)
    v = np.array([0.0, 0.0, 2.5, 0.5, -1.0], np.float32)
    for pair in pairs:
        _, grads = _iql_test(ExpectileLoss(tau), pair).gradients(
            "loss", q, v, WEIGHTS, wrt_inputs=["values", "q_values"]
        )
        u = q.astype(np.float64) - v
        ref = -2.0 * np.abs(tau - (u < 0)) * u * WEIGHTS / B  # d loss / d V
        np.testing.assert_allclose(grads["input:values"], ref, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(grads["input:q_values"], 0.0, atol=1e-7)  # Q is a target


@pytest.mark.parametrize("temperature,max_weight", [(3.0, 100.0), (0.0, 100.0), (10.0, 5.0)])
def test_advantage_weighted_loss_is_clipped_exp_weighted_log_likelihood(backend, temperature, max_weight):
    log_probs = RNG.standard_normal(B).astype(np.float32)
    adv = np.array([-2.0, 0.0, 0.3, 1.5, 40.0], np.float32)  # exp(3 * 40) overflows float32: the clip applies first
    loss, adv_weights = _iql_test(AdvantageWeightedLoss(temperature, max_weight), backend).call(
        "loss", log_probs, adv, WEIGHTS
    )
    ref_w = np.minimum(np.exp(temperature * adv.astype(np.float64)), max_weight)
    np.testing.assert_allclose(adv_weights, ref_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loss, -np.mean(WEIGHTS * ref_w * log_probs), rtol=1e-5, atol=1e-5)
    assert np.all(np.isfinite(adv_weights))


def test_advantage_weighted_loss_gradient_reaches_only_the_log_probs():
    pairs = [p.values[0] for p in backend_params() if _autodiff(p.values[0])]
    if not pairs:
        pytest.skip("no backend with automatic differentiation is installed")
    log_probs = RNG.standard_normal(B).astype(np.float32)
    adv = np.array([-2.0, 0.0, 0.3, 1.5, 40.0], np.float32)
    for pair in pairs:
        _, grads = _iql_test(AdvantageWeightedLoss(3.0, 100.0), pair).gradients(
            "loss", log_probs, adv, WEIGHTS, wrt_inputs=["log_probs", "advantages"]
        )
        ref = -np.minimum(np.exp(3.0 * adv.astype(np.float64)), 100.0) * WEIGHTS / B
        np.testing.assert_allclose(grads["input:log_probs"], ref, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(grads["input:advantages"], 0.0, atol=1e-7)


@pytest.mark.parametrize("bad", [dict(expectile=0.0), dict(expectile=1.0)])
def test_expectile_outside_the_open_unit_interval_is_refused(bad):
    with pytest.raises(ValueError, match="expectile must lie in"):
        ExpectileLoss(**bad)
