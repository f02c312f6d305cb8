"""Policy-gradient components alone, from spaces, against plain numpy references.

GAE and discounted returns (mixed terminated/truncated flags across vector envs), the PPO and A2C
losses on hand-made batches, the actor-critic forward pass, the running observation normaliser and
the rollout buffer. Each backend-dependent test runs on every available ``(backend, mode)`` pair:
the numpy harness always, and every installed backend plugin (torch, tf ...) eager and static.
The references are written out here as straightforward Python/numpy loops, independently of the
components.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlgraph_core.components.actor_critic import ActorCritic, RunningObsNormalizer
from rlgraph_core.components.gae import GAE
from rlgraph_core.components.network import NetworkSpec
from rlgraph_core.agents.ppo import PPOLoss
from rlgraph_core.components.pg_losses import A2CLoss
from rlgraph_core.memories import RolloutBuffer, iterate_minibatches
from rlgraph_core.spaces import BoolBox, Discrete, FloatBox, IntBox
from rlgraph_core.testing import ComponentTest, backend_params

RTOL, ATOL = 1e-5, 1e-5
CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def fbatch(*shape) -> FloatBox:
    """A batched float box of value shape ``shape``."""
    return FloatBox(shape=shape).with_batch_rank()


@pytest.fixture(params=backend_params())
def backend(request):
    """A ``(backend_name, mode)`` pair: numpy-eager, and each plugin backend eager and static."""
    return request.param


@pytest.fixture(params=[p for p in backend_params() if p.values[0][0] != "numpy"])
def autodiff_backend(request):
    """A framework backend (with gradients), eager and static; skipped when none is installed."""
    return request.param


# --------------------------------------------------------------------------- GAE
def rollout_3_envs(T: int = 8, seed: int = 0) -> dict[str, np.ndarray]:
    """A ``[T, 3]`` rollout with terminations and truncations at different steps in each env.

    env 0: terminated at t=2, truncated at t=5; env 1: truncated at t=1 and at the last step;
    env 2: terminated at the last step and at t=4 (never truncated); t=6 has no episode end.
    """
    rng = np.random.default_rng(seed)
    terminated = np.zeros((T, 3), bool)
    truncated = np.zeros((T, 3), bool)
    terminated[2, 0] = truncated[5, 0] = True
    truncated[1, 1] = truncated[T - 1, 1] = True
    terminated[4, 2] = terminated[T - 1, 2] = True
    return {
        "rewards": rng.uniform(-1, 2, (T, 3)).astype(np.float32),
        "values": rng.standard_normal((T, 3)).astype(np.float32),
        "next_values": rng.standard_normal((T, 3)).astype(np.float32),
        "terminated": terminated,
        "truncated": truncated,
    }


def np_gae(r, v, v_next, term, trunc, gamma, lam):
    """Reference GAE: a plain Python loop per env, backwards in time (float64)."""
    T, N = r.shape
    adv = np.zeros((T, N))
    for n in range(N):
        running = 0.0
        for t in reversed(range(T)):
            if term[t, n]:
                delta = r[t, n] - v[t, n]  # no bootstrap after termination
                running = delta
            elif trunc[t, n]:
                delta = r[t, n] + gamma * v_next[t, n] - v[t, n]  # bootstrap from V(final obs)
                running = delta
            else:
                delta = r[t, n] + gamma * v_next[t, n] - v[t, n]
                running = delta + gamma * lam * running
            adv[t, n] = running
    return adv, adv + v


def np_discounted_returns(r, v_next, term, trunc, gamma):
    """Reference bootstrapped discounted returns: a plain Python loop per env."""
    T, N = r.shape
    out = np.zeros((T, N))
    for n in range(N):
        following = v_next[T - 1, n]
        for t in reversed(range(T)):
            if term[t, n]:
                g = r[t, n]
            elif trunc[t, n]:
                g = r[t, n] + gamma * v_next[t, n]
            else:
                g = r[t, n] + gamma * following
            out[t, n] = g
            following = g
    return out


GAE_SPACES = {
    "advantages": {
        "rewards": fbatch(3),
        "values": fbatch(3),
        "next_values": fbatch(3),
        "terminated": BoolBox(shape=(3,)).with_batch_rank(),
        "truncated": BoolBox(shape=(3,)).with_batch_rank(),
    },
    "discounted_returns": {
        "rewards": fbatch(3),
        "next_values": fbatch(3),
        "terminated": BoolBox(shape=(3,)).with_batch_rank(),
        "truncated": BoolBox(shape=(3,)).with_batch_rank(),
    },
}


@pytest.mark.parametrize("gamma,lam", [(0.99, 0.95), (0.9, 0.0), (0.98, 1.0)])
def test_gae_mixed_episode_ends_across_envs(backend, gamma, lam):
    test = ComponentTest(GAE(gamma, lam), GAE_SPACES, backend)
    ro = rollout_3_envs()
    adv, ret = test.call("advantages", *ro.values())
    ref_adv, ref_ret = np_gae(*ro.values(), gamma, lam)
    assert adv.shape == ret.shape == (8, 3) and adv.dtype == np.float32
    np.testing.assert_allclose(adv, ref_adv, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(ret, ref_ret, rtol=RTOL, atol=ATOL)


def test_gae_bootstrap_semantics(backend):
    """Hand-checked numbers: terminal steps ignore V(next); truncated ones use it; no carry across ends."""
    test = ComponentTest(GAE(0.5, 1.0), GAE_SPACES, backend)
    r = np.ones((2, 3), np.float32)
    v = np.zeros((2, 3), np.float32)
    v_next = np.full((2, 3), 10.0, np.float32)
    term = np.array([[True, False, False], [False, False, False]])
    trunc = np.array([[False, True, False], [False, False, False]])
    adv, _ = test.call("advantages", r, v, v_next, term, trunc)
    # env 0: t0 terminal -> 1; env 1: t0 truncated -> 1 + 0.5 * 10 = 6; env 2: t0 continues:
    # delta0 = 1 + 0.5*10 - 0 = 6, A0 = 6 + 0.5 * A1; A1 = 1 + 0.5 * 10 = 6 -> A0 = 9.
    np.testing.assert_allclose(adv, [[1.0, 6.0, 9.0], [6.0, 6.0, 6.0]], rtol=RTOL)


def test_discounted_returns_match_reference_and_gae_lambda_one(backend):
    gamma = 0.97
    test = ComponentTest(GAE(gamma, 1.0), GAE_SPACES, backend)
    ro = rollout_3_envs(seed=3)
    # For the equality with GAE(lambda=1), V(s_{t+1}) must be consistent with the next step's
    # V(s_t) wherever the episode continues (as it is in a real rollout).
    cont = ~(ro["terminated"] | ro["truncated"])
    ro["next_values"][:-1][cont[:-1]] = ro["values"][1:][cont[:-1]]
    g = test.call("discounted_returns", ro["rewards"], ro["next_values"], ro["terminated"], ro["truncated"])
    np.testing.assert_allclose(
        g,
        np_discounted_returns(ro["rewards"], ro["next_values"], ro["terminated"], ro["truncated"], gamma),
        rtol=RTOL,
        atol=ATOL,
    )
    _, ret = test.call("advantages", *ro.values())
    np.testing.assert_allclose(g, ret, rtol=1e-4, atol=1e-4)


def test_gae_rejects_mismatched_env_counts():
    from rlgraph_core.errors import BuildError

    spaces = {k: dict(v) for k, v in GAE_SPACES.items()}
    spaces["advantages"]["values"] = fbatch(4)
    with pytest.raises(BuildError, match="same number of envs"):
        ComponentTest(GAE(), spaces, ("numpy", "eager"))


# --------------------------------------------------------------------------- PPO loss
PPO_SPACES = {
    "loss": {
        "log_probs": fbatch(),
        "old_log_probs": fbatch(),
        "entropy": fbatch(),
        "values": fbatch(),
        "old_values": fbatch(),
        "advantages": fbatch(),
        "returns": fbatch(),
        "clip_range": FloatBox(shape=()),
    }
}


def ppo_batch() -> dict[str, np.ndarray]:
    """A hand-made batch whose ratios fall inside and outside [1 - 0.2, 1 + 0.2] for both signs
    of the advantage, and whose values move more and less than the value clip range."""
    ratio = np.array([1.0, 1.5, 0.6, 1.5, 0.6, 1.1, 0.9, 1.25])
    old = np.array([-0.5, -1.2, -0.3, -2.0, -0.7, -1.0, -0.1, -0.9])
    return {
        "log_probs": (old + np.log(ratio)).astype(np.float32),
        "old_log_probs": old.astype(np.float32),
        "entropy": np.array([0.6, 0.5, 0.7, 0.4, 0.69, 0.3, 0.55, 0.65], np.float32),
        "values": np.array([1.0, 0.5, -0.2, 2.0, 0.0, 1.5, -1.0, 0.3], np.float32),
        "old_values": np.array([0.9, 0.0, 0.5, 1.95, 0.1, 1.0, -0.2, 0.31], np.float32),
        "advantages": np.array([0.5, 1.0, 1.0, -1.0, -1.0, 2.0, -0.5, 0.8], np.float32),
        "returns": np.array([1.2, 1.0, 0.4, 1.0, -0.5, 2.0, -0.4, 0.9], np.float32),
        "clip_range": np.float32(0.2),
    }


def np_ppo_loss(b, vf_coef, ent_coef, clip_vf, normalize):
    """Reference PPO-clip loss, written sample by sample (float64)."""
    eps = float(b["clip_range"])
    adv = b["advantages"].astype(np.float64)
    if normalize:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg, vf, kl, clipped = [], [], [], []
    for i in range(len(adv)):
        ratio = np.exp(float(b["log_probs"][i]) - float(b["old_log_probs"][i]))
        unclipped_obj = ratio * adv[i]
        clipped_obj = min(max(ratio, 1 - eps), 1 + eps) * adv[i]
        pg.append(-min(unclipped_obj, clipped_obj))  # pessimistic objective
        err = (float(b["values"][i]) - float(b["returns"][i])) ** 2
        if clip_vf is not None:
            v_c = float(b["old_values"][i]) + min(
                max(float(b["values"][i]) - float(b["old_values"][i]), -clip_vf), clip_vf
            )
            err = max(err, (v_c - float(b["returns"][i])) ** 2)
        vf.append(err)
        kl.append((ratio - 1) - np.log(ratio))
        clipped.append(abs(ratio - 1) > eps)
    pg_loss, vf_loss, ent = np.mean(pg), np.mean(vf), np.mean(b["entropy"].astype(np.float64))
    return (pg_loss + vf_coef * vf_loss - ent_coef * ent, pg_loss, vf_loss, ent, np.mean(kl), np.mean(clipped))


def test_ppo_batch_exercises_every_branch():
    b = ppo_batch()
    ratio = np.exp(b["log_probs"] - b["old_log_probs"])
    adv = b["advantages"]
    assert ((ratio > 1.2) & (adv > 0)).any() and ((ratio > 1.2) & (adv < 0)).any()
    assert ((ratio < 0.8) & (adv > 0)).any() and ((ratio < 0.8) & (adv < 0)).any()
    moved = np.abs(b["values"] - b["old_values"])
    assert (moved > 0.2).any() and (moved < 0.2).any()
    assert np_ppo_loss(b, 0.5, 0.0, 0.2, False)[2] != np_ppo_loss(b, 0.5, 0.0, None, False)[2]


@pytest.mark.parametrize("clip_vf", [None, 0.2], ids=["no-vclip", "vclip"])
@pytest.mark.parametrize("normalize", [False, True], ids=["raw-adv", "norm-adv"])
def test_ppo_loss(backend, clip_vf, normalize):
    vf_coef, ent_coef = 0.5, 0.01
    test = ComponentTest(PPOLoss(vf_coef, ent_coef, clip_vf, normalize), PPO_SPACES, backend)
    b = ppo_batch()
    out = test.call("loss", *b.values())
    ref = np_ppo_loss(b, vf_coef, ent_coef, clip_vf, normalize)
    names = ("loss", "pg_loss", "vf_loss", "entropy", "approx_kl", "clip_fraction")
    for name, got, want in zip(names, out, ref):
        assert np.shape(got) == (), name
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=name)
    np.testing.assert_allclose(out[5], 5 / 8)  # ratios 1.5, 0.6, 1.5, 0.6, 1.25 are outside the clip range


def test_ppo_loss_clip_range_is_an_input(backend):
    test = ComponentTest(PPOLoss(0.5, 0.0, None, False), PPO_SPACES, backend)
    b = ppo_batch()
    for eps in (0.1, 0.3):
        b["clip_range"] = np.float32(eps)
        np.testing.assert_allclose(
            test.call("loss", *b.values())[0], np_ppo_loss(b, 0.5, 0.0, None, False)[0], rtol=RTOL, atol=ATOL
        )


def test_ppo_loss_gradient_vanishes_where_clipped(autodiff_backend):
    """d loss / d log pi is 0 exactly where the clipped term is the active (pessimistic) one."""
    test = ComponentTest(PPOLoss(0.5, 0.0, None, False), PPO_SPACES, autodiff_backend)
    b = ppo_batch()
    _, grads = test.gradients("loss", *b.values(), wrt_inputs=["log_probs"])
    ratio = np.exp(b["log_probs"].astype(np.float64) - b["old_log_probs"])
    adv = b["advantages"].astype(np.float64)
    active_clip = ((ratio > 1.2) & (adv > 0)) | ((ratio < 0.8) & (adv < 0))
    expected = np.where(active_clip, 0.0, -adv * ratio / len(adv))  # d/dlogp of -mean(A * ratio)
    np.testing.assert_allclose(grads["input:log_probs"], expected, rtol=1e-4, atol=1e-6)


# --------------------------------------------------------------------------- A2C loss
A2C_SPACES = {
    "loss": {
        "log_probs": fbatch(),
        "entropy": fbatch(),
        "values": fbatch(),
        "advantages": fbatch(),
        "returns": fbatch(),
    }
}


@pytest.mark.parametrize("normalize", [False, True], ids=["raw-adv", "norm-adv"])
def test_a2c_loss(backend, normalize):
    vf_coef, ent_coef = 0.25, 0.05
    test = ComponentTest(A2CLoss(vf_coef, ent_coef, normalize), A2C_SPACES, backend)
    b = ppo_batch()
    args = [b["log_probs"], b["entropy"], b["values"], b["advantages"], b["returns"]]
    loss, pg, vf, ent = test.call("loss", *args)
    adv = b["advantages"].astype(np.float64)
    if normalize:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    ref_pg = -np.mean(adv * b["log_probs"])
    ref_vf = np.mean((b["values"].astype(np.float64) - b["returns"]) ** 2)
    ref_ent = np.mean(b["entropy"].astype(np.float64))
    np.testing.assert_allclose(pg, ref_pg, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(vf, ref_vf, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(ent, ref_ent, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(loss, ref_pg + vf_coef * ref_vf - ent_coef * ref_ent, rtol=RTOL, atol=ATOL)


def test_a2c_advantages_carry_no_gradient(autodiff_backend):
    test = ComponentTest(A2CLoss(0.5, 0.0), A2C_SPACES, autodiff_backend)
    b = ppo_batch()
    args = [b["log_probs"], b["entropy"], b["values"], b["advantages"], b["returns"]]
    _, grads = test.gradients("loss", *args, wrt_inputs=["advantages", "log_probs"])
    np.testing.assert_array_equal(grads["input:advantages"], 0.0)
    np.testing.assert_allclose(grads["input:log_probs"], -b["advantages"] / 8, rtol=1e-5)


# --------------------------------------------------------------------------- actor-critic
def np_mlp(x, weights, prefix, n_layers, activation=np.tanh):
    """Reference MLP trunk (float64)."""
    h = x.astype(np.float64)
    for i in range(n_layers):
        h = activation(h @ weights[f"{prefix}/dense_{i}/W"] + weights[f"{prefix}/dense_{i}/b"])
    return h


def np_log_softmax(z):
    """Reference log-softmax over the last axis."""
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


@pytest.mark.parametrize("shared", [False, True], ids=["separate", "shared"])
def test_actor_critic_discrete(backend, shared):
    spec = NetworkSpec(hidden=[5, 4], activation="tanh", initializer="orthogonal")
    ac = ActorCritic(spec, Discrete(3), shared_trunk=shared, seed=0)
    obs_b, act_b = fbatch(4), IntBox(0, 2, shape=()).with_batch_rank()
    with np.errstate(divide="ignore"):  # the build samples with all-zero uniform noise: log(0)
        test = ComponentTest(
            ac,
            {
                "act": {"obs": obs_b, "noise": FloatBox(0.0, 1.0, shape=(3,)).with_batch_rank()},
                "deterministic": {"obs": obs_b},
                "value": {"obs": obs_b},
                "evaluate": {"obs": obs_b, "actions": act_b},
            },
            backend,
        )
    w = test.get_weights()
    trunks = ["trunk"] if shared else ["pi_trunk", "vf_trunk"]
    assert sorted(w) == sorted(
        [f"{t}/dense_{i}/{p}" for t in trunks for i in (0, 1) for p in "Wb"]
        + ["distribution/logits/W", "distribution/logits/b", "value_head/W", "value_head/b"]
    )
    rng = np.random.default_rng(1)
    w = {k: rng.standard_normal(v.shape).astype(np.float32) for k, v in w.items()}
    test.set_weights(w)
    obs = rng.standard_normal((6, 4)).astype(np.float32)
    h_pi = np_mlp(obs, w, trunks[0], 2)
    h_v = np_mlp(obs, w, trunks[-1], 2)
    logits = h_pi @ w["distribution/logits/W"] + w["distribution/logits/b"]
    value = (h_v @ w["value_head/W"] + w["value_head/b"])[:, 0]
    logp_all = np_log_softmax(logits)
    noise = rng.uniform(1e-6, 1.0, (6, 3)).astype(np.float32)
    ref_actions = np.argmax(logits - np.log(-np.log(noise.astype(np.float64))), axis=1)

    actions, log_probs, values = test.call("act", obs, noise)
    np.testing.assert_array_equal(actions, ref_actions)
    np.testing.assert_allclose(log_probs, logp_all[np.arange(6), ref_actions], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(values, value, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(test.call("deterministic", obs), np.argmax(logits, axis=1))
    np.testing.assert_allclose(test.call("value", obs), value, rtol=1e-4, atol=1e-4)
    given = np.array([0, 1, 2, 2, 1, 0])
    lp, ent, v = test.call("evaluate", obs, given)
    np.testing.assert_allclose(lp, logp_all[np.arange(6), given], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ent, -(np.exp(logp_all) * logp_all).sum(axis=1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(v, value, rtol=1e-4, atol=1e-4)


def test_actor_critic_gaussian(backend):
    spec = NetworkSpec(hidden=[6], activation="tanh", initializer="orthogonal")
    ac = ActorCritic(spec, FloatBox(-2.0, 2.0, shape=(2,)), log_std_init=-0.5, seed=1)
    obs_b, act_b = fbatch(3), fbatch(2)
    test = ComponentTest(
        ac,
        {
            "act": {"obs": obs_b, "noise": act_b},
            "deterministic": {"obs": obs_b},
            "value": {"obs": obs_b},
            "evaluate": {"obs": obs_b, "actions": act_b},
        },
        backend,
    )
    w = test.get_weights()
    np.testing.assert_array_equal(w["distribution/log_std"], [-0.5, -0.5])
    rng = np.random.default_rng(2)
    w = {k: (rng.standard_normal(v.shape) * 0.5).astype(np.float32) for k, v in w.items()}
    test.set_weights(w)
    obs = rng.standard_normal((5, 3)).astype(np.float32)
    mean = np_mlp(obs, w, "pi_trunk", 1) @ w["distribution/mean/W"] + w["distribution/mean/b"]
    log_std = w["distribution/log_std"].astype(np.float64)
    noise = rng.standard_normal((5, 2)).astype(np.float32)
    actions, log_probs, _ = test.call("act", obs, noise)
    ref_actions = mean + np.exp(log_std) * noise
    np.testing.assert_allclose(actions, ref_actions, rtol=1e-4, atol=1e-4)
    ref_lp = np.sum(-0.5 * noise.astype(np.float64) ** 2 - log_std - 0.5 * np.log(2 * np.pi), axis=1)
    np.testing.assert_allclose(log_probs, ref_lp, rtol=1e-4, atol=1e-4)
    lp, ent, _ = test.call("evaluate", obs, ref_actions.astype(np.float32))
    np.testing.assert_allclose(lp, ref_lp, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ent, np.full(5, np.sum(log_std + 0.5 * np.log(2 * np.pi * np.e))), rtol=1e-5)
    np.testing.assert_allclose(test.call("deterministic", obs), mean, rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------- observation normaliser
def test_running_obs_normalizer(backend):
    norm = RunningObsNormalizer((3,), clip=5.0, epsilon=1e-4)
    test = ComponentTest(norm, {"call": {"x": fbatch(3)}, "update": {"x": fbatch(3)}}, backend)
    norm.reset()  # the build ran update() on a zero batch
    assert set(test.component.variables(trainable_only=True)) == set()
    rng = np.random.default_rng(0)
    batches = [rng.normal([1.0, -2.0, 10.0], [0.5, 2.0, 3.0], (n, 3)).astype(np.float32) for n in (7, 20, 13)]
    for b in batches:
        test.call("update", b)
    data = np.concatenate(batches).astype(np.float64)
    count = 1e-4 + len(data)
    # Reference: the exact statistics of the prior (mean 0, var 1, weight eps) and the data.
    mean = (data.sum(0)) / count
    var = (1e-4 * (1.0 + mean**2) + ((data - mean) ** 2).sum(0)) / count
    w = test.get_weights()
    np.testing.assert_allclose(w["mean"], mean, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(w["var"], var, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(w["count"], count, rtol=1e-6)
    x = np.array([[1.0, -2.0, 10.0], [100.0, -100.0, 10.0]], np.float32)
    ref = np.clip((x - mean) / np.sqrt(var + 1e-4), -5.0, 5.0)
    np.testing.assert_allclose(test.call("call", x), ref, rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------- rollout buffer
def fill_buffer(T=5, N=3) -> RolloutBuffer:
    """A full buffer whose values encode (step, env)."""
    buf = RolloutBuffer(T, N, seed=0)
    for t in range(T):
        buf.add(
            obs=np.full((N, 2), t, np.float32) + np.arange(N)[:, None] / 10,
            actions=np.arange(N) + 10 * t,
            rewards=np.ones(N, np.float32) * t,
            terminated=np.zeros(N, bool),
        )
    return buf


def test_rollout_buffer_layout_and_reset():
    buf = fill_buffer()
    assert buf.full and len(buf) == 5 and buf.size == 15
    data = buf.data()
    assert data["obs"].shape == (5, 3, 2) and data["actions"].shape == (5, 3) and data["terminated"].dtype == bool
    np.testing.assert_array_equal(data["actions"][2], [20, 21, 22])
    flat = buf.flat()
    assert flat["obs"].shape == (15, 2)
    np.testing.assert_array_equal(flat["actions"], (np.arange(3)[None] + 10 * np.arange(5)[:, None]).ravel())
    with pytest.raises(RuntimeError, match="full"):
        buf.add(obs=np.zeros((3, 2)), actions=np.zeros(3), rewards=np.zeros(3), terminated=np.zeros(3, bool))
    buf.reset()
    assert len(buf) == 0 and not buf.full
    with pytest.raises(KeyError):
        buf.add(obs=np.zeros((3, 2)))
    with pytest.raises(ValueError, match="number of envs"):
        buf.add(obs=np.zeros((4, 2)), actions=np.zeros(4), rewards=np.zeros(4), terminated=np.zeros(4, bool))


@pytest.mark.parametrize("batch_size", [5, 4, 15, 1])
def test_rollout_minibatches_cover_every_sample_once_per_epoch(batch_size):
    buf = fill_buffer()
    n_epochs = 3
    per_epoch = -(-15 // batch_size)
    batches = list(buf.minibatches(batch_size, n_epochs))
    assert len(batches) == n_epochs * per_epoch
    flat = buf.flat()
    orders = []
    for e in range(n_epochs):
        epoch = batches[e * per_epoch : (e + 1) * per_epoch]
        assert all(len(b["indices"]) == batch_size for b in epoch[:-1])
        idx = np.concatenate([b["indices"] for b in epoch])
        assert sorted(idx.tolist()) == list(range(15))  # every sample exactly once
        for b in epoch:  # fields stay aligned
            np.testing.assert_array_equal(b["actions"], flat["actions"][b["indices"]])
            np.testing.assert_array_equal(b["obs"], flat["obs"][b["indices"]])
        orders.append(idx)
    if batch_size < 15:
        assert not all(np.array_equal(orders[0], o) for o in orders[1:])  # reshuffled each epoch


def test_iterate_minibatches_checks_sizes():
    with pytest.raises(ValueError, match="same number of samples"):
        list(iterate_minibatches({"a": np.zeros(3), "b": np.zeros(4)}, 2))
    with pytest.raises(ValueError, match="positive"):
        list(iterate_minibatches({"a": np.zeros(3)}, 0))


# --------------------------------------------------------------------------- configs
@pytest.mark.parametrize("name", ["ppo_cartpole.yaml", "a2c_cartpole.yaml", "ppo_pendulum.yaml"])
def test_shipped_configs_validate(name):
    """Every section validates (the backend named in ``train`` need not be installed here)."""
    from rlgraph_core.agents.a2c import A2CConfig
    from rlgraph_core.agents.ppo import PPOConfig
    from rlgraph_core.config.sections import EnvConfig, TrainConfig
    from rlgraph_core.config.run import load_config_file

    raw = load_config_file(CONFIGS / name)
    declared = raw["agent"]["type"]  # the file names its algorithm; the file name says the same
    assert declared == name.split("_")[0]
    agent = {"ppo": PPOConfig, "a2c": A2CConfig}[declared].model_validate(raw["agent"])
    EnvConfig.model_validate(raw["env"])
    TrainConfig.model_validate(raw["train"])
    # the file's plain values survive validation (none is dropped or coerced to a default)
    for section, values in (("agent", raw["agent"]), ("optimizer", raw["agent"].get("optimizer", {}))):
        model = agent if section == "agent" else agent.optimizer
        for key, value in values.items():
            if not isinstance(value, dict):
                got = getattr(model, key)
                got = getattr(got, "type", got)  # a component slot's string shorthand names its type
                assert got == value, f"{name}: {section}.{key}"


def test_pg_configs_reject_bad_values():
    from rlgraph_core.agents.a2c import A2CConfig
    from rlgraph_core.agents.ppo import PPOConfig
    from rlgraph_core.config.run import validate_config
    from rlgraph_core.errors import ConfigError

    for bad, field in [
        ({"clip_range": -0.1}, "clip_range"),
        ({"gae_lambda": 1.5}, "gae_lambda"),
        ({"n_epochs": 0}, "n_epochs"),
        ({"target_kl": 0}, "target_kl"),
        ({"clip_rnage": 0.2}, "clip_range"),
        ({"optimizer": {"max_grad_norm": -1}}, "max_grad_norm"),
        ({"clip_range": {"type": "linear", "start": 0.2, "end": -0.1, "steps": 10}}, "clip_range"),
    ]:
        with pytest.raises(ConfigError, match=field):
            validate_config({"agent": {"type": "ppo", **bad}, "env": {"id": "CartPole-v1"}})
    with pytest.raises(ConfigError, match="n_steps"):
        validate_config({"agent": {"type": "a2c", "n_steps": 0}, "env": {"id": "CartPole-v1"}})
    # Partly given sections keep the algorithm's own defaults, not the generic ones.
    a2c = A2CConfig.model_validate({"type": "a2c", "optimizer": {"learning_rate": 0.001}})
    assert a2c.optimizer.type == "rmsprop" and a2c.optimizer.eps == 1e-5 and a2c.optimizer.max_grad_norm == 0.5
    ppo = PPOConfig.model_validate({"type": "ppo", "network": {"hidden": [32]}})
    assert ppo.network.activation == "tanh" and ppo.network.initializer == "orthogonal"
