"""SAC components alone, from spaces, against plain numpy references of the same math.

Covered: the tanh-squashed Gaussian's log-probability correction (against a direct float64
computation, and against the naive ``log(1 - tanh(u)^2)`` formula where that one is still
accurate and where it breaks down), the twin Q-networks, the three SAC losses (critic with the
twin-Q min target and entropy term, actor, temperature) with their gradients, the whole SAC
graph's critic target on a hand-made batch, and the SAC config.

Forward tests run on every available ``(backend, mode)`` pair (the numpy harness always);
gradient tests and agent tests need automatic differentiation, so they run on framework
backends only (and are skipped where only rlgraph-core is installed).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from rlgraph_core.agents.sac import SACConfig, SACGraph
from rlgraph_core.components.distributions import DistributionHead, scale_action, unscale_action
from rlgraph_core.components.network import NetworkSpec
from rlgraph_core.components.sac_loss import SACLoss
from rlgraph_core.components.twin_q import ContinuousQNetwork, TwinQNetwork
from rlgraph_core.errors import BuildError, ConfigError
from rlgraph_core.components.cnn import CNN, CNNSettings
from rlgraph_core.components.network import NetworkMaker
from rlgraph_core.spaces import BoolBox, FloatBox, IntBox
from rlgraph_core.testing import ComponentTest, available_backends, backend_params, make_test_backend

RTOL, ATOL = 1e-5, 1e-5
LOG_2PI = math.log(2.0 * math.pi)


def fbatch(*shape) -> FloatBox:
    """A batched float box of value shape ``shape``."""
    return FloatBox(shape=shape).with_batch_rank()


def random_weights(test: ComponentTest, rng, scale: float, alpha: float | None = None) -> dict:
    """Set normal random weights times ``scale`` (float32) on ``test``'s component and return them;
    with ``alpha``, the SAC graph's temperature ``sac_loss/log_alpha`` is ``log(alpha)`` instead."""
    weights = {k: (rng.standard_normal(v.shape) * scale).astype(np.float32) for k, v in test.get_weights().items()}
    if alpha is not None:
        weights["sac_loss/log_alpha"] = np.asarray(math.log(alpha), np.float32)
    test.set_weights(weights)
    return weights


def _autodiff_params() -> list:
    return [p for p in backend_params() if getattr(available_backends()[p.values[0][0]], "supports_autodiff", True)]


@pytest.fixture(params=backend_params())
def backend(request):
    """A ``(backend_name, mode)`` pair: numpy-eager, and each plugin backend eager and static."""
    return request.param


@pytest.fixture(params=_autodiff_params())
def grad_backend(request):
    """A ``(backend_name, mode)`` pair of a backend with automatic differentiation."""
    return request.param


# --------------------------------------------------------------------------- numpy references
def np_relu_mlp(x: np.ndarray, weights: dict, prefix: str, n_layers: int) -> np.ndarray:
    """Reference ReLU MLP (float64) over ``prefix/dense_i/{W,b}``."""
    h = x.astype(np.float64)
    for i in range(n_layers):
        h = np.maximum(h @ weights[f"{prefix}/dense_{i}/W"] + weights[f"{prefix}/dense_{i}/b"], 0.0)
    return h


def np_linear(x, weights, prefix):
    """Reference linear layer over ``prefix/{W,b}``."""
    return x.astype(np.float64) @ weights[f"{prefix}/W"] + weights[f"{prefix}/b"]


def np_q(x, weights, prefix: str, n_layers: int) -> np.ndarray:
    """Reference Q-network (float64): ``prefix/out`` over a ReLU trunk ``prefix/trunk``; shape ``(batch,)``."""
    return np_linear(np_relu_mlp(x, weights, f"{prefix}/trunk", n_layers), weights, f"{prefix}/out")[:, 0]


def np_gaussian_log_prob(u, mean, log_std):
    """``sum_i log N(u_i; mean_i, exp(log_std_i))`` in float64."""
    u, mean, log_std = (np.asarray(v, np.float64) for v in (u, mean, log_std))
    return np.sum(-0.5 * ((u - mean) / np.exp(log_std)) ** 2 - log_std - 0.5 * LOG_2PI, axis=-1)


def np_squash_correction_stable(u):
    """``sum_i log(1 - tanh(u_i)^2)`` computed as ``2 (log 2 - u - log(1 + e^{-2u}))`` (float64)."""
    u = np.asarray(u, np.float64)
    return np.sum(2.0 * (math.log(2.0) - u - np.logaddexp(0.0, -2.0 * u)), axis=-1)


def np_squash_correction_naive(u, dtype=np.float64):
    """The textbook ``sum_i log(1 - tanh(u_i)^2)``, in ``dtype`` (loses precision for large |u|)."""
    u = np.asarray(u, dtype)
    with np.errstate(divide="ignore"):
        return np.sum(np.log(dtype(1.0) - np.tanh(u) ** 2), axis=-1)


def np_squashed_log_prob(u, mean, log_std):
    """Direct reference: ``log N(u) - sum log(1 - tanh(u)^2)`` with the change-of-variables term
    computed as ``log |d tanh(u) / du| = log(sech(u)^2) = -2 log cosh(u)`` (float64)."""
    u = np.asarray(u, np.float64)
    log_det = np.sum(-2.0 * (np.abs(u) + np.log1p(np.exp(-2.0 * np.abs(u))) - math.log(2.0)), axis=-1)
    return np_gaussian_log_prob(u, mean, log_std) - log_det


def np_squashed_actor(h, weights, noise, prefix="actor"):
    """Reference squashed-Gaussian actor head on trunk features ``h``: ``(tanh(u), log_prob, tanh(mean))``."""
    mean = np_linear(h, weights, f"{prefix}/head/mean")
    log_std = np.clip(np_linear(h, weights, f"{prefix}/head/log_std"), -20.0, 2.0)
    u = mean + np.exp(log_std) * noise
    return np.tanh(u), np_squashed_log_prob(u, mean, log_std), np.tanh(mean)


def np_critic_loss(q1, q2, rewards, terminals, discounts, next_q1, next_q2, next_logp, weights, alpha):
    """Reference SAC critic loss and mean |TD| (float64)."""
    v_next = np.minimum(next_q1, next_q2) - alpha * next_logp
    y = rewards + discounts * (1.0 - terminals.astype(np.float64)) * v_next
    td1, td2 = q1 - y, q2 - y
    loss = np.mean(weights * 0.5 * (td1**2 + td2**2))
    return loss, 0.5 * (np.abs(td1) + np.abs(td2)), y


# --------------------------------------------------------------------------- squashed Gaussian
def test_stable_and_naive_squash_corrections_agree_where_naive_is_accurate():
    u = np.linspace(-4.0, 4.0, 81)[:, None]
    np.testing.assert_allclose(np_squash_correction_stable(u), np_squash_correction_naive(u), rtol=1e-10, atol=1e-10)
    # In float32 the naive formula breaks down: first it loses accuracy, then tanh(u)^2 rounds to 1
    # and the log goes to -inf; the stable form stays exact (~ 2 (log 2 - |u|)).
    assert abs(np_squash_correction_naive(np.array([[9.0]]), np.float32)[0] - 2 * (math.log(2) - 9.0)) > 0.5
    big = np.array([[12.0], [-15.0]])
    assert np.all(np.isneginf(np_squash_correction_naive(big, np.float32)))
    np.testing.assert_allclose(np_squash_correction_stable(big)[:, None], 2 * (math.log(2) - np.abs(big)), rtol=1e-6)


def _squashed_head(backend, action_dim=2, features=5, bounds=(-20.0, 2.0)):
    head = DistributionHead(
        FloatBox(-1.0, 1.0, shape=(action_dim,)),
        squashed=True,
        rng=np.random.default_rng(0),
        log_std_bounds=bounds,
        name="head",
    )
    spaces = {
        "sample": {"features": fbatch(features), "noise": fbatch(action_dim)},
        "sample_actions": {"features": fbatch(features), "noise": fbatch(action_dim)},
        "deterministic": {"features": fbatch(features)},
        "log_prob_entropy": {"features": fbatch(features), "actions": fbatch(action_dim)},
    }
    return ComponentTest(head, spaces, backend)


def test_squashed_gaussian_sample_and_log_prob(backend):
    test = _squashed_head(backend, bounds=(-5.0, 1.0))
    rng = np.random.default_rng(1)
    weights = random_weights(test, rng, 0.8)
    feats = rng.standard_normal((16, 5)).astype(np.float32)
    noise = rng.standard_normal((16, 2)).astype(np.float32)
    actions, logp = test.call("sample", feats, noise)

    mean = np_linear(feats, weights, "mean")
    log_std = np.clip(np_linear(feats, weights, "log_std"), -5.0, 1.0)
    assert (log_std == -5.0).any() or (log_std == 1.0).any()  # the clip is exercised
    u = mean + np.exp(log_std) * noise
    assert actions.shape == (16, 2) and logp.shape == (16,)
    np.testing.assert_allclose(actions, np.tanh(u), rtol=1e-5, atol=1e-5)
    ref = np_squashed_log_prob(u, mean, log_std)
    np.testing.assert_allclose(logp, ref, rtol=1e-4, atol=1e-4)
    # The same value through the naive textbook formula (accurate in float64 for these |u|).
    assert np.abs(u).max() < 8.0
    np.testing.assert_allclose(
        logp, np_gaussian_log_prob(u, mean, log_std) - np_squash_correction_naive(u), rtol=1e-4, atol=1e-4
    )
    np.testing.assert_allclose(test.call("deterministic", feats), np.tanh(mean), rtol=1e-5, atol=1e-5)

    # log_prob of given squashed actions recovers u = atanh(a) and agrees with the sample's log-prob.
    keep = np.abs(u).max(axis=1) < 3.0  # atanh of a float32 tanh is accurate there
    logp_again, _ = test.call("log_prob_entropy", feats[keep], actions[keep])
    np.testing.assert_allclose(logp_again, logp[keep], rtol=1e-3, atol=1e-3)


def test_sample_actions_are_the_actions_of_sample(backend):
    """Acting skips the log-probability; the actions stay exactly those of ``sample``."""
    test = _squashed_head(backend, bounds=(-5.0, 1.0))
    rng = np.random.default_rng(2)
    feats = rng.standard_normal((8, 5)).astype(np.float32)
    noise = rng.standard_normal((8, 2)).astype(np.float32)
    actions, _ = test.call("sample", feats, noise)
    only = test.call("sample_actions", feats, noise)
    assert only.shape == (8, 2)
    np.testing.assert_array_equal(only, actions)


def test_squashed_gaussian_log_prob_stays_finite_for_saturated_actions(backend):
    """Where ``tanh(u)`` rounds to +-1 in float32, the stable correction stays finite and correct."""
    test = _squashed_head(backend, action_dim=1, features=1)
    test.set_weights(
        {
            "mean/W": np.array([[1.0]], np.float32),
            "mean/b": np.zeros(1, np.float32),
            "log_std/W": np.zeros((1, 1), np.float32),
            "log_std/b": np.zeros(1, np.float32),
        }
    )
    feats = np.array([[10.0], [-12.0], [0.5]], np.float32)
    noise = np.zeros((3, 1), np.float32)
    actions, logp = test.call("sample", feats, noise)
    assert np.all(np.isfinite(logp))
    u = feats.astype(np.float64)
    np.testing.assert_allclose(logp, np_squashed_log_prob(u, u, np.zeros_like(u)), rtol=1e-5, atol=1e-4)
    assert np.isneginf(np_squash_correction_naive(u[:2], np.float32)).all()


def test_squashed_gaussian_log_prob_gradient(grad_backend):
    """d logp / d noise through the reparameterised sample matches a float64 finite difference."""
    test = _squashed_head(grad_backend, action_dim=2, features=3)
    rng = np.random.default_rng(2)
    weights = random_weights(test, rng, 0.5)
    feats = rng.standard_normal((4, 3)).astype(np.float32)
    noise = rng.standard_normal((4, 2)).astype(np.float32)
    _, grads = test.gradients(
        "sample", feats, noise, objective=lambda ops, out: ops.reduce_sum(out[1]), wrt_inputs=["noise"]
    )
    mean = np_linear(feats, weights, "mean")
    log_std = np_linear(feats, weights, "log_std")

    def total(eps):
        return np_squashed_log_prob(mean + np.exp(log_std) * eps, mean, log_std).sum()

    num = np.zeros_like(noise, np.float64)
    for idx in np.ndindex(noise.shape):
        d = np.zeros_like(num)
        d[idx] = 1e-6
        num[idx] = (total(noise + d) - total(noise - d)) / 2e-6
    np.testing.assert_allclose(grads["input:noise"], num, rtol=1e-3, atol=1e-3)


def test_action_scaling_round_trip():
    low, high = np.array([-2.0, 0.0]), np.array([2.0, 10.0])
    unit = np.array([[-1.0, 1.0], [0.0, -0.5]])
    scaled = scale_action(unit, low, high)
    np.testing.assert_allclose(scaled, [[-2.0, 10.0], [0.0, 2.5]])
    np.testing.assert_allclose(unscale_action(scaled, low, high), unit)


# --------------------------------------------------------------------------- twin Q-networks
def test_twin_q_forward(backend):
    spec = NetworkSpec(hidden=[8, 6], activation="relu")
    test = ComponentTest(
        TwinQNetwork(spec, seed=3, name="critic"), {"call": {"obs": fbatch(3), "actions": fbatch(2)}}, backend
    )
    weights = test.get_weights()
    assert sorted(weights) == sorted(
        f"{q}/{layer}/{p}"
        for q in ("q1", "q2")
        for layer in ("trunk/dense_0", "trunk/dense_1", "out")
        for p in ("W", "b")
    )
    assert not np.allclose(weights["q1/trunk/dense_0/W"], weights["q2/trunk/dense_0/W"])  # independent nets
    rng = np.random.default_rng(4)
    obs = rng.standard_normal((5, 3)).astype(np.float32)
    act = rng.uniform(-1, 1, (5, 2)).astype(np.float32)
    q1, q2 = test.call("call", obs, act)
    assert q1.shape == (5,) and q2.shape == (5,)
    x = np.concatenate([obs, act], axis=1)
    for name, q in (("q1", q1), ("q2", q2)):
        np.testing.assert_allclose(q, np_q(x, weights, name, 2), rtol=RTOL, atol=ATOL)


def test_twin_q_same_seed_starts_identical():
    spec = NetworkSpec(hidden=[4], activation="relu")
    spaces = {"call": {"obs": fbatch(3), "actions": fbatch(1)}}
    a = ComponentTest(TwinQNetwork(spec, seed=7), spaces, ("numpy", "eager")).get_weights()
    b = ComponentTest(TwinQNetwork(spec, seed=7), spaces, ("numpy", "eager")).get_weights()
    c = ComponentTest(TwinQNetwork(spec, seed=8), spaces, ("numpy", "eager")).get_weights()
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not all(np.array_equal(a[k], c[k]) for k in a)


def test_continuous_q_rejects_rank2_actions():
    with pytest.raises(BuildError, match="actions"):
        ComponentTest(
            ContinuousQNetwork(NetworkSpec(hidden=[4])),
            {"call": {"obs": fbatch(3), "actions": fbatch(2, 2)}},
            ("numpy", "eager"),
        )


# --------------------------------------------------------------------------- image observations: encoders
#: A small ``cnn`` encoder (one 3x3/2 convolution of 3 filters, a dense layer of 5) on uint8 7x7x2 images.
ENCODER = CNNSettings(preset="custom", conv=[{"filters": 3, "kernel": 3, "stride": 2}], hidden=[5])
IMAGES = IntBox(0, 255, shape=(7, 7, 2), dtype=np.uint8)


def np_encoder(x: np.ndarray, weights: dict, prefix: str) -> np.ndarray:
    """Reference of :data:`ENCODER` in float64, the convolution window by window: pixels / 255,
    valid 3x3 stride-2 cross-correlation (NHWC, HWIO kernel), ReLU, flatten (C order), dense, ReLU."""
    x = x.astype(np.float64) / 255.0
    w, b = weights[f"{prefix}/conv_0/W"], weights[f"{prefix}/conv_0/b"]
    k, stride = 3, 2
    size = (x.shape[1] - k) // stride + 1
    maps = np.empty((len(x), size, size, w.shape[-1]))
    for i in range(size):
        for j in range(size):
            window = x[:, i * stride : i * stride + k, j * stride : j * stride + k, :]
            maps[:, i, j] = np.einsum("byxc,yxcf->bf", window, w) + b
    h = np.maximum(maps, 0.0).reshape(len(x), -1)
    return np.maximum(h @ weights[f"{prefix}/dense_0/W"] + weights[f"{prefix}/dense_0/b"], 0.0)


def _images(rng, n):
    return rng.integers(0, 256, (n, *IMAGES.shape)).astype(np.uint8)


def test_twin_q_with_an_image_encoder_matches_numpy(backend):
    """``Q(s, a) = out(trunk(concat[encoder(s), a]))``, one encoder shared by q1 and q2."""
    encoder = NetworkMaker(CNN, ENCODER, "agent.encoder")
    test = ComponentTest(
        TwinQNetwork(NetworkSpec(hidden=[8], activation="relu"), seed=3, name="critic", encoder=encoder),
        {"call": {"obs": IMAGES.with_batch_rank(), "actions": fbatch(2)}},
        backend,
    )
    weights = test.get_weights()
    assert sorted(k for k in weights if k.startswith("encoder/")) == [
        "encoder/conv_0/W",
        "encoder/conv_0/b",
        "encoder/dense_0/W",
        "encoder/dense_0/b",
    ]
    assert weights["q1/trunk/dense_0/W"].shape == (5 + 2, 8)  # encoder features, then the action
    rng = np.random.default_rng(4)
    weights = random_weights(test, rng, 0.5)
    obs, act = _images(rng, 5), rng.uniform(-1, 1, (5, 2)).astype(np.float32)
    q1, q2 = test.call("call", obs, act)
    x = np.concatenate([np_encoder(obs, weights, "encoder"), act], axis=1)
    assert np.abs(x[:, :5]).max() > 0  # the features are not all zero: the encoder is exercised
    for name, q in (("q1", q1), ("q2", q2)):
        np.testing.assert_allclose(q, np_q(x, weights, name, 1), rtol=1e-4, atol=1e-4)


def test_sac_graph_with_an_image_encoder_matches_numpy(backend):
    """SAC on uint8 images: the actor and each twin critic have their own encoder (the target
    critic a copy of the critic's); critic loss, actor loss and actions against numpy."""
    cfg = SACConfig(actor_network={"hidden": [8]}, critic_network={"hidden": [6]}, encoder=ENCODER, tau=0.5)
    test = ComponentTest(
        SACGraph(cfg, FloatBox(-1.0, 1.0, shape=(2,)), seed=0),
        graph_spaces(IMAGES, 2),
        backend,
        compile_apis=("act", "greedy"),
    )
    weights = test.get_weights()
    assert weights["actor/trunk/dense_0/W"].shape == (5, 8) and weights["critic/q1/trunk/dense_0/W"].shape == (7, 6)
    np.testing.assert_array_equal(weights["critic/encoder/conv_0/W"], weights["critic_target/encoder/conv_0/W"])
    assert weights["actor/encoder/conv_0/W"].shape == weights["critic/encoder/conv_0/W"].shape
    rng = np.random.default_rng(6)
    weights = random_weights(test, rng, 0.5, alpha=0.3)
    n = 5
    batch = {
        "obs": _images(rng, n),
        "actions": rng.uniform(-1, 1, (n, 2)).astype(np.float32),
        "rewards": rng.standard_normal(n).astype(np.float32),
        "next_obs": _images(rng, n),
        "terminals": np.array([False, True, False, False, True]),
        "discounts": np.full(n, 0.99, np.float32),
        "weights": np.ones(n, np.float32),
        "next_noise": rng.standard_normal((n, 2)).astype(np.float32),
    }

    def actor(obs, noise):
        h = np_relu_mlp(np_encoder(obs, weights, "actor/encoder"), weights, "actor/trunk", 1)
        return np_squashed_actor(h, weights, noise)

    def q(critic, head, obs, act):
        x = np.concatenate([np_encoder(obs, weights, f"{critic}/encoder"), act], axis=1)
        return np_q(x, weights, f"{critic}/{head}", 1)

    noise = rng.standard_normal((n, 2)).astype(np.float32)
    assert_graph_matches(test, batch, noise, actor, q, alpha=0.3)
    greedy = actor(batch["obs"], noise)[2]
    np.testing.assert_allclose(test.call("greedy", batch["obs"]), greedy, rtol=1e-5, atol=1e-5)
    # Polyak moves the target critic's encoder too
    assert_polyak_halfway(test, weights, "encoder/dense_0/W", rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- SAC losses
def loss_spaces() -> dict:
    b = fbatch()
    return {
        "critic_loss": {
            "q1": b,
            "q2": b,
            "rewards": b,
            "terminals": BoolBox().with_batch_rank(),
            "discounts": b,
            "next_q1_target": b,
            "next_q2_target": b,
            "next_log_probs": b,
            "weights": b,
        },
        "actor_loss": {"log_probs": b, "q1_pi": b, "q2_pi": b},
        "temperature_loss": {"log_probs": b},
        "alpha": {},
    }


def critic_batch() -> dict[str, np.ndarray]:
    """A hand-made batch: either critic the smaller target, a termination, a truncation (which
    bootstraps: terminals False), an n-step discount and importance weights."""
    gamma = 0.9
    return {
        "q1": np.array([1.0, -2.0, 0.5, 3.0], np.float32),
        "q2": np.array([1.5, -1.0, 0.0, 2.0], np.float32),
        "rewards": np.array([1.0, -1.0, 0.5, 2.0], np.float32),
        "terminals": np.array([False, True, False, False]),
        "discounts": np.array([gamma, gamma, gamma**3, gamma], np.float32),
        "next_q1_target": np.array([2.0, 50.0, -1.0, 4.0], np.float32),
        "next_q2_target": np.array([3.0, 60.0, -2.0, 1.0], np.float32),
        "next_log_probs": np.array([-1.0, 0.3, 0.5, -0.2], np.float32),
        "weights": np.array([1.0, 0.5, 2.0, 1.0], np.float32),
    }


#: Hand-made log-probabilities and twin Q-values of policy actions for the actor and temperature losses.
LOGP = np.array([-1.0, 0.5, 2.0, -3.0], np.float32)
Q1_PI = np.array([1.0, 2.0, -1.0, 0.0], np.float32)
Q2_PI = np.array([1.5, 1.0, -2.0, 0.5], np.float32)


def _loss_test(backend, alpha=0.2, ent_coef="auto", target_entropy="auto", action_dim=3):
    test = ComponentTest(SACLoss(action_dim, ent_coef=ent_coef, target_entropy=target_entropy), loss_spaces(), backend)
    if ent_coef == "auto":
        test.set_weights({"log_alpha": np.asarray(math.log(alpha), np.float32)})
    return test


def test_critic_loss_twin_min_target_with_entropy_term(backend):
    test = _loss_test(backend, alpha=0.2)
    batch = critic_batch()
    loss, td = test.call("critic_loss", *batch.values())
    ref_loss, ref_td, y = np_critic_loss(*batch.values(), alpha=0.2)
    # The targets by hand: min of the two target critics minus alpha * logp, masked at termination.
    np.testing.assert_allclose(
        y, [1.0 + 0.9 * (2.0 + 0.2), -1.0, 0.5 + 0.729 * (-2.0 - 0.1), 2.0 + 0.9 * (1.0 + 0.04)], rtol=1e-6
    )
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(td, ref_td, rtol=1e-5, atol=1e-5)
    # The entropy term matters: with alpha -> 0 the loss changes.
    test.set_weights({"log_alpha": np.asarray(math.log(1e-8), np.float32)})
    loss0, _ = test.call("critic_loss", *batch.values())
    np.testing.assert_allclose(loss0, np_critic_loss(*batch.values(), alpha=1e-8)[0], rtol=1e-5, atol=1e-5)
    assert abs(float(loss0) - float(loss)) > 1e-3


def test_actor_and_temperature_losses(backend):
    test = _loss_test(backend, alpha=0.5, action_dim=3)
    logp, q1, q2 = LOGP, Q1_PI, Q2_PI
    loss, logp_out = test.call("actor_loss", logp, q1, q2)
    np.testing.assert_allclose(loss, np.mean(0.5 * logp - np.minimum(q1, q2)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(logp_out, logp)
    t_loss, alpha = test.call("temperature_loss", logp)
    # target entropy 'auto' = -action_dim = -3
    np.testing.assert_allclose(t_loss, -np.mean(math.log(0.5) * (logp - 3.0)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(alpha, 0.5, rtol=1e-6)
    np.testing.assert_allclose(test.call("alpha"), 0.5, rtol=1e-6)


def test_loss_gradients(grad_backend):
    """Temperature gets gradient only from loss 3; Q targets and next log-probs get none."""
    test = _loss_test(grad_backend, alpha=0.5, target_entropy=-1.5)
    logp, q1, q2 = LOGP, Q1_PI, Q2_PI
    _, grads = test.gradients("temperature_loss", logp, wrt_inputs=["log_probs"])
    np.testing.assert_allclose(grads["log_alpha"], -np.mean(logp - 1.5), rtol=1e-5)
    np.testing.assert_allclose(grads["input:log_probs"], 0.0)

    _, grads = test.gradients("actor_loss", logp, q1, q2, wrt_inputs=["log_probs", "q1_pi", "q2_pi"])
    np.testing.assert_allclose(grads["log_alpha"], 0.0)  # alpha is a constant in the actor loss
    np.testing.assert_allclose(grads["input:log_probs"], np.full(4, 0.5 / 4), rtol=1e-5)
    np.testing.assert_allclose(grads["input:q1_pi"], np.where(q1 <= q2, -0.25, 0.0), rtol=1e-5)
    np.testing.assert_allclose(grads["input:q2_pi"], np.where(q2 < q1, -0.25, 0.0), rtol=1e-5)

    batch = critic_batch()
    _, grads = test.gradients(
        "critic_loss", *batch.values(), wrt_inputs=["q1", "q2", "next_q1_target", "next_q2_target", "next_log_probs"]
    )
    _, _, y = np_critic_loss(*batch.values(), alpha=0.5)
    np.testing.assert_allclose(grads["log_alpha"], 0.0)
    for name in ("next_q1_target", "next_q2_target", "next_log_probs"):
        np.testing.assert_allclose(grads[f"input:{name}"], 0.0, err_msg=name)  # the target is a constant
    w, n = batch["weights"], len(batch["weights"])
    np.testing.assert_allclose(grads["input:q1"], w * (batch["q1"] - y) / n, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grads["input:q2"], w * (batch["q2"] - y) / n, rtol=1e-5, atol=1e-6)


def test_fixed_temperature_is_not_trainable(backend):
    test = _loss_test(backend, ent_coef=0.05)
    assert test.component.variables(trainable_only=True) == {}
    np.testing.assert_allclose(test.get_weights()["log_alpha"], math.log(0.05), rtol=1e-6)
    # 'auto' is -action_dim (3 here); a float is used as given: both through the temperature loss
    logp = LOGP
    t_loss, alpha = test.call("temperature_loss", logp)
    np.testing.assert_allclose(t_loss, -np.mean(math.log(0.05) * (logp - 3.0)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(alpha, 0.05, rtol=1e-6)
    given = _loss_test(backend, alpha=0.5, target_entropy=-0.7)
    np.testing.assert_allclose(
        given.call("temperature_loss", logp)[0], -np.mean(math.log(0.5) * (logp - 0.7)), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize(
    "kwargs", [{"ent_coef": 0.0}, {"ent_coef": "autox"}, {"init_ent_coef": -1.0}, {"target_entropy": "x"}]
)
def test_sac_loss_rejects_bad_settings(kwargs):
    with pytest.raises(ConfigError):
        SACLoss(2, **kwargs)


# --------------------------------------------------------------------------- the whole SAC graph
def graph_spaces(obs_dim, act_dim: int) -> dict:
    """The SAC graph's API spaces for observations ``fbatch(obs_dim)`` (or the space ``obs_dim``)."""
    obs, unit, noise, f = (
        fbatch(obs_dim) if isinstance(obs_dim, int) else obs_dim.with_batch_rank(),
        FloatBox(-1, 1, shape=(act_dim,)).with_batch_rank(),
        fbatch(act_dim),
        fbatch(),
    )
    return {
        "act": {"obs": obs, "noise": noise},
        "greedy": {"obs": obs},
        "critic_loss": {
            "obs": obs,
            "actions": unit,
            "rewards": f,
            "next_obs": obs,
            "terminals": BoolBox().with_batch_rank(),
            "discounts": f,
            "weights": f,
            "next_noise": noise,
        },
        "actor_loss": {"obs": obs, "noise": noise},
        "temperature_loss": {"log_probs": f},
        "alpha": {},
        "sync_target": {},
    }


def assert_graph_matches(test: ComponentTest, batch: dict, noise, actor, q, alpha: float) -> None:
    """A SAC graph's critic loss and TD errors on ``batch``, and its actor loss, log-probabilities
    and actions for ``noise``, against numpy: ``actor(obs, noise)`` is the reference policy
    ``(actions, log_prob, greedy actions)``, ``q(critic, head, obs, actions)`` the reference of
    the Q-head ``critic/head`` (``critic`` the online or ``critic_target`` the target critic)."""
    loss, td = test.call("critic_loss", *batch.values())
    next_a, next_logp, _ = actor(batch["next_obs"], batch["next_noise"])
    ref_loss, ref_td, _ = np_critic_loss(
        q("critic", "q1", batch["obs"], batch["actions"]),
        q("critic", "q2", batch["obs"], batch["actions"]),
        batch["rewards"],
        batch["terminals"],
        batch["discounts"],
        q("critic_target", "q1", batch["next_obs"], next_a),
        q("critic_target", "q2", batch["next_obs"], next_a),
        next_logp,
        batch["weights"],
        alpha=alpha,
    )
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(td, ref_td, rtol=1e-4, atol=1e-4)
    a_loss, logp = test.call("actor_loss", batch["obs"], noise)
    a, ref_logp, _ = actor(batch["obs"], noise)
    q_pi = np.minimum(q("critic", "q1", batch["obs"], a), q("critic", "q2", batch["obs"], a))
    np.testing.assert_allclose(logp, ref_logp, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(a_loss, np.mean(alpha * ref_logp - q_pi), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(test.call("act", batch["obs"], noise), a, rtol=1e-5, atol=1e-5)


def assert_polyak_halfway(test: ComponentTest, weights: dict, key: str, **tolerance) -> None:
    """After ``sync_target`` with tau 0.5, ``critic_target/<key>`` lies halfway between its value in
    ``weights`` and ``critic/<key>``: target <- 0.5 target + 0.5 online."""
    test.call("sync_target")
    after = test.get_weights()[f"critic_target/{key}"]
    np.testing.assert_allclose(
        after, 0.5 * weights[f"critic_target/{key}"] + 0.5 * weights[f"critic/{key}"], **tolerance
    )


def test_sac_graph_critic_target_and_actor_loss_match_numpy(backend):
    """The whole wiring: next actions from the actor, target twin-Q min, entropy term, masks."""
    cfg = SACConfig(actor_network={"hidden": [8, 8]}, critic_network={"hidden": [8, 6]}, tau=0.5)
    action_space = FloatBox(-2.0, 2.0, shape=(2,))
    test = ComponentTest(
        SACGraph(cfg, action_space, seed=0), graph_spaces(3, 2), backend, compile_apis=("act", "greedy")
    )
    weights = test.get_weights()
    assert all(
        np.array_equal(weights[k], weights[k.replace("critic/", "critic_target/")])
        for k in weights
        if k.startswith("critic/")
    )
    rng = np.random.default_rng(5)
    weights = random_weights(test, rng, 0.5, alpha=0.3)
    n = 6
    batch = {
        "obs": rng.standard_normal((n, 3)),
        "actions": rng.uniform(-1, 1, (n, 2)),
        "rewards": rng.standard_normal(n),
        "next_obs": rng.standard_normal((n, 3)),
        "terminals": np.array([False, True, False, False, True, False]),
        "discounts": np.full(n, 0.99),
        "weights": np.ones(n),
        "next_noise": rng.standard_normal((n, 2)),
    }
    batch = {k: v.astype(np.float32) if v.dtype.kind == "f" else v for k, v in batch.items()}

    def actor(obs, noise):
        return np_squashed_actor(np_relu_mlp(obs, weights, "actor/trunk", 2), weights, noise)

    def q(critic, head, obs, act):
        return np_q(np.concatenate([obs, act], axis=1), weights, f"{critic}/{head}", 2)

    noise = rng.standard_normal((n, 2)).astype(np.float32)
    assert_graph_matches(test, batch, noise, actor, q, alpha=0.3)
    assert_polyak_halfway(test, weights, "q2/out/W", rtol=1e-6)


# --------------------------------------------------------------------------- config
def test_sac_config_defaults_and_validation():
    cfg = SACConfig()
    assert (cfg.gamma, cfg.tau, cfg.batch_size, cfg.ent_coef, cfg.target_entropy) == (0.99, 0.005, 256, "auto", "auto")
    assert cfg.optimizer.learning_rate == 3e-4 and cfg.optimizer.max_grad_norm is None
    assert SACConfig(ent_coef=0.1).ent_coef == 0.1
    for bad in (
        {"tau": 0.0},
        {"tau": 1.5},
        {"gamma": 0.0},
        {"ent_coef": -0.1},
        {"ent_coef": "automatic"},
        {"target_entropy": "high"},
        {"batch_size": 0},
        {"learning_starts": -1},
        {"unknown": 1},
        {"type": "dqn"},
        {"log_std_bounds": (2.0, -5.0)},
        {"n_step": 0},
    ):
        with pytest.raises(Exception):
            SACConfig(**bad)


def test_sac_registered_and_config_file_validates():
    from pathlib import Path

    from rlgraph_core.config.run import load_config_file, validate_config
    from rlgraph_core.plugins import get_plugin_manager

    pm = get_plugin_manager()
    agent_cls, model = pm.get("agents", "sac")
    assert model is SACConfig and agent_cls.__name__ == "SACAgent"
    for name in ("twin_q_network", "sac_loss", "continuous_q_network"):
        assert name in pm.names("components")
    path = Path(__file__).resolve().parents[2] / "configs" / "sac_pendulum.yaml"
    raw = load_config_file(path)
    if raw["train"].get("backend", "torch") not in pm.names("backends"):
        raw["train"]["backend"] = next(iter(pm.names("backends")), raw["train"]["backend"])
    if raw["train"]["backend"] not in pm.names("backends"):
        pytest.skip("no backend installed to validate the config's train.backend against")
    cfg = validate_config(raw)
    assert cfg.agent.type == "sac" and cfg.env.id == "Pendulum-v1"
    with pytest.raises(ConfigError, match="agent.tau"):
        validate_config({"agent": {"type": "sac", "tau": 2.0}, "env": {"id": "Pendulum-v1"}})


# --------------------------------------------------------------------------- agent (autodiff backends)
def _agent(backend_pair, **agent_kwargs):
    from rlgraph_core.agents.sac import SACAgent

    name, mode = backend_pair
    cfg = SACConfig(
        **{
            "actor_network": {"hidden": [16]},
            "critic_network": {"hidden": [16]},
            "batch_size": 8,
            "learning_starts": 4,
            **agent_kwargs,
        }
    )
    return SACAgent(
        cfg,
        FloatBox(-np.inf, np.inf, shape=(3,)),
        FloatBox(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32)),
        make_test_backend(name, mode),
        seed=0,
        num_envs=2,
    )


def test_sac_agent_acts_in_bounds_stores_unit_actions_and_learns(grad_backend, tmp_path):
    agent = _agent(grad_backend)
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((2, 3)).astype(np.float32)
    before = agent.get_weights()
    for t in range(12):
        actions = agent.act(obs)
        assert actions.shape == (2, 2) and actions.dtype == np.float32
        assert np.all(actions[:, 0] >= -2) and np.all(actions[:, 0] <= 2)
        assert np.all(actions[:, 1] >= 0) and np.all(actions[:, 1] <= 1)
        next_obs = rng.standard_normal((2, 3)).astype(np.float32)
        agent.observe(
            obs, actions, np.ones(2, np.float32), next_obs, np.array([t == 5, False]), np.array([False, t == 7])
        )
        agent.update()
        obs = next_obs
    assert agent.updates == 9  # from the 4th vector step on: 8 transitions >= batch 8, past learning_starts
    sample = agent.memory.sample(64)
    assert sample["actions"].min() >= -1.0 and sample["actions"].max() <= 1.0
    stored = agent.memory.state_dict()
    assert stored["data/terminals"].sum() == 1  # only the termination; the truncation bootstraps
    after = agent.get_weights()
    for part in ("actor/", "critic/", "critic_target/", "sac_loss/log_alpha"):
        assert any(not np.array_equal(before[k], after[k]) for k in before if k.startswith(part)), part
    metrics = agent.metrics()
    assert {"critic_loss", "actor_loss", "alpha", "entropy", "temperature_loss"} <= set(metrics)
    greedy = agent.act(obs, explore=False)
    np.testing.assert_array_equal(greedy, agent.act(obs, explore=False))

    # save / load into a fresh agent reproduces the greedy policy and the optimizer state
    agent.save(tmp_path / "ckpt", {"config": {}})
    other = _agent(grad_backend)
    other.load(tmp_path / "ckpt")
    np.testing.assert_allclose(other.act(obs, explore=False), greedy, rtol=1e-6)
    assert other.updates == agent.updates and len(other.memory) == len(agent.memory)
    arrays, _ = agent.get_state()
    assert any(k.startswith("optimizer/temperature/") for k in arrays)


def test_sac_agent_fixed_temperature_has_no_temperature_step(grad_backend):
    agent = _agent(grad_backend, ent_coef=0.2)
    assert agent.temperature_step is None
    assert agent.metrics()["alpha"] == pytest.approx(0.2, rel=1e-6)


def test_sac_agent_rejects_discrete_and_unbounded_actions(grad_backend):
    from rlgraph_core.agents.sac import SACAgent
    from rlgraph_core.spaces import Discrete

    backend = make_test_backend(*grad_backend)
    obs = FloatBox(shape=(3,))
    with pytest.raises(ConfigError, match="continuous"):
        SACAgent(SACConfig(), obs, Discrete(2), backend)
    with pytest.raises(ConfigError, match="finite"):
        SACAgent(SACConfig(), obs, FloatBox(shape=(2,)), backend)
