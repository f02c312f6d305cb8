"""Cross-backend parity of the offline-RL losses and of the CQL-SAC and IQL agents.

Pairs as everywhere (``parity_pairs.py``: every installed ``(backend, mode)`` against torch eager,
and each other backend's static mode against its eager mode; ids ``<compared>-vs-<reference>``).

* The losses new with offline RL, built alone from spaces: IQL's :class:`ExpectileLoss` and
  :class:`AdvantageWeightedLoss` and continuous CQL's :class:`ContinuousCQLRegularizer` give the
  same outputs (``atol = rtol = 1e-5``) and the same gradients with respect to their inputs
  (``atol = 1e-5, rtol = 1e-4``) on both pairs. Their values against numpy are checked on every
  backend in tests/core/test_offline_components.py.
* The agents (tiny networks, Pendulum-shaped spaces; IQL also with 3 discrete actions): one config and one seed give bit-identical
  initial weights, the same losses of a first update on the same batch, and the same weights after
  it and after a second one (``atol = 1e-5, rtol = 1e-4``, as for SAC). CQL-SAC's uniform and
  policy actions come from the agent's seeded numpy generator, so both pairs draw the same ones.

A control shows the comparison is sharp: IQL fed a slightly different batch ends outside the
tolerances. Torch static (``torch.compile``) is marked ``slow``.
"""

from __future__ import annotations

import numpy as np
import pytest
from parity_pairs import comparison_id, comparisons, slow_if_torch_static
from test_parity_ppo_sac import (
    assert_close_weights,
    assert_same_weights,
    backend,
    moved,
    params,
)

from rlgraph_core.agents.cql_sac import CQLSACAgent, CQLSACConfig
from rlgraph_core.agents.iql import IQLAgent, IQLConfig
from rlgraph_core.components.offline_losses import AdvantageWeightedLoss, ContinuousCQLRegularizer, ExpectileLoss
from rlgraph_core.spaces import Discrete, FloatBox
from rlgraph_core.testing import ComponentTest

# torch static silently running eager (after a compile failure) would compare eager with eager.
pytestmark = pytest.mark.filterwarnings("error:torch.compile:RuntimeWarning")

ATOL = RTOL = 1e-5
GRAD_ATOL, GRAD_RTOL = 1e-5, 1e-4
B, M = 16, 3
rng = np.random.default_rng(33)


def fbatch(*shape):
    return FloatBox(shape=shape).with_batch_rank()


# =========================================================================== losses
LOSSES = {
    "expectile": (
        lambda: ExpectileLoss(0.7),
        {"q_values": fbatch(), "values": fbatch(), "weights": fbatch()},
        [
            (rng.standard_normal(B) * 3).astype(np.float32),
            (rng.standard_normal(B) * 3).astype(np.float32),
            rng.uniform(0.5, 1.5, B).astype(np.float32),
        ],
        ["values"],
    ),
    "advantage_weighted": (
        lambda: AdvantageWeightedLoss(3.0, 100.0),
        {"log_probs": fbatch(), "advantages": fbatch(), "weights": fbatch()},
        [
            rng.standard_normal(B).astype(np.float32),
            np.concatenate([rng.standard_normal(B - 2), [5.0, 40.0]]).astype(np.float32),  # two clipped
            rng.uniform(0.5, 1.5, B).astype(np.float32),
        ],
        ["log_probs"],
    ),
    "continuous_cql": (
        lambda: ContinuousCQLRegularizer(action_dim=2),
        {
            "q_data": fbatch(),
            "q_random": fbatch(M),
            "q_policy": fbatch(2 * M),
            "log_probs": fbatch(2 * M),
            "weights": fbatch(),
        },
        [
            rng.standard_normal(B).astype(np.float32),
            rng.standard_normal((B, M)).astype(np.float32),
            (rng.standard_normal((B, 2 * M)) * 4).astype(np.float32),
            rng.standard_normal((B, 2 * M)).astype(np.float32),
            rng.uniform(0.5, 1.5, B).astype(np.float32),
        ],
        ["q_data", "q_random", "q_policy"],
    ),
}


def loss_params():
    out = []
    for name in LOSSES:
        for ref, other in comparisons():
            marks = slow_if_torch_static(other)
            out.append(pytest.param(name, ref, other, id=f"{name}-{comparison_id(ref, other)}", marks=marks))
    return out


def loss_results(name, pair):
    make, spaces, inputs, wrt = LOSSES[name]
    test = ComponentTest(make(), {"loss": spaces}, pair)
    outputs = [np.asarray(x) for x in test.call("loss", *inputs)]
    _, grads = test.gradients("loss", *inputs, wrt_inputs=wrt)
    return outputs, grads


@pytest.mark.parametrize("name,ref_pair,pair", loss_params())
def test_offline_losses_and_input_gradients_agree(name, ref_pair, pair):
    got, ref = loss_results(name, pair), loss_results(name, ref_pair)
    for g, r in zip(got[0], ref[0]):
        np.testing.assert_allclose(g, r, atol=ATOL, rtol=RTOL)
    assert sorted(got[1]) == sorted(ref[1]) and ref[1]
    for key in ref[1]:
        assert np.any(ref[1][key] != 0), key  # a gradient that reaches the input
        np.testing.assert_allclose(got[1][key], ref[1][key], atol=GRAD_ATOL, rtol=GRAD_RTOL, err_msg=key)


# =========================================================================== agents
OBS = FloatBox(low=np.array([-1, -1, -8], np.float32), high=np.array([1, 1, 8], np.float32))
ACTIONS = FloatBox(-2.0, 2.0, shape=(1,))
HIDDEN = {"hidden": [16, 16]}
AGENTS = {
    "iql_discrete": (
        IQLAgent,
        IQLConfig(actor_network=HIDDEN, critic_network=HIDDEN, batch_size=32, optimizer={"learning_rate": 3e-3}),
        ("value_loss", "actor_loss", "critic_loss", "adv_weights"),
        ("actor/", "value/", "critic/", "critic_target/"),
    ),
    "iql": (
        IQLAgent,
        IQLConfig(actor_network=HIDDEN, critic_network=HIDDEN, batch_size=32, optimizer={"learning_rate": 3e-3}),
        ("value_loss", "actor_loss", "critic_loss", "adv_weights"),
        ("actor/", "value/", "critic/", "critic_target/"),
    ),
    "cql_sac": (
        CQLSACAgent,
        CQLSACConfig(
            actor_network=HIDDEN,
            critic_network=HIDDEN,
            batch_size=32,
            cql_samples=3,
            optimizer={"learning_rate": 3e-3},
        ),
        ("critic_loss", "actor_loss", "log_probs", "cql", "temperature_loss", "alpha"),
        ("actor/", "critic/", "critic_target/", "sac_loss/log_alpha"),
    ),
}


def batch(seed: int, n: int = 32, discrete: bool = False) -> dict[str, np.ndarray]:
    """One batch as ``agent.update(batch)`` takes it: unit-box actions (or indices of 3), bool terminals."""
    r = np.random.default_rng(seed)
    obs = lambda: (r.uniform(-1, 1, (n, 3)) * OBS.high).astype(np.float32)  # noqa: E731
    return {
        "obs": obs(),
        "actions": r.integers(0, 3, n) if discrete else r.uniform(-1, 1, (n, 1)).astype(np.float32),
        "rewards": r.standard_normal(n).astype(np.float32),
        "next_obs": obs(),
        "terminals": r.random(n) < 0.2,
    }


BATCHES = [batch(30), batch(31)]
DISCRETE_BATCHES = [batch(30, discrete=True), batch(31, discrete=True)]
_RUNS: dict = {}


def drive(algo: str, pair, batches=None) -> dict:
    """Initial weights, then per update its returned outputs (as numpy) and the weights after it."""
    cls, config, outputs, _ = AGENTS[algo]
    discrete = algo.endswith("_discrete")
    actions = Discrete(3) if discrete else ACTIONS
    batches = batches or (DISCRETE_BATCHES if discrete else BATCHES)
    agent = cls(config, OBS, actions, backend(pair), seed=0)
    out = {"initial": agent.get_weights(), "outputs": [], "weights": []}
    for b in batches:
        result = agent.update(b)
        assert set(result) == set(outputs)
        out["outputs"].append({k: np.asarray(agent.backend.to_numpy(v)).copy() for k, v in result.items()})
        out["weights"].append(agent.get_weights())
    return out


def run(algo: str, pair) -> dict:
    if (algo, pair) not in _RUNS:
        _RUNS[(algo, pair)] = drive(algo, pair)
    return _RUNS[(algo, pair)]


#: jax eager dispatches every op as its own small compiled program: building and updating these
#: agents took 48-155 s per case (load 14), so the agents are compared on jax static only; the
#: losses above compare jax eager too
SLOW_EAGER = {("jax", "eager")}
#: torch static (torch.compile of three train steps per agent) took 24-49 s per case on CI's two
#: cores: heavy; the tf and jax static cases compare these agents' compiled steps in CI
HEAVY_PAIRS = {("torch", "static")}
AGENT_PARAMS = [
    pytest.param(
        algo,
        *p.values[1:],
        id=f"{algo}-{p.id.split('-', 1)[1]}",
        marks=[*p.marks, *([pytest.mark.heavy] if p.values[2] in HEAVY_PAIRS else [])],
    )
    for algo in AGENTS
    for p in params(["pendulum"], torch_static=("pendulum",))
    if not SLOW_EAGER & set(p.values[1:])
]


@pytest.mark.parametrize("algo,ref_pair,pair", AGENT_PARAMS)
def test_offline_agents_same_losses_and_weights_after_updates(algo, ref_pair, pair):
    got, ref = run(algo, pair), run(algo, ref_pair)
    assert_same_weights(got["initial"], ref["initial"])
    for step, (tol_a, tol_r) in enumerate([(ATOL, RTOL), (GRAD_ATOL, GRAD_RTOL)]):
        for name in AGENTS[algo][2]:
            g, r = got["outputs"][step][name], ref["outputs"][step][name]
            assert g.shape == r.shape, name
            np.testing.assert_allclose(g, r, atol=tol_a, rtol=tol_r, err_msg=f"update {step + 1}: {name}")
    for after in (0, 1):
        assert_close_weights(got["weights"][after], ref["weights"][after])
    for part in AGENTS[algo][3]:
        assert moved(ref["initial"], ref["weights"][0], part), f"the first update must change {part}"


def test_offline_agent_parity_check_detects_a_slightly_different_batch():
    """Control: IQL fed a batch whose rewards differ by 1e-2 ends outside the tolerances."""
    ref = run("iql", ("torch", "eager"))
    other_batches = [dict(b) for b in BATCHES]
    other_batches[0]["rewards"] = other_batches[0]["rewards"] + 1e-2
    other = drive("iql", ("torch", "eager"), other_batches)
    assert_same_weights(other["initial"], ref["initial"])
    with pytest.raises(AssertionError):
        assert_close_weights(other["weights"][1], ref["weights"][1])
