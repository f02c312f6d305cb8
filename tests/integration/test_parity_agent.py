"""Cross-backend parity of the DQN agent: torch and tf, eager and static, and checkpoints.

Each test compares two different ``(backend, mode)`` pairs (``parity_pairs.py``: every installed
pair against the reference pair, torch eager, and tf static against tf eager; never a pair with
itself; ids read ``<compared>-vs-<reference>``). One config and one seed give, on both pairs:

* bit-identical initial weights (numpy initializers);
* the same greedy actions and Q-values (``atol = rtol = 1e-5``) on the same observations;
* the same loss on the same batch (``agent.loss_on``, ``rtol = 1e-5``);
* after ``agent.update(batch)`` (one and then three Adam steps with gradient clipping), the same
  weights within ``atol = 1e-5, rtol = 1e-4`` -- this needs equal optimizer math on both backends.

Each pair's agent is built and driven once (module cache); torch static (``torch.compile``) is
slow to compile on CPU, so it is this one agent (its comparisons are marked ``slow``).

Checkpoints written on one backend load on the other (weights are backend-neutral numpy; the
optimizer state is skipped across backends) and give the same greedy actions.
"""

import numpy as np
import pytest
from parity_pairs import PAIRS, REFERENCE, comparison_params, comparisons, pair_id, slow_if_torch_static

from rlgraph_core.agents.dqn import DQNAgent, DQNConfig  # noqa: E402
from rlgraph_core.assemble import make_backend  # noqa: E402
from rlgraph_core.spaces import Discrete, FloatBox  # noqa: E402

# torch static silently running eager (after a compile failure) would compare eager with eager.
pytestmark = pytest.mark.filterwarnings("error:torch.compile:RuntimeWarning")

ATOL = RTOL = 1e-5
WEIGHT_ATOL, WEIGHT_RTOL = 1e-5, 1e-4

OBS_SPACE = FloatBox(low=np.array([-4.8, -5, -0.42, -5], np.float32), high=np.array([4.8, 5, 0.42, 5], np.float32))
ACTION_SPACE = Discrete(2)
CONFIG = DQNConfig(
    network={"hidden": [32, 32]},
    dueling=True,
    double_q=True,
    batch_size=64,
    preprocessor="box_normalize",
    exploration=0.1,
    optimizer={"type": "adam", "learning_rate": 1e-3, "max_grad_norm": 1.0},
)

rng = np.random.default_rng(99)
OBSERVATIONS = (rng.uniform(-1, 1, (128, 4)) * OBS_SPACE.high).astype(np.float32)


def make_batch(seed):
    r = np.random.default_rng(seed)
    n = CONFIG.batch_size
    return {
        "obs": (r.uniform(-1, 1, (n, 4)) * OBS_SPACE.high).astype(np.float32),
        "actions": r.integers(0, 2, n),
        "rewards": r.standard_normal(n).astype(np.float32),
        "next_obs": (r.uniform(-1, 1, (n, 4)) * OBS_SPACE.high).astype(np.float32),
        "terminals": r.random(n) < 0.2,
        "discounts": np.full(n, 0.99, np.float32),
        "weights": r.uniform(0.5, 1.5, n).astype(np.float32),
    }


BATCHES = [make_batch(s) for s in range(4)]


def make_agent(pair, seed=0):
    backend_name, mode = pair
    return DQNAgent(
        CONFIG, OBS_SPACE, ACTION_SPACE, make_backend(backend_name, mode, device="cpu", seed=seed), seed=seed
    )


_RUNS: dict = {}


def run(pair):
    """Build the agent on ``pair`` and record everything the parity tests compare (once per pair)."""
    if pair not in _RUNS:
        agent = make_agent(pair)
        out = {
            "initial": agent.get_weights(),
            "greedy": agent.act(OBSERVATIONS, explore=False),
            "q": agent.backend.to_numpy(agent.graph.q_values(agent.backend.to_tensor(OBSERVATIONS))),
            "loss": agent.loss_on(BATCHES[0]),
        }
        agent.update(BATCHES[0])
        out["one_update"] = agent.get_weights()
        for batch in BATCHES[1:]:
            agent.update(batch)
        out["four_updates"] = agent.get_weights()
        out["loss_after"] = agent.loss_on(BATCHES[0])
        out["greedy_after"] = agent.act(OBSERVATIONS, explore=False)
        _RUNS[pair] = out
    return _RUNS[pair]


COMPARISONS = comparison_params(marks_for=slow_if_torch_static)


def test_comparisons_cover_every_pair_and_never_one_with_itself():
    """The parity tests below can fail: no pair is compared with itself, and every installed
    pair takes part in some comparison."""
    pairs = comparisons()
    assert all(ref != other for ref, other in pairs)
    assert len(set(pairs)) == len(pairs)
    if len(PAIRS) > 1:
        assert {p for c in pairs for p in c} == set(PAIRS)
        for ref, other in pairs:  # against the reference, or a backend's static mode against its eager mode
            assert ref == REFERENCE or (ref[0] == other[0] and (ref[1], other[1]) == ("eager", "static"))
    ids = [p.id for p in comparison_params()]
    assert all(id_.count("-vs-") == 1 and id_.split("-vs-")[0] != id_.split("-vs-")[1] for id_ in ids)


@pytest.mark.parametrize("ref_pair,pair", COMPARISONS)
def test_initial_weights_identical(ref_pair, pair):
    got, ref = run(pair)["initial"], run(ref_pair)["initial"]
    assert sorted(got) == sorted(ref)
    for k in ref:
        assert got[k].dtype == ref[k].dtype == np.float32
        np.testing.assert_array_equal(got[k], ref[k], err_msg=k)


@pytest.mark.parametrize("ref_pair,pair", COMPARISONS)
def test_same_greedy_actions_and_q_values(ref_pair, pair):
    got, ref = run(pair), run(ref_pair)
    np.testing.assert_allclose(got["q"], ref["q"], atol=ATOL, rtol=RTOL)
    np.testing.assert_array_equal(got["greedy"], ref["greedy"])
    np.testing.assert_array_equal(got["greedy"], got["q"].argmax(-1))
    assert len(set(got["greedy"])) == 2  # the observations exercise both actions


@pytest.mark.parametrize("ref_pair,pair", COMPARISONS)
def test_same_loss(ref_pair, pair):
    got, ref = run(pair), run(ref_pair)
    assert got["loss"] == pytest.approx(ref["loss"], rel=RTOL, abs=ATOL)


@pytest.mark.parametrize("stage", ["one_update", "four_updates"])
@pytest.mark.parametrize("ref_pair,pair", COMPARISONS)
def test_same_weights_after_updates(ref_pair, pair, stage):
    got, ref, initial = run(pair)[stage], run(ref_pair)[stage], run(ref_pair)["initial"]
    assert sorted(got) == sorted(ref)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], atol=WEIGHT_ATOL, rtol=WEIGHT_RTOL, err_msg=k)
    moved = [k for k in ref if k.startswith("policy/") and not np.allclose(ref[k], initial[k])]
    assert moved, "the update must change the policy weights"
    got_all, ref_all = run(pair), run(ref_pair)
    assert got_all["loss_after"] == pytest.approx(ref_all["loss_after"], rel=1e-4, abs=1e-5)
    np.testing.assert_array_equal(got_all["greedy_after"], ref_all["greedy_after"])


#: Checkpoint routes: every other installed backend's pairs to and from the reference pair (a
#: checkpoint is neutral npz, so each backend must read what the reference wrote and back).
CHECKPOINT_ROUTES = [
    route for p in PAIRS if REFERENCE is not None and p[0] != REFERENCE[0] for route in ((REFERENCE, p), (p, REFERENCE))
]


@pytest.mark.parametrize(
    "src,dst", CHECKPOINT_ROUTES, ids=[f"{pair_id(a)}->{pair_id(b)}" for a, b in CHECKPOINT_ROUTES]
)
def test_cross_backend_checkpoint(src, dst, tmp_path):
    if src not in PAIRS or dst not in PAIRS:
        pytest.skip(f"needs both {pair_id(src)} and {pair_id(dst)} installed")
    writer = make_agent(src, seed=1)
    for batch in BATCHES[:2]:
        writer.update(batch)
    writer.timesteps = 1234
    writer.save(tmp_path / "ckpt")
    reader = make_agent(dst, seed=2)  # a different seed: different weights until loaded
    assert not np.array_equal(
        reader.act(OBSERVATIONS, explore=False), writer.act(OBSERVATIONS, explore=False)
    ) or not all(np.array_equal(a, b) for a, b in zip(reader.get_weights().values(), writer.get_weights().values()))
    meta = reader.load(tmp_path / "ckpt")
    assert meta["backend"] == src[0]
    np.testing.assert_array_equal(reader.act(OBSERVATIONS, explore=False), writer.act(OBSERVATIONS, explore=False))
    for k, v in writer.get_weights().items():
        np.testing.assert_array_equal(reader.get_weights()[k], v, err_msg=k)
    assert reader.timesteps == 1234
    reader.update(BATCHES[2])  # training continues (fresh optimizer state on the new backend)
