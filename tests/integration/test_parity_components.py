"""Cross-backend parity of the DQN components: torch and tf, eager and static.

Each component is built alone from spaces (with :class:`rlgraph_core.testing.ComponentTest`) on
two different ``(backend, mode)`` pairs, from the same numpy-initialised weights, and fed the same
numpy inputs. Which pairs are compared comes from ``parity_pairs.py``: every installed pair
against the reference pair (torch eager), and tf static against tf eager; never a pair with
itself. Test ids read ``<compared>-vs-<reference>-<variant>``. Torch static runs only one variant
per component (``torch.compile`` costs seconds per function on CPU; marked ``slow``). On both
pairs the outputs must match

* a plain numpy computation of the same math (from the component's own numpy weights), and
* each other (outputs, losses and gradients),

within the stated tolerances. Initial weights must be bit-identical on both pairs.

Tolerances: forward values ``atol = rtol = 1e-5``; gradients ``atol = 1e-5, rtol = 1e-4``
(float32 sums in a different order differ by a few ulps; nothing here is ill-conditioned).
Integer outputs (actions) must be equal.
"""

import numpy as np
import pytest
from parity_pairs import comparison_id, comparisons, slow_if_torch_static

from rlgraph_core.agents.dqn import DQNConfig, DQNGraph  # noqa: E402
from rlgraph_core.components.exploration import EpsilonGreedy  # noqa: E402
from rlgraph_core.components.network import MLP, NetworkSpec  # noqa: E402
from rlgraph_core.components.preprocessors import BoxNormalizer  # noqa: E402
from rlgraph_core.components.q_head import QValueHead  # noqa: E402
from rlgraph_core.spaces import BoolBox, FloatBox, IntBox  # noqa: E402
from rlgraph_core.testing import ComponentTest  # noqa: E402
from rlgraph_core.testing.op_cases import NP_ACTIVATIONS  # noqa: E402

# torch static silently running eager (after a compile failure) would compare eager with eager.
pytestmark = pytest.mark.filterwarnings("error:torch.compile:RuntimeWarning")

ATOL = RTOL = 1e-5
GRAD_ATOL, GRAD_RTOL = 1e-5, 1e-4

BATCH = 32
NUM_ACTIONS = 3

rng = np.random.default_rng(2024)
OBS = rng.standard_normal((BATCH, 4)).astype(np.float32)
FEATURES = rng.standard_normal((BATCH, 8)).astype(np.float32)
LOW = np.array([-1.0, -np.inf, 0.0, -2.0], np.float32)
HIGH = np.array([1.0, np.inf, 10.0, 2.0], np.float32)
BOUNDED_OBS = np.stack(
    [rng.uniform(-1, 1, BATCH), rng.standard_normal(BATCH) * 5, rng.uniform(0, 10, BATCH), rng.uniform(-2, 2, BATCH)],
    -1,
).astype(np.float32)
LOSS_BATCH = {
    "obs": OBS,
    "actions": rng.integers(0, NUM_ACTIONS, BATCH),
    "rewards": rng.standard_normal(BATCH).astype(np.float32),
    "next_obs": rng.standard_normal((BATCH, 4)).astype(np.float32),
    "terminals": rng.random(BATCH) < 0.25,
    "discounts": np.full(BATCH, 0.99**3, np.float32),
    "weights": rng.uniform(0.5, 1.5, BATCH).astype(np.float32),
}
DRAWS = rng.random(BATCH).astype(np.float32)
LOSS_ARGS = tuple(LOSS_BATCH[k] for k in ("obs", "actions", "rewards", "next_obs", "terminals", "discounts", "weights"))


def batched(space):
    return space.with_batch_rank()


ACT_B = batched(IntBox(0, NUM_ACTIONS - 1, shape=()))
FLOAT_B = batched(FloatBox(shape=()))

# --- numpy references -------------------------------------------------------------------------
NP_ACT = NP_ACTIVATIONS  # the conformance suite's numpy activations


def np_mlp(w, prefix, x, n_layers, activation):
    for i in range(n_layers):
        x = NP_ACT[activation](x @ w[f"{prefix}dense_{i}/W"] + w[f"{prefix}dense_{i}/b"])
    return x


def np_head(w, prefix, f, dueling):
    if not dueling:
        return f @ w[f"{prefix}q/W"] + w[f"{prefix}q/b"]
    adv = f @ w[f"{prefix}advantage/W"] + w[f"{prefix}advantage/b"]
    return f @ w[f"{prefix}value/W"] + w[f"{prefix}value/b"] + adv - adv.mean(-1, keepdims=True)


def np_normalize(x, low, high):
    bounded = np.isfinite(low) & np.isfinite(high) & (high > low)
    scaled = 2 * (x - np.where(bounded, low, 0)) / np.where(bounded, high - low, 1) - 1
    return np.where(bounded, scaled, x)


def np_qnet(w, net, x, cfg, low=None, high=None):
    if cfg.preprocessor is not None and cfg.preprocessor.type == "box_normalize":
        x = np_normalize(x, low, high)
    f = np_mlp(w, f"{net}/trunk/", x, len(cfg.network.hidden), cfg.network.activation)
    return np_head(w, f"{net}/head/", f, cfg.dueling)


def np_dqn_loss(w, cfg, b, low=None, high=None):
    q = np_qnet(w, "policy", b["obs"], cfg, low, high)
    q_next_t = np_qnet(w, "target", b["next_obs"], cfg, low, high)
    q_next_o = np_qnet(w, "policy", b["next_obs"], cfg, low, high)
    a_star = (q_next_o if cfg.double_q else q_next_t).argmax(-1)
    rows = np.arange(len(q))
    target = b["rewards"] + b["discounts"] * (1 - b["terminals"]) * q_next_t[rows, a_star]
    td = q[rows, b["actions"]] - target
    per = np.where(np.abs(td) <= 1, 0.5 * td**2, np.abs(td) - 0.5) if cfg.loss_type == "huber" else td**2
    return np.mean(b["weights"] * per), np.abs(td)


# --- running a case on a pair, cached so the reference pair runs once per case ----------------
_RESULTS: dict = {}


def results(case: str, pair: tuple[str, str], compute):
    """``compute(pair)`` once per (case, pair)."""
    key = (case, pair)
    if key not in _RESULTS:
        _RESULTS[key] = compute(pair)
    return _RESULTS[key]


def assert_same_weights(got, ref):
    assert sorted(got) == sorted(ref)
    for k in ref:
        np.testing.assert_array_equal(got[k], ref[k], err_msg=k)


def assert_close_grads(got, ref):
    assert sorted(got) == sorted(ref)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], atol=GRAD_ATOL, rtol=GRAD_RTOL, err_msg=k)


TORCH_STATIC = ("torch", "static")


def with_pairs(variants, torch_static=()):
    """pytest params ``(reference pair, compared pair, variant)``: every comparison of
    ``parity_pairs.comparisons`` for each variant, torch static only for the variants listed in
    ``torch_static``.

    ``torch.compile`` takes seconds per function on CPU; the variants left out there run the same
    ops through the same compiler path as the ones kept, and the compiled DQN agent of
    test_parity_agent.py covers the rest of torch static.
    """
    out = []
    for variant in variants:
        keep = lambda p, v=variant: p != TORCH_STATIC or v in torch_static  # noqa: E731
        for ref, other in comparisons(keep):
            out.append(
                pytest.param(
                    ref, other, variant, id=f"{comparison_id(ref, other)}-{variant}", marks=slow_if_torch_static(other)
                )
            )
    return out


# --- networks ---------------------------------------------------------------------------------
NETWORKS = [
    ("relu", "lecun_uniform"),
    ("tanh", "glorot_uniform"),
    ("elu", "he_uniform"),
    ("leaky_relu", "orthogonal"),
    ("softplus", "lecun_uniform"),
    ("sigmoid", "glorot_uniform"),
]


@pytest.mark.parametrize("ref_pair,pair,activation", with_pairs([a for a, _ in NETWORKS], torch_static=("relu",)))
def test_mlp(ref_pair, pair, activation):
    initializer = dict(NETWORKS)[activation]
    spec = NetworkSpec(hidden=[16, 8], activation=activation, initializer=initializer)

    def compute(p):
        t = ComponentTest(MLP(spec, np.random.default_rng(7)), {"call": {"x": batched(FloatBox(shape=(4,)))}}, p)
        loss, grads = t.gradients("call", OBS, objective=lambda ops, y: ops.reduce_sum(ops.square(y)))
        return {"weights": t.get_weights(), "out": t.call("call", OBS), "loss": loss, "grads": grads}

    got, ref = results(f"mlp-{activation}", pair, compute), results(f"mlp-{activation}", ref_pair, compute)
    assert_same_weights(got["weights"], ref["weights"])
    for out in (got, ref):
        np.testing.assert_allclose(out["out"], np_mlp(out["weights"], "", OBS, 2, activation), atol=ATOL, rtol=RTOL)
    np.testing.assert_allclose(got["out"], ref["out"], atol=ATOL, rtol=RTOL)
    np.testing.assert_allclose(got["loss"], ref["loss"], atol=ATOL, rtol=RTOL)
    assert_close_grads(got["grads"], ref["grads"])


@pytest.mark.parametrize("ref_pair,pair,head", with_pairs(["linear", "dueling"], torch_static=("dueling",)))
def test_q_head(ref_pair, pair, head):
    dueling = head == "dueling"

    def compute(p):
        head = QValueHead(NUM_ACTIONS, dueling=dueling, rng=np.random.default_rng(3))
        t = ComponentTest(head, {"call": {"features": batched(FloatBox(shape=(8,)))}}, p)
        actions = LOSS_BATCH["actions"]
        loss, grads = t.gradients(
            "call",
            FEATURES,
            objective=lambda ops, q: ops.reduce_mean(ops.gather_last(q, ops.constant(actions, "int64"))),
        )
        return {"weights": t.get_weights(), "out": t.call("call", FEATURES), "loss": loss, "grads": grads}

    got, ref = results(f"head-{dueling}", pair, compute), results(f"head-{dueling}", ref_pair, compute)
    assert_same_weights(got["weights"], ref["weights"])
    for out in (got, ref):
        np.testing.assert_allclose(out["out"], np_head(out["weights"], "", FEATURES, dueling), atol=ATOL, rtol=RTOL)
    np.testing.assert_allclose(got["out"], ref["out"], atol=ATOL, rtol=RTOL)
    np.testing.assert_allclose(got["loss"], ref["loss"], atol=ATOL, rtol=RTOL)
    assert_close_grads(got["grads"], ref["grads"])


@pytest.mark.parametrize("ref_pair,pair,variant", with_pairs(["box"], torch_static=("box",)))
def test_box_normalizer(ref_pair, pair, variant):
    def compute(p):
        t = ComponentTest(BoxNormalizer(LOW, HIGH), {"call": {"x": batched(FloatBox(shape=(4,)))}}, p)
        return {"weights": t.get_weights(), "out": t.call("call", BOUNDED_OBS)}

    got, ref = results("normalizer", pair, compute), results("normalizer", ref_pair, compute)
    assert_same_weights(got["weights"], ref["weights"])
    for out in (got, ref):
        np.testing.assert_allclose(out["out"], np_normalize(BOUNDED_OBS, LOW, HIGH), atol=ATOL, rtol=RTOL)
    np.testing.assert_allclose(got["out"], ref["out"], atol=ATOL, rtol=RTOL)
    assert np.all(np.abs(got["out"][:, [0, 2, 3]]) <= 1 + 1e-6)


@pytest.mark.parametrize("ref_pair,pair,variant", with_pairs(["discrete"], torch_static=("discrete",)))
def test_epsilon_greedy(ref_pair, pair, variant):
    greedy = LOSS_BATCH["actions"]
    q_values = np.eye(NUM_ACTIONS, dtype=np.float32)[greedy]  # argmax = greedy, unique
    random_actions = (greedy + 1) % NUM_ACTIONS
    draws = DRAWS
    noise = np.stack([draws, random_actions.astype(np.float32)], axis=-1)

    def compute(p):
        t = ComponentTest(
            EpsilonGreedy(NUM_ACTIONS),
            {
                "explore": {
                    "q_values": batched(FloatBox(shape=(NUM_ACTIONS,))),
                    "noise": batched(FloatBox(shape=(2,))),
                    "value": FloatBox(shape=()),
                }
            },
            p,
        )
        return {eps: t.call("explore", q_values, noise, np.float32(eps)) for eps in (0.0, 0.3, 1.0)}

    got, ref = results("egreedy", pair, compute), results("egreedy", ref_pair, compute)
    for eps, out in got.items():
        assert out.dtype == ref[eps].dtype == np.int64
        np.testing.assert_array_equal(out, np.where(draws < eps, random_actions, greedy))
        np.testing.assert_array_equal(out, ref[eps])


# --- the DQN graph: loss, gradients, target sync ----------------------------------------------
LOSS_CONFIGS = {
    "double-huber": DQNConfig(network={"hidden": [16, 16]}, double_q=True, loss_type="huber"),
    "vanilla-mse": DQNConfig(network={"hidden": [16]}, double_q=False, loss_type="mse"),
    "dueling-normalized-tanh": DQNConfig(
        network={"hidden": [16, 16], "activation": "tanh"}, dueling=True, preprocessor="box_normalize"
    ),
}


def build_dqn_graph(cfg: DQNConfig, p, tau=None) -> ComponentTest:
    if tau is not None:
        cfg = cfg.model_copy(update={"tau": tau})
    obs_space = FloatBox(low=np.full(4, -3, np.float32), high=np.full(4, 3, np.float32))
    obs_b = batched(obs_space)
    return ComponentTest(
        DQNGraph(cfg, obs_space, NUM_ACTIONS, seed=11),
        {
            "act": {"obs": obs_b, "noise": batched(FloatBox(shape=(2,))), "value": FloatBox(shape=())},
            "greedy": {"obs": obs_b},
            "q_values": {"obs": obs_b},
            "loss": {
                "obs": obs_b,
                "actions": ACT_B,
                "rewards": FLOAT_B,
                "next_obs": obs_b,
                "terminals": batched(BoolBox(shape=())),
                "discounts": FLOAT_B,
                "weights": FLOAT_B,
            },
            "sync_target": {},
        },
        p,
    )


def perturbed_target(weights, seed=5):
    """The policy's weights plus noise as target weights (so the target differs from the policy).

    The preprocessor's constants (non-trainable scale/shift) stay as built.
    """
    noise = np.random.default_rng(seed)
    return {
        k: (v + 0.1 * noise.standard_normal(v.shape)).astype(np.float32)
        if k.startswith("target/") and "/preprocessor/" not in k
        else v
        for k, v in weights.items()
    }


@pytest.mark.parametrize(
    "ref_pair,pair,name", with_pairs(list(LOSS_CONFIGS), torch_static=("dueling-normalized-tanh",))
)
def test_dqn_loss_and_gradients(ref_pair, pair, name):
    cfg = LOSS_CONFIGS[name]
    obs = np.clip(LOSS_BATCH["obs"], -3, 3)
    next_obs = np.clip(LOSS_BATCH["next_obs"], -3, 3)
    args = (obs, *LOSS_ARGS[1:3], next_obs, *LOSS_ARGS[4:])

    def compute(p):
        t = build_dqn_graph(cfg, p)
        initial = t.get_weights()
        t.set_weights(perturbed_target(initial))
        loss, td = t.call("loss", *args)
        grad_loss, grads = t.gradients("loss", *args)
        return {
            "initial": initial,
            "weights": t.get_weights(),
            "loss": loss,
            "td": td,
            "grad_loss": grad_loss,
            "grads": grads,
            "greedy": t.call("greedy", obs),
        }

    got, ref = results(f"dqn-{name}", pair, compute), results(f"dqn-{name}", ref_pair, compute)
    assert_same_weights(got["initial"], ref["initial"])
    assert_same_weights(got["weights"], ref["weights"])  # the same perturbed target on both
    batch = dict(LOSS_BATCH, obs=obs, next_obs=next_obs)
    for out in (got, ref):
        w = out["weights"]
        np_loss, np_td = np_dqn_loss(w, cfg, batch, np.full(4, -3.0), np.full(4, 3.0))
        np.testing.assert_allclose(out["loss"], np_loss, atol=ATOL, rtol=RTOL)
        np.testing.assert_allclose(out["td"], np_td, atol=ATOL, rtol=RTOL)
        np.testing.assert_allclose(out["grad_loss"], out["loss"], atol=ATOL, rtol=RTOL)
        np.testing.assert_array_equal(
            out["greedy"], np_qnet(w, "policy", obs, cfg, np.full(4, -3.0), np.full(4, 3.0)).argmax(-1)
        )
    np.testing.assert_allclose(got["loss"], ref["loss"], atol=ATOL, rtol=RTOL)
    np.testing.assert_allclose(got["td"], ref["td"], atol=ATOL, rtol=RTOL)
    assert_close_grads(got["grads"], ref["grads"])
    # Gradients flow into the policy only: the target network is behind stop_gradient.
    assert any(np.abs(g).sum() > 0 for k, g in got["grads"].items() if k.startswith("policy/"))
    assert all(np.all(g == 0) for k, g in got["grads"].items() if k.startswith("target/"))


@pytest.mark.parametrize("ref_pair,pair,tau", with_pairs([1.0, 0.3], torch_static=(0.3,)))
def test_target_sync(ref_pair, pair, tau):
    cfg = LOSS_CONFIGS["double-huber"]

    def compute(p):
        t = build_dqn_graph(cfg, p, tau=tau)
        start = perturbed_target(t.get_weights())
        t.set_weights(start)
        t.call("sync_target")
        after_one = t.get_weights()
        t.call("sync_target")
        return {"start": start, "one": after_one, "two": t.get_weights()}

    got, ref = results(f"sync-{tau}", pair, compute), results(f"sync-{tau}", ref_pair, compute)
    assert_same_weights(got["start"], ref["start"])
    start = got["start"]
    targets = [k for k in start if k.startswith("target/") and "/preprocessor/" not in k]
    assert targets
    for key in targets:
        src = start["policy/" + key[len("target/") :]]
        assert not np.allclose(start[key], src), key  # the sync has something to do
        one = (1 - tau) * start[key] + tau * src
        two = (1 - tau) * one + tau * src
        for out in (got, ref):
            np.testing.assert_allclose(out["one"][key], one, atol=ATOL, rtol=RTOL, err_msg=key)
            np.testing.assert_allclose(out["two"][key], two, atol=ATOL, rtol=RTOL, err_msg=key)
        np.testing.assert_allclose(got["one"][key], ref["one"][key], atol=ATOL, rtol=RTOL, err_msg=key)
        np.testing.assert_allclose(got["two"][key], ref["two"][key], atol=ATOL, rtol=RTOL, err_msg=key)
