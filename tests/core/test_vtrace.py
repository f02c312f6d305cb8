"""The V-trace component alone, from spaces, against a plain numpy reference of the paper's formulas.

The reference (:func:`np_vtrace`) is written from Espeholt et al. 2018 (IMPALA), eq. (1), as the
explicit *sum* over the rest of each episode segment, not as the component's backward recursion::

    vs_s = V(x_s) + sum_{t=s}^{end} gamma^{t-s} (prod_{i=s}^{t-1} c_i) delta_t
    delta_t = rho_t (r_t + gamma V(x_{t+1}) - V(x_t)),  rho_t = min(rho_bar, pi/mu),
    c_i = lambda min(c_bar, pi/mu),  pg_adv_s = rho_pg_s (r_s + gamma vs_{s+1} - V(x_s))

where a segment ends at a termination (no bootstrap: ``V(x_{t+1}) = 0``), a truncation or the
rollout's last step (bootstrapped: ``vs_{t+1} = V(x_{t+1})``). The IMPALA loss on V-trace targets and
the shipped IMPALA config are checked here too. Each test runs on every available
``(backend, mode)`` pair: the numpy harness always, and each installed backend eager and static.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlgraph_core.components.gae import GAE
from rlgraph_core.components.pg_losses import ImpalaLoss
from rlgraph_core.components.vtrace import VTrace
from rlgraph_core.errors import BuildError
from rlgraph_core.spaces import BoolBox, FloatBox
from rlgraph_core.testing import ComponentTest, backend_params

RTOL, ATOL = 1e-5, 1e-5
CONFIGS = Path(__file__).resolve().parents[2] / "configs"
T, N = 8, 3


def fbatch(*shape) -> FloatBox:
    """A batched float box of value shape ``shape`` (batch rank = time)."""
    return FloatBox(shape=shape).with_batch_rank()


def bbatch(*shape) -> BoolBox:
    """A batched bool box of value shape ``shape``."""
    return BoolBox(shape=shape).with_batch_rank()


SPACES = {
    "targets": {
        "behaviour_log_probs": fbatch(N),
        "target_log_probs": fbatch(N),
        "rewards": fbatch(N),
        "values": fbatch(N),
        "next_values": fbatch(N),
        "terminated": bbatch(N),
        "truncated": bbatch(N),
    }
}
GAE_SPACES = {
    "advantages": {k: SPACES["targets"][k] for k in ("rewards", "values", "next_values", "terminated", "truncated")},
    "discounted_returns": {k: SPACES["targets"][k] for k in ("rewards", "next_values", "terminated", "truncated")},
}
ARGS = ("behaviour_log_probs", "target_log_probs", "rewards", "values", "next_values", "terminated", "truncated")


@pytest.fixture(params=backend_params())
def backend(request):
    """A ``(backend_name, mode)`` pair: numpy-eager, and each plugin backend eager and static."""
    return request.param


@pytest.fixture(params=[p for p in backend_params() if p.values[0][0] != "numpy"])
def autodiff_backend(request):
    """A framework backend (with gradients), eager and static; skipped when none is installed."""
    return request.param


def rollout(seed: int = 0, log_ratio_std: float = 1.0) -> dict[str, np.ndarray]:
    """A ``[T, 3]`` rollout with terminations and truncations mid-rollout at different steps per env.

    env 0: terminated at t=2, truncated at t=5; env 1: truncated at t=1 and at the last step;
    env 2: terminated at t=4 and at the last step. ``next_values[t] = values[t + 1]`` wherever the
    episode goes on (as in a real rollout); elsewhere the value of the true final observation.
    ``log pi - log mu ~ N(0, log_ratio_std)``: many ratios exceed 1 (and 2), many are below.
    """
    rng = np.random.default_rng(seed)
    terminated = np.zeros((T, N), bool)
    truncated = np.zeros((T, N), bool)
    terminated[2, 0] = truncated[5, 0] = True
    truncated[1, 1] = truncated[T - 1, 1] = True
    terminated[4, 2] = terminated[T - 1, 2] = True
    values = rng.standard_normal((T, N)).astype(np.float32)
    next_values = rng.standard_normal((T, N)).astype(np.float32)
    cont = ~(terminated | truncated)
    next_values[:-1][cont[:-1]] = values[1:][cont[:-1]]
    behaviour = np.log(rng.uniform(0.05, 1.0, (T, N))).astype(np.float32)
    target = (behaviour + log_ratio_std * rng.standard_normal((T, N))).astype(np.float32)
    return {
        "behaviour_log_probs": behaviour,
        "target_log_probs": target,
        "rewards": rng.uniform(-1, 2, (T, N)).astype(np.float32),
        "values": values,
        "next_values": next_values,
        "terminated": terminated,
        "truncated": truncated,
    }


def np_vtrace(ro, gamma, rho_bar, c_bar, rho_bar_pg=None, lam=1.0):
    """Reference V-trace: the paper's eq. (1) as an explicit sum per env and step (float64)."""
    rho_bar_pg = rho_bar if rho_bar_pg is None else rho_bar_pg
    mu, pi = ro["behaviour_log_probs"].astype(np.float64), ro["target_log_probs"].astype(np.float64)
    r, v, v_next = (ro[k].astype(np.float64) for k in ("rewards", "values", "next_values"))
    term, trunc = ro["terminated"], ro["truncated"]
    ratio = np.exp(pi - mu)
    rho, c, rho_pg = np.minimum(rho_bar, ratio), lam * np.minimum(c_bar, ratio), np.minimum(rho_bar_pg, ratio)
    bootstrap = np.where(term, 0.0, v_next)  # V(x_{t+1}); nothing after a termination
    delta = rho * (r + gamma * bootstrap - v)
    ends = term | trunc
    ends[-1] = True  # the segment of a step stops at the first episode end or the rollout's end
    vs = np.zeros((T, N))
    for n in range(N):
        for s in range(T):
            total, weight = 0.0, 1.0
            for t in range(s, T):
                total += weight * delta[t, n]
                if ends[t, n]:
                    break
                weight *= gamma * c[t, n]
            vs[s, n] = v[s, n] + total
    pg = np.zeros((T, N))
    for n in range(N):
        for s in range(T):
            vs_next = bootstrap[s, n] if ends[s, n] else vs[s + 1, n]
            pg[s, n] = rho_pg[s, n] * (r[s, n] + gamma * vs_next - v[s, n])
    return vs, pg


def call(test, ro):
    return test.call("targets", *(ro[k] for k in ARGS))


@pytest.mark.parametrize(
    "gamma,rho_bar,c_bar,rho_bar_pg,lam",
    [(0.99, 1.0, 1.0, None, 1.0), (0.9, 2.0, 0.5, 1.5, 1.0), (0.95, 1.0, 0.8, None, 0.9), (0.97, 0.5, 1.0, 2.0, 0.7)],
    ids=["paper-defaults", "rho2-c0.5-pg1.5", "c0.8-lambda0.9", "rho0.5-c1-pg2"],
)
def test_vtrace_matches_paper_formulas_with_truncation(backend, gamma, rho_bar, c_bar, rho_bar_pg, lam):
    ro = rollout(seed=1)
    ratio = np.exp(ro["target_log_probs"] - ro["behaviour_log_probs"])
    # truncation is exercised: some ratios exceed each bound and some do not
    for bound in (rho_bar, c_bar, rho_bar if rho_bar_pg is None else rho_bar_pg):
        assert (ratio > bound).sum() >= 4 and (ratio < bound).sum() >= 4
    test = ComponentTest(VTrace(gamma, rho_bar, c_bar, rho_bar_pg, lam), SPACES, backend)
    vs, pg = call(test, ro)
    assert vs.shape == pg.shape == (T, N) and vs.dtype == pg.dtype == np.float32
    ref_vs, ref_pg = np_vtrace(ro, gamma, rho_bar, c_bar, rho_bar_pg, lam)
    np.testing.assert_allclose(vs, ref_vs, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(pg, ref_pg, rtol=RTOL, atol=ATOL)
    # Without truncation the targets would differ: the bounds matter in this case.
    loose_vs, loose_pg = np_vtrace(ro, gamma, 1e9, 1e9, 1e9, lam)
    assert np.abs(loose_vs - ref_vs).max() > 1e-2 and np.abs(loose_pg - ref_pg).max() > 1e-2


def test_vtrace_on_policy_equals_n_step_returns_and_gae_one(backend):
    """pi == mu, lambda = 1, c_bar = rho_bar = 1: vs are the bootstrapped n-step returns (GAE(1)
    returns), and the policy-gradient advantages are the GAE(1) advantages."""
    gamma = 0.97
    ro = rollout(seed=2)
    ro["target_log_probs"] = ro["behaviour_log_probs"].copy()
    vs, pg = call(ComponentTest(VTrace(gamma, 1.0, 1.0), SPACES, backend), ro)
    gae = ComponentTest(GAE(gamma, 1.0), GAE_SPACES, backend)
    adv, returns = gae.call("advantages", *(ro[k] for k in ARGS[2:]))
    np.testing.assert_allclose(vs, returns, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(pg, adv, rtol=RTOL, atol=ATOL)
    # ... which are the plain discounted returns, bootstrapped at truncations and at the end
    r, term, trunc = ro["rewards"].astype(np.float64), ro["terminated"], ro["truncated"]
    expected = np.zeros((T, N))
    for n in range(N):
        following = ro["next_values"][T - 1, n]
        for t in reversed(range(T)):
            if term[t, n]:
                following = r[t, n]
            elif trunc[t, n]:
                following = r[t, n] + gamma * ro["next_values"][t, n]
            else:
                following = r[t, n] + gamma * following
            expected[t, n] = following
    np.testing.assert_allclose(vs, expected, rtol=RTOL, atol=ATOL)


def test_vtrace_on_policy_lambda_gives_gae_lambda_returns(backend):
    """On-policy, ``c_t = lambda``: vs are GAE(lambda)'s TD(lambda) returns."""
    gamma, lam = 0.9, 0.8
    ro = rollout(seed=3)
    ro["target_log_probs"] = ro["behaviour_log_probs"].copy()
    vs, _ = call(ComponentTest(VTrace(gamma, 1.0, 1.0, vtrace_lambda=lam), SPACES, backend), ro)
    _, returns = ComponentTest(GAE(gamma, lam), GAE_SPACES, backend).call("advantages", *(ro[k] for k in ARGS[2:]))
    np.testing.assert_allclose(vs, returns, rtol=RTOL, atol=ATOL)


def test_vtrace_hand_checked_numbers(backend):
    """Two steps, three envs: terminated, truncated, continuing; ratios 2 (truncated to 1) and 0.5."""
    spaces = {"targets": {k: (bbatch(3) if k in ("terminated", "truncated") else fbatch(3)) for k in ARGS}}
    test = ComponentTest(VTrace(gamma=0.5, rho_bar=1.0, c_bar=1.0), spaces, backend)
    mu = np.log(np.full((2, 3), 0.5, np.float32))
    pi = np.log(np.array([[1.0, 1.0, 1.0], [0.25, 0.25, 0.25]], np.float32))  # ratios 2, then 0.5
    r = np.ones((2, 3), np.float32)
    v = np.zeros((2, 3), np.float32)
    v_next = np.full((2, 3), 10.0, np.float32)
    v_next[0, 2] = 0.0  # env 2 continues: V(x_1) = v[1] = 0
    term = np.array([[True, False, False], [False, False, False]])
    trunc = np.array([[False, True, False], [False, False, False]])
    vs, pg = test.call("targets", mu, pi, r, v, v_next, term, trunc)
    # t=1 (every env; bootstrapped from 10): rho = 0.5, delta = 0.5 * (1 + 5) = 3 = vs - V.
    # t=0, rho = c = min(1, 2) = 1: env 0 terminal -> delta = 1; env 1 truncated -> 1 + 0.5 * 10 = 6;
    # env 2 continues: delta = 1 + 0 = 1, vs_0 = 1 + 0.5 * 1 * 3 = 2.5.
    np.testing.assert_allclose(vs, [[1.0, 6.0, 2.5], [3.0, 3.0, 3.0]], rtol=RTOL)
    # pg t=0: env 0: 1; env 1: 1 + 0.5 * 10 = 6; env 2: 1 + 0.5 * vs_1 = 1 + 1.5 = 2.5.
    # pg t=1: rho_pg = 0.5: 0.5 * (1 + 0.5 * 10) = 3.
    np.testing.assert_allclose(pg, [[1.0, 6.0, 2.5], [3.0, 3.0, 3.0]], rtol=RTOL)


def test_vtrace_targets_carry_no_gradient(autodiff_backend):
    test = ComponentTest(VTrace(0.9, 1.0, 1.0), SPACES, autodiff_backend)
    ro = rollout(seed=4)
    _, grads = test.gradients(
        "targets",
        *(ro[k] for k in ARGS),
        objective=lambda ops, out: ops.reduce_sum(out[0]) + ops.reduce_sum(out[1]),
        wrt_inputs=["target_log_probs", "values", "next_values", "rewards"],
    )
    for name in ("target_log_probs", "values", "next_values", "rewards"):
        np.testing.assert_array_equal(grads[f"input:{name}"], 0.0, err_msg=name)


def test_vtrace_checks_spaces_and_arguments():
    bad = {"targets": dict(SPACES["targets"], rewards=fbatch(N + 1))}
    with pytest.raises(BuildError, match="same number of envs"):
        ComponentTest(VTrace(), bad, ("numpy", "eager"))
    flags = {"targets": dict(SPACES["targets"], terminated=fbatch(N))}
    with pytest.raises(BuildError, match="terminated"):
        ComponentTest(VTrace(), flags, ("numpy", "eager"))
    for kwargs, word in [
        ({"gamma": 0.0}, "gamma"),
        ({"rho_bar": 0.0}, "rho_bar"),
        ({"c_bar": -1.0}, "c_bar"),
        ({"rho_bar_pg": 0.0}, "rho_bar_pg"),
        ({"vtrace_lambda": 1.5}, "lambda"),
    ]:
        with pytest.raises(ValueError, match=word):
            VTrace(**kwargs)


# --------------------------------------------------------------------------- IMPALA loss and config
LOSS_SPACES = {"loss": {k: fbatch() for k in ("log_probs", "entropy", "values", "vs", "pg_advantages")}}


@pytest.mark.parametrize("normalize", [False, True], ids=["raw-adv", "norm-adv"])
def test_impala_loss(backend, normalize):
    vf_coef, ent_coef = 0.25, 0.05
    test = ComponentTest(ImpalaLoss(vf_coef, ent_coef, normalize), LOSS_SPACES, backend)
    rng = np.random.default_rng(0)
    b = {k: rng.standard_normal(12).astype(np.float32) for k in LOSS_SPACES["loss"]}
    b["entropy"] = np.abs(b["entropy"])
    loss, pg, vf, ent = test.call("loss", *b.values())
    adv = b["pg_advantages"].astype(np.float64)
    if normalize:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    ref_pg = -np.mean(adv * b["log_probs"])
    ref_vf = 0.5 * np.mean((b["vs"].astype(np.float64) - b["values"]) ** 2)
    ref_ent = np.mean(b["entropy"].astype(np.float64))
    np.testing.assert_allclose(pg, ref_pg, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(vf, ref_vf, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(ent, ref_ent, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(loss, ref_pg + vf_coef * ref_vf - ent_coef * ref_ent, rtol=RTOL, atol=ATOL)


def test_impala_loss_gradients_flow_only_through_policy_and_values(autodiff_backend):
    test = ComponentTest(ImpalaLoss(0.5, 0.0), LOSS_SPACES, autodiff_backend)
    rng = np.random.default_rng(1)
    b = {k: rng.standard_normal(8).astype(np.float32) for k in LOSS_SPACES["loss"]}
    _, grads = test.gradients("loss", *b.values(), wrt_inputs=["log_probs", "values", "vs", "pg_advantages"])
    np.testing.assert_array_equal(grads["input:vs"], 0.0)
    np.testing.assert_array_equal(grads["input:pg_advantages"], 0.0)
    np.testing.assert_allclose(grads["input:log_probs"], -b["pg_advantages"] / 8, rtol=1e-5)
    np.testing.assert_allclose(grads["input:values"], 0.5 * (b["values"] - b["vs"]) / 8, rtol=1e-5, atol=1e-7)


def test_impala_config_ships_validates_and_rejects_bad_values():
    from rlgraph_core.agents.impala import ImpalaConfig
    from rlgraph_core.config.run import apply_overrides, load_config_file, validate_config
    from rlgraph_core.errors import ConfigError
    from rlgraph_core.plugins import PluginManager, hookimpl
    from rlgraph_core.testing.numpy_backend import NumpyBackend

    class NumpyBackendPlugin:  # the config validates in a venv without torch
        @hookimpl
        def rlgraph_backends(self):
            return {"numpy": NumpyBackend}

    pm = PluginManager()
    pm.register(NumpyBackendPlugin(), "numpy-backend")
    raw = apply_overrides(load_config_file(CONFIGS / "impala_cartpole.yaml"), ["train.backend=numpy"])
    config = validate_config(raw, pm)
    assert isinstance(config.agent, ImpalaConfig) and config.agent.n_steps == raw["agent"]["n_steps"]
    defaults = ImpalaConfig()
    assert (defaults.rho_bar, defaults.c_bar, defaults.rho_bar_pg, defaults.gae_lambda) == (1.0, 1.0, None, 1.0)
    assert defaults.optimizer.type == "rmsprop" and defaults.optimizer.max_grad_norm == 40.0
    for bad, field in [({"rho_bar": 0}, "rho_bar"), ({"c_bar": -1}, "c_bar"), ({"rho_bar_pg": 0}, "rho_bar_pg")]:
        with pytest.raises(ConfigError, match=field):
            validate_config(
                {"agent": {"type": "impala", **bad}, "env": {"id": "CartPole-v1"}, "train": {"backend": "numpy"}}, pm
            )
