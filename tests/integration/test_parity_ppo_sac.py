"""Cross-backend parity of the PPO and SAC agents: torch and tf, eager and static.

As for DQN (test_parity_agent.py), each test compares two different ``(backend, mode)`` pairs
(``parity_pairs.py``: every installed pair against torch eager, and tf static against tf eager;
ids read ``<compared>-vs-<reference>``). One config and one seed give, on both pairs:

* bit-identical initial weights (numpy initializers);
* PPO: the same forward pass (log-probabilities, entropies, values of the rollout's actions) and
  the same GAE advantages and returns (``atol = rtol = 1e-5``);
* the same losses of an update on the same batch, and the same weights after it and after a
  second one (``atol = 1e-5, rtol = 1e-4``, as for DQN: Adam's first steps move each weight by
  about ``lr * sign(grad)``, so float32 sums in another order show up a little more).

PPO learns from a fixed time-major rollout (``agent.update(batch)``): two epochs of two shuffled
minibatches each (the shuffling generator is seeded from ``seed``, so both pairs draw the same
minibatches). Its old log-probabilities are the initial policy's plus noise, so that the clipped
branch of the surrogate is taken for part of the batch. Two cases: CartPole-like (discrete actions,
box-normalised observations) and Pendulum-like (Gaussian actions in ``[-2, 2]``, running
mean/std observation normalisation, value clipping). SAC does one critic, actor and temperature
step per ``agent.update(batch)``, with reparameterisation noise from the agent's numpy generator
(seeded: the same noise on every backend); two updates are compared.

Tiny networks ([16, 16]). Torch static (``torch.compile``: 10-20 s per agent on CPU) is marked
``slow``.

Two controls (torch eager only) show the comparisons are sharp enough to fail: a slightly
different batch or seed gives weights outside the tolerances.
"""

from __future__ import annotations

import numpy as np
import pytest
from parity_pairs import comparison_id, comparisons, slow_if_torch_static

from rlgraph_core.agents.ppo import PPOAgent, PPOConfig
from rlgraph_core.agents.sac import SACAgent, SACConfig
from rlgraph_core.assemble import make_backend
from rlgraph_core.spaces import Discrete, FloatBox

# torch static silently running eager (after a compile failure) would compare eager with eager.
pytestmark = pytest.mark.filterwarnings("error:torch.compile:RuntimeWarning")

ATOL = RTOL = 1e-5
WEIGHT_ATOL, WEIGHT_RTOL = 1e-5, 1e-4
TORCH_STATIC = ("torch", "static")
HIDDEN = [16, 16]


def backend(pair):
    return make_backend(pair[0], pair[1], device="cpu", seed=0)


def assert_same_weights(got, ref):
    """Same names, dtypes and values, bit for bit."""
    assert sorted(got) == sorted(ref)
    for k in ref:
        assert got[k].dtype == ref[k].dtype == np.float32, k
        np.testing.assert_array_equal(got[k], ref[k], err_msg=k)


def assert_close_weights(got, ref):
    """Same names; values within the after-an-update tolerances."""
    assert sorted(got) == sorted(ref)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], atol=WEIGHT_ATOL, rtol=WEIGHT_RTOL, err_msg=k)


def moved(before, after, prefix=""):
    """Names (under ``prefix``) whose values changed."""
    return [k for k in before if k.startswith(prefix) and not np.array_equal(before[k], after[k])]


def params(cases, torch_static):
    """``(case, reference pair, compared pair)`` params; torch static only for ``torch_static`` cases."""
    out = []
    for case in cases:
        keep = lambda p, c=case: p != TORCH_STATIC or c in torch_static  # noqa: E731
        for ref, other in comparisons(keep):
            out.append(
                pytest.param(
                    case, ref, other, id=f"{case}-{comparison_id(ref, other)}", marks=slow_if_torch_static(other)
                )
            )
    return out


# =========================================================================== PPO
T, N = 8, 4  # rollout: 8 steps of 4 envs = 32 samples, minibatches of 16
PPO_CASES = {
    "cartpole": {
        "obs_space": FloatBox(
            low=np.array([-4.8, -5, -0.42, -5], np.float32), high=np.array([4.8, 5, 0.42, 5], np.float32)
        ),
        "action_space": Discrete(2),
        "config": PPOConfig(
            network={"hidden": HIDDEN},
            n_steps=T,
            batch_size=T * N // 2,
            n_epochs=2,
            ent_coef=0.01,
            preprocessor="box_normalize",
            optimizer={"learning_rate": 3e-3},
        ),
    },
    "pendulum": {
        "obs_space": FloatBox(low=np.array([-1, -1, -8], np.float32), high=np.array([1, 1, 8], np.float32)),
        "action_space": FloatBox(-2.0, 2.0, shape=(1,)),
        "config": PPOConfig(
            network={"hidden": HIDDEN},
            n_steps=T,
            batch_size=T * N // 2,
            n_epochs=2,
            ent_coef=0.01,
            clip_range_vf=0.2,
            log_std_init=-0.5,
            preprocessor="running_mean_std",
            optimizer={"learning_rate": 3e-3},
        ),
    },
}


def ppo_rollout(case: str, seed: int) -> dict[str, np.ndarray]:
    """A time-major ``[T, N, ...]`` rollout as ``agent.update(batch)`` takes it.

    Old log-probabilities are those of the initial (near-uniform / unit-Gaussian) policy plus
    noise, so policy ratios leave the clip range for part of the batch.
    """
    r = np.random.default_rng(seed)
    spec = PPO_CASES[case]
    low, high = spec["obs_space"].low, spec["obs_space"].high
    obs = (r.uniform(-1, 1, (T, N, len(low))) * high).astype(np.float32)
    if case == "cartpole":
        actions = r.integers(0, 2, (T, N))
        log_probs = np.full((T, N), np.log(0.5))
    else:
        actions = (r.standard_normal((T, N, 1)) * np.exp(-0.5)).astype(np.float32)
        log_probs = -0.5 * (actions[..., 0] / np.exp(-0.5)) ** 2 + 0.5 - 0.5 * np.log(2 * np.pi)
    return {
        "obs": obs,
        "actions": actions,
        "log_probs": (log_probs + 0.3 * r.standard_normal((T, N))).astype(np.float32),
        "values": (0.5 * r.standard_normal((T, N))).astype(np.float32),
        "rewards": r.standard_normal((T, N)).astype(np.float32),
        "terminated": r.random((T, N)) < 0.1,
        "truncated": r.random((T, N)) < 0.1,
        "next_values": (0.5 * r.standard_normal((T, N))).astype(np.float32),
    }


PPO_ROLLOUTS = {case: [ppo_rollout(case, 10), ppo_rollout(case, 11)] for case in PPO_CASES}


def make_ppo(case: str, pair, seed: int = 0) -> PPOAgent:
    spec = PPO_CASES[case]
    return PPOAgent(spec["config"], spec["obs_space"], spec["action_space"], backend(pair), seed=seed, num_envs=N)


def drive_ppo(agent: PPOAgent, rollouts) -> dict:
    """Everything the PPO parity tests compare, from one agent."""
    to_t, to_np = agent.backend.to_tensor, agent.backend.to_numpy
    first = rollouts[0]
    out = {"initial": agent.get_weights()}
    flat_obs = first["obs"].reshape(T * N, -1)
    flat_actions = first["actions"].reshape(T * N, *first["actions"].shape[2:])
    out["log_probs"], out["entropy"], out["values"] = (
        to_np(x) for x in agent.graph.evaluate_actions(to_t(flat_obs), to_t(flat_actions))
    )
    out["advantages"], out["returns"] = agent.compute_advantages(first)
    out["metrics"] = [agent.update(first)]
    out["one_update"] = agent.get_weights()
    out["metrics"].append(agent.update(rollouts[1]))
    out["two_updates"] = agent.get_weights()
    return out


_PPO_RUNS: dict = {}


def ppo_run(case: str, pair) -> dict:
    """Build the PPO agent of ``case`` on ``pair`` and drive it (once per case and pair)."""
    key = (case, pair)
    if key not in _PPO_RUNS:
        _PPO_RUNS[key] = drive_ppo(make_ppo(case, pair), PPO_ROLLOUTS[case])
    return _PPO_RUNS[key]


PPO_PARAMS = params(PPO_CASES, torch_static=("cartpole", "pendulum"))
PPO_LOSSES = ("loss", "pg_loss", "vf_loss", "entropy", "approx_kl")


@pytest.mark.parametrize("case,ref_pair,pair", PPO_PARAMS)
def test_ppo_initial_weights_identical(case, ref_pair, pair):
    assert_same_weights(ppo_run(case, pair)["initial"], ppo_run(case, ref_pair)["initial"])


@pytest.mark.parametrize("case,ref_pair,pair", PPO_PARAMS)
def test_ppo_same_forward_pass_and_advantages(case, ref_pair, pair):
    got, ref = ppo_run(case, pair), ppo_run(case, ref_pair)
    for name in ("log_probs", "entropy", "values", "advantages", "returns"):
        assert got[name].shape == ref[name].shape, name
        np.testing.assert_allclose(got[name], ref[name], atol=ATOL, rtol=RTOL, err_msg=name)
    # GAE: advantages + values = returns, on the rollout's own value estimates
    np.testing.assert_allclose(
        got["returns"], got["advantages"] + PPO_ROLLOUTS[case][0]["values"], atol=ATOL, rtol=RTOL
    )


@pytest.mark.parametrize("case,ref_pair,pair", PPO_PARAMS)
def test_ppo_same_losses_and_weights_after_updates(case, ref_pair, pair):
    got, ref = ppo_run(case, pair), ppo_run(case, ref_pair)
    for got_m, ref_m in zip(got["metrics"], ref["metrics"]):
        assert got_m["gradient_steps"] == ref_m["gradient_steps"] == 4  # 2 epochs x 2 minibatches
        assert got_m["early_stop"] is ref_m["early_stop"] is False
        assert 0.0 < ref_m["clip_fraction"] < 1.0  # both branches of the clipped surrogate are taken
        assert got_m["clip_fraction"] == pytest.approx(ref_m["clip_fraction"], abs=1e-6)
        for name in PPO_LOSSES:
            assert got_m[name] == pytest.approx(ref_m[name], rel=WEIGHT_RTOL, abs=WEIGHT_ATOL), name
    assert_close_weights(got["one_update"], ref["one_update"])
    assert_close_weights(got["two_updates"], ref["two_updates"])
    trainable = [k for k in ref["initial"] if "/preprocessor/" not in k]
    assert sorted(moved(ref["initial"], ref["one_update"])) == sorted(
        trainable if case == "cartpole" else ref["initial"]
    )  # the running normaliser moves too


def test_ppo_parity_check_detects_a_slightly_different_batch():
    """Control: rewards off by 0.01 in one env step give weights outside the tolerances."""
    ref = ppo_run("cartpole", ("torch", "eager"))
    rollouts = [dict(r) for r in PPO_ROLLOUTS["cartpole"]]
    rollouts[0]["rewards"] = rollouts[0]["rewards"].copy()
    rollouts[0]["rewards"][3, 1] += 0.01
    other = drive_ppo(make_ppo("cartpole", ("torch", "eager")), rollouts)
    assert_same_weights(other["initial"], ref["initial"])
    with pytest.raises(AssertionError):
        assert_close_weights(other["two_updates"], ref["two_updates"])


# =========================================================================== SAC
SAC_OBS = FloatBox(low=np.array([-1, -1, -8], np.float32), high=np.array([1, 1, 8], np.float32))
SAC_ACTIONS = FloatBox(-2.0, 2.0, shape=(1,))
SAC_CONFIG = SACConfig(
    actor_network={"hidden": HIDDEN},
    critic_network={"hidden": HIDDEN},
    batch_size=32,
    learning_starts=0,
    tau=0.1,
    optimizer={"learning_rate": 1e-3, "max_grad_norm": None},
)
SAC_OUTPUTS = ("critic_loss", "actor_loss", "log_probs", "temperature_loss", "alpha")


def sac_batch(seed: int, n: int = 32) -> dict[str, np.ndarray]:
    """One batch as ``SACAgent.update(batch)`` takes it: unit-box actions, bool terminals."""
    r = np.random.default_rng(seed)
    obs = lambda: (r.uniform(-1, 1, (n, 3)) * SAC_OBS.high).astype(np.float32)  # noqa: E731
    return {
        "obs": obs(),
        "actions": r.uniform(-1, 1, (n, 1)).astype(np.float32),
        "rewards": r.standard_normal(n).astype(np.float32),
        "next_obs": obs(),
        "terminals": r.random(n) < 0.2,
    }


SAC_BATCHES = [sac_batch(20), sac_batch(21)]


def make_sac(pair, seed: int = 0) -> SACAgent:
    return SACAgent(SAC_CONFIG, SAC_OBS, SAC_ACTIONS, backend(pair), seed=seed)


def drive_sac(agent: SACAgent, batches) -> dict:
    """Initial weights, then per update its returned losses (as numpy) and the weights after it."""
    out = {"initial": agent.get_weights(), "outputs": [], "weights": []}
    for batch in batches:
        result = agent.update(batch)
        assert set(result) == set(SAC_OUTPUTS)
        out["outputs"].append({k: np.asarray(agent.backend.to_numpy(v)).copy() for k, v in result.items()})
        out["weights"].append(agent.get_weights())
    return out


_SAC_RUNS: dict = {}


def sac_run(pair) -> dict:
    """Build the SAC agent on ``pair`` and drive it (once per pair)."""
    if pair not in _SAC_RUNS:
        _SAC_RUNS[pair] = drive_sac(make_sac(pair), SAC_BATCHES)
    return _SAC_RUNS[pair]


SAC_PARAMS = params(["pendulum"], torch_static=("pendulum",))


@pytest.mark.parametrize("case,ref_pair,pair", SAC_PARAMS)
def test_sac_initial_weights_identical(case, ref_pair, pair):
    got, ref = sac_run(pair)["initial"], sac_run(ref_pair)["initial"]
    assert_same_weights(got, ref)
    for k in ref:  # the target critic starts as a copy of the critic
        if k.startswith("critic/"):
            np.testing.assert_array_equal(ref["critic_target/" + k[len("critic/") :]], ref[k])


@pytest.mark.parametrize("case,ref_pair,pair", SAC_PARAMS)
def test_sac_same_losses_and_weights_after_updates(case, ref_pair, pair):
    got, ref = sac_run(pair), sac_run(ref_pair)
    # First update: losses of the identical initial weights (forward tolerances); the log-probs
    # are those of the actor step. Second update: after one step of each optimizer.
    for step, (tol_a, tol_r) in enumerate([(ATOL, RTOL), (WEIGHT_ATOL, WEIGHT_RTOL)]):
        for name in SAC_OUTPUTS:
            g, r = got["outputs"][step][name], ref["outputs"][step][name]
            assert g.shape == r.shape, name
            np.testing.assert_allclose(g, r, atol=tol_a, rtol=tol_r, err_msg=f"update {step + 1}: {name}")
    for after in (0, 1):
        assert_close_weights(got["weights"][after], ref["weights"][after])
    initial, one = ref["initial"], ref["weights"][0]
    for part in ("actor/", "critic/", "critic_target/", "sac_loss/log_alpha"):
        assert moved(initial, one, part), f"the first update must change {part}"
    assert ref["outputs"][0]["alpha"] == 1.0 and ref["outputs"][1]["alpha"] != 1.0  # the temperature is learned


def test_sac_parity_check_detects_different_noise():
    """Control: another seed's reparameterisation noise (same initial weights) gives losses and
    weights outside the tolerances."""
    ref = sac_run(("torch", "eager"))
    agent = make_sac(("torch", "eager"))
    agent.rng = np.random.default_rng(1)  # only the noise generator differs
    other = drive_sac(agent, SAC_BATCHES)
    assert_same_weights(other["initial"], ref["initial"])
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(
            other["outputs"][0]["actor_loss"], ref["outputs"][0]["actor_loss"], atol=ATOL, rtol=RTOL
        )
    with pytest.raises(AssertionError):
        assert_close_weights(other["weights"][1], ref["weights"][1])
