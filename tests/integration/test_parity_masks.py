"""Cross-backend parity of the masked categorical heads (Discrete and MultiDiscrete): on every
compared ``(backend, mode)`` pair of ``parity_pairs.py`` (torch eager the reference), from the same
initial weights and inputs, the sampled and greedy actions are equal and legal, and log-probabilities,
entropies and their gradients (with illegal logits that would dominate unmasked) agree. Their numpy
references are tests/core/test_masks.py's."""

import numpy as np
import pytest
from parity_pairs import comparison_params

from rlgraph_core.components.distributions import DistributionHead
from rlgraph_core.spaces import BoolBox, Discrete, FloatBox, IntBox, MultiDiscrete
from rlgraph_core.testing import ComponentTest

pytestmark = pytest.mark.filterwarnings("error:torch.compile:RuntimeWarning")

B, F = 32, 6
ATOL = RTOL = 1e-5
GRAD_ATOL, GRAD_RTOL = 1e-5, 1e-4
SPACES = {"discrete": Discrete(5), "multi": MultiDiscrete([3, 2, 4])}
rng = np.random.default_rng(7)
FEATURES = rng.standard_normal((B, F)).astype(np.float32)


def legal_flags(sizes):
    parts = []
    for n in sizes:
        m = rng.random((B, n)) < 0.4
        m[np.arange(B), rng.integers(0, n, B)] = True
        parts.append(m)
    return np.concatenate(parts, -1)


MASKS = {"discrete": legal_flags([5]), "multi": legal_flags([3, 2, 4])}
NOISE = {
    "discrete": rng.uniform(1e-6, 1, (B, 5)).astype(np.float32),
    "multi": rng.uniform(1e-6, 1, (B, 12)).astype(np.float32),
}
_RESULTS: dict = {}


def compute(kind, pair):
    key = (kind, pair)
    if key in _RESULTS:
        return _RESULTS[key]
    space, mask = SPACES[kind], MASKS[kind]
    k = 1 if kind == "discrete" else 3
    mask_b = BoolBox(shape=(mask.shape[1],)).with_batch_rank()
    feat_b = FloatBox(shape=(F,)).with_batch_rank()
    act_b = (IntBox(0, 4, shape=()) if kind == "discrete" else IntBox(0, 3, shape=(k,))).with_batch_rank()
    noise_b = FloatBox(0.0, 1.0, shape=(NOISE[kind].shape[1],)).with_batch_rank()
    with np.errstate(divide="ignore"):
        t = ComponentTest(
            DistributionHead(space, rng=np.random.default_rng(3)),
            {
                "sample": {"features": feat_b, "noise": noise_b, "mask": mask_b},
                "sample_actions": {"features": feat_b, "noise": noise_b, "mask": mask_b},
                "deterministic": {"features": feat_b, "mask": mask_b},
                "log_prob_entropy": {"features": feat_b, "actions": act_b, "mask": mask_b},
            },
            pair,
        )
    # Large weights: unmasked, illegal logits would win; masked, nothing may be NaN.
    t.set_weights({n: (w * 300.0).astype(np.float32) for n, w in t.get_weights().items()})
    actions, _ = t.call("sample", FEATURES, NOISE[kind], mask)
    loss, grads = t.gradients(
        "log_prob_entropy",
        FEATURES,
        actions,
        mask,
        objective=lambda ops, out: ops.reduce_mean(out[0]) + 0.1 * ops.reduce_mean(out[1]),
    )
    lp, ent = t.call("log_prob_entropy", FEATURES, actions, mask)
    _RESULTS[key] = {
        "weights": t.get_weights(),
        "actions": actions,
        "modes": t.call("deterministic", FEATURES, mask),
        "lp": lp,
        "ent": ent,
        "loss": loss,
        "grads": grads,
    }
    return _RESULTS[key]


def legal(kind, actions):
    mask = MASKS[kind]
    if kind == "discrete":
        return mask[np.arange(B), actions].all()
    offsets = np.array([0, 3, 5])
    return all(mask[np.arange(B), offsets[i] + actions[:, i]].all() for i in range(3))


@pytest.mark.parametrize("kind", list(SPACES))
@pytest.mark.parametrize("ref_pair,pair", comparison_params(keep=lambda p: p != ("torch", "static")))
def test_masked_heads_agree_across_backends(ref_pair, pair, kind):
    got, ref = compute(kind, pair), compute(kind, ref_pair)
    for k in ref["weights"]:
        np.testing.assert_array_equal(got["weights"][k], ref["weights"][k], err_msg=k)
    for out in (got, ref):
        assert legal(kind, out["actions"]) and legal(kind, out["modes"])
        assert np.isfinite(out["lp"]).all() and np.isfinite(out["ent"]).all()
        assert all(np.isfinite(g).all() for g in out["grads"].values())
    np.testing.assert_array_equal(got["actions"], ref["actions"])
    np.testing.assert_array_equal(got["modes"], ref["modes"])
    np.testing.assert_allclose(got["lp"], ref["lp"], atol=1e-3, rtol=RTOL)
    np.testing.assert_allclose(got["ent"], ref["ent"], atol=1e-4, rtol=RTOL)
    np.testing.assert_allclose(got["loss"], ref["loss"], atol=1e-3, rtol=RTOL)
    for k in ref["grads"]:
        np.testing.assert_allclose(
            got["grads"][k], ref["grads"][k], atol=GRAD_ATOL * 100, rtol=GRAD_RTOL * 10, err_msg=k
        )
