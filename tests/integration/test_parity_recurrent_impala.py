"""Cross-backend parity of IMPALA with a recurrent policy (``network: {type: lstm | gru}``).

One config and one seed give on both pairs: bit-identical initial weights and the same V-trace
losses and weights after two train steps on one made-up batch (``atol 1e-5, rtol 1e-4``): a
fragment of 8 steps of 4 envs cut into sequences of 4, episode starts inside them, non-zero stored
states, a truncation bootstrapped from the behaviour's final value, and behaviour log-probabilities
off the policy's so that V-trace truncates importance ratios. CI compares the eager pairs; the
static ones are ``heavy``, as for recurrent PPO (test_parity_recurrent_ppo.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from parity_pairs import comparison_id, comparisons

from rlgraph_core.agents.impala import ImpalaConfig
from rlgraph_core.agents.recurrent_impala import RecurrentImpalaAgent
from rlgraph_core.assemble import make_backend
from rlgraph_core.components.recurrent import RecurrentSettings
from rlgraph_core.spaces import Discrete, FloatBox

pytestmark = pytest.mark.filterwarnings("error:torch.compile:RuntimeWarning")

T, N, L = 8, 4, 4
OBS = FloatBox(shape=(3,))


def config(cell: str) -> ImpalaConfig:
    return ImpalaConfig(
        network=RecurrentSettings(type=cell, units=6, encoder={"hidden": [5], "activation": "tanh"}, seq_len=L),
        n_steps=T,
        n_epochs=2,
        ent_coef=0.01,
        optimizer={"learning_rate": 3e-3},
    )


def batch(cell: str) -> dict:
    r = np.random.default_rng(7)
    starts = r.random((T, N)) < 0.2
    starts[0] = True
    ends = np.roll(starts, -1, axis=0)
    truncated = ends & (r.random((T, N)) < 0.5)
    keys = ("pi_h", "pi_c", "vf_h", "vf_c") if cell == "lstm" else ("pi_h", "vf_h")
    return {
        "obs": r.standard_normal((T, N, 3)).astype(np.float32),
        "actions": r.integers(0, 2, (T, N)),
        "log_probs": (np.log(0.5) + 0.3 * r.standard_normal((T, N))).astype(np.float32),
        "rewards": r.standard_normal((T, N)).astype(np.float32),
        "terminated": ends & ~truncated,
        "truncated": truncated,
        "final_values": np.where(truncated, r.standard_normal((T, N)), 0.0).astype(np.float32),
        "episode_starts": starts,
        "bootstrap_obs": r.standard_normal((1, N, 3)).astype(np.float32),
        "sequence_states": {k: (0.5 * r.standard_normal((T // L, N, 6))).astype(np.float32) for k in keys},
        "policy_version": np.zeros((T, N), np.int64),
    }


_RUNS: dict = {}


def run(cell: str, pair) -> dict:
    key = (cell, pair)
    if key not in _RUNS:
        backend = make_backend(pair[0], pair[1], device="cpu", seed=0)
        agent = RecurrentImpalaAgent(config(cell), OBS, Discrete(2), backend, seed=0, num_envs=N)
        out = {"initial": agent.get_weights()}
        out["metrics"] = agent.learn(batch(cell)).metrics
        out["updated"] = agent.get_weights()
        _RUNS[key] = out
    return _RUNS[key]


PARAMS = [
    pytest.param(
        cell,
        ref,
        other,
        id=f"{cell}-{comparison_id(ref, other)}",
        marks=[pytest.mark.heavy] if "static" in (ref[1], other[1]) else [],
    )
    for cell in ("lstm", "gru")
    for ref, other in comparisons()
]


@pytest.mark.parametrize("cell,ref_pair,pair", PARAMS)
def test_recurrent_impala_same_weights_and_update(cell, ref_pair, pair):
    got, ref = run(cell, pair), run(cell, ref_pair)
    assert sorted(got["initial"]) == sorted(ref["initial"])
    for k in ref["initial"]:
        np.testing.assert_array_equal(got["initial"][k], ref["initial"][k], err_msg=k)
    assert ref["metrics"]["rho_truncated"] > 0  # the batch is off-policy: V-trace's clipping is compared too
    for name in ("loss", "pg_loss", "vf_loss", "entropy", "rho_truncated", "c_truncated"):
        assert got["metrics"][name] == pytest.approx(ref["metrics"][name], abs=1e-5, rel=1e-4), name
    assert got["metrics"]["gradient_steps"] == 2
    for k in ref["updated"]:
        np.testing.assert_allclose(got["updated"][k], ref["updated"][k], atol=1e-5, rtol=1e-4, err_msg=k)
