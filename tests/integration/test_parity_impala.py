"""Cross-backend parity of the IMPALA agent: torch and tf, eager and static.

As for PPO (test_parity_ppo_sac.py), each test compares two ``(backend, mode)`` pairs
(``parity_pairs.py``). One config and one seed give, on both pairs: bit-identical initial weights;
the same losses of a learner step on the same batch (target log-probabilities, values, V-trace and
the loss in one train step), and the same weights after it and after a second batch
(``atol = 1e-5, rtol = 1e-4``).

The batches are what a learner receives from stale actors: time-major ``[T, N]`` with N = 4 (two
actors of 2 envs concatenated on the env axis, for an agent built with ``num_envs = 2``), behaviour
log-probabilities of the initial policy plus noise (so both truncations, ``rho_bar`` and
``c_bar``, are active), episode ends mid-rollout, and two train steps per batch. Two cases:
CartPole-like (discrete, box-normalised observations) and Pendulum-like (Gaussian actions).
Torch static (``torch.compile``) is marked ``slow``. A control (torch eager) shows a slightly
different batch gives weights outside the tolerances.
"""

from __future__ import annotations

import numpy as np
import pytest
from parity_pairs import comparison_id, comparisons, slow_if_torch_static

from rlgraph_core.agents.impala import ImpalaAgent, ImpalaConfig
from rlgraph_core.assemble import make_backend
from rlgraph_core.spaces import Discrete, FloatBox

pytestmark = pytest.mark.filterwarnings("error:torch.compile:RuntimeWarning")

WEIGHT_ATOL, WEIGHT_RTOL = 1e-5, 1e-4
T, N, NUM_ENVS = 8, 4, 2
HIDDEN = [16, 16]
CASES = {
    "cartpole": {
        "obs_space": FloatBox(
            low=np.array([-4.8, -5, -0.42, -5], np.float32), high=np.array([4.8, 5, 0.42, 5], np.float32)
        ),
        "action_space": Discrete(2),
        "config": ImpalaConfig(
            network={"hidden": HIDDEN},
            n_steps=T,
            n_epochs=2,
            rho_bar=1.0,
            c_bar=0.9,
            preprocessor="box_normalize",
            optimizer={"type": "adam", "learning_rate": 3e-3, "max_grad_norm": 0.5},
        ),
    },
    "pendulum": {
        "obs_space": FloatBox(low=np.array([-1, -1, -8], np.float32), high=np.array([1, 1, 8], np.float32)),
        "action_space": FloatBox(-2.0, 2.0, shape=(1,)),
        "config": ImpalaConfig(
            network={"hidden": HIDDEN},
            n_steps=T,
            n_epochs=2,
            log_std_init=-0.5,
            rho_bar_pg=1.5,
            normalize_advantage=True,
            optimizer={"learning_rate": 3e-3},
        ),
    },
}


def impala_batch(case: str, seed: int) -> dict[str, np.ndarray]:
    """A learner batch ``[T, N, ...]`` from stale actors (see the module docstring)."""
    r = np.random.default_rng(seed)
    spec = CASES[case]
    high = spec["obs_space"].high
    obs = (r.uniform(-1, 1, (T + 1, N, len(high))) * high).astype(np.float32)
    terminated, truncated = r.random((T, N)) < 0.1, r.random((T, N)) < 0.1
    next_obs = obs[1:].copy()
    ended = terminated | truncated
    next_obs[ended] = (r.uniform(-1, 1, (int(ended.sum()), len(high))) * high).astype(np.float32)
    if case == "cartpole":
        actions = r.integers(0, 2, (T, N))
        log_probs = np.full((T, N), np.log(0.5))
    else:
        actions = (r.standard_normal((T, N, 1)) * np.exp(-0.5)).astype(np.float32)
        log_probs = -0.5 * (actions[..., 0] / np.exp(-0.5)) ** 2 + 0.5 - 0.5 * np.log(2 * np.pi)
    return {
        "obs": obs[:T],
        "actions": actions,
        "log_probs": (log_probs + 0.3 * r.standard_normal((T, N))).astype(np.float32),
        "rewards": r.standard_normal((T, N)).astype(np.float32),
        "next_obs": next_obs,
        "terminated": terminated,
        "truncated": truncated,
        "policy_version": np.zeros((T, N), np.int64),
    }


BATCHES = {case: [impala_batch(case, 10), impala_batch(case, 11)] for case in CASES}
LOSSES = ("loss", "pg_loss", "vf_loss", "entropy")


def make_impala(case: str, pair, seed: int = 0) -> ImpalaAgent:
    spec = CASES[case]
    backend = make_backend(pair[0], pair[1], device="cpu", seed=0)
    return ImpalaAgent(spec["config"], spec["obs_space"], spec["action_space"], backend, seed=seed, num_envs=NUM_ENVS)


def drive(agent: ImpalaAgent, batches) -> dict:
    """Initial weights, metrics of two learner calls, and the weights after each."""
    out = {"initial": agent.get_weights(), "metrics": []}
    for i, batch in enumerate(batches):
        out["metrics"].append(agent.learn(batch).metrics)
        out[f"after_{i + 1}"] = agent.get_weights()
    return out


_RUNS: dict = {}


def run(case: str, pair) -> dict:
    """Build the agent of ``case`` on ``pair`` and drive it (once per case and pair)."""
    if (case, pair) not in _RUNS:
        _RUNS[(case, pair)] = drive(make_impala(case, pair), BATCHES[case])
    return _RUNS[(case, pair)]


PARAMS = [
    pytest.param(case, ref, other, id=f"{case}-{comparison_id(ref, other)}", marks=slow_if_torch_static(other))
    for case in CASES
    for ref, other in comparisons()
]


@pytest.mark.parametrize("case,ref_pair,pair", PARAMS)
def test_impala_initial_weights_identical(case, ref_pair, pair):
    got, ref = run(case, pair)["initial"], run(case, ref_pair)["initial"]
    assert sorted(got) == sorted(ref)
    for k in ref:
        assert got[k].dtype == ref[k].dtype == np.float32, k
        np.testing.assert_array_equal(got[k], ref[k], err_msg=k)


@pytest.mark.parametrize("case,ref_pair,pair", PARAMS)
def test_impala_same_losses_and_weights_after_learning(case, ref_pair, pair):
    got, ref = run(case, pair), run(case, ref_pair)
    for got_m, ref_m in zip(got["metrics"], ref["metrics"]):
        assert got_m["gradient_steps"] == ref_m["gradient_steps"] == 2
        assert 0.0 < ref_m["rho_truncated"] < 1.0 and 0.0 < ref_m["c_truncated"] < 1.0  # truncation active
        assert got_m["rho_truncated"] == pytest.approx(ref_m["rho_truncated"], abs=1e-6)
        assert got_m["policy_lag"] == ref_m["policy_lag"]
        for name in LOSSES:
            assert got_m[name] == pytest.approx(ref_m[name], rel=WEIGHT_RTOL, abs=WEIGHT_ATOL), name
    assert got["metrics"][1]["policy_lag"] == 2.0  # the second batch is as old as the first's two steps
    for key in ("after_1", "after_2"):
        for k in ref[key]:
            np.testing.assert_allclose(got[key][k], ref[key][k], atol=WEIGHT_ATOL, rtol=WEIGHT_RTOL, err_msg=k)
    moved = [k for k in ref["initial"] if not np.array_equal(ref["initial"][k], ref["after_1"][k])]
    assert sorted(moved) == sorted(k for k in ref["initial"] if "/preprocessor/" not in k)


def test_impala_parity_check_detects_a_slightly_different_batch():
    """Control: rewards off by 0.01 in one env step give weights outside the tolerances."""
    ref = run("cartpole", ("torch", "eager"))
    batches = [dict(b) for b in BATCHES["cartpole"]]
    batches[0]["rewards"] = batches[0]["rewards"].copy()
    batches[0]["rewards"][3, 1] += 0.01
    other = drive(make_impala("cartpole", ("torch", "eager")), batches)
    with pytest.raises(AssertionError):
        for k in ref["after_2"]:
            np.testing.assert_allclose(other["after_2"][k], ref["after_2"][k], atol=WEIGHT_ATOL, rtol=WEIGHT_RTOL)
