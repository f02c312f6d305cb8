"""Legal-action masks: the masked categorical heads and DQN's masked target against plain numpy on
every installed ``(backend, mode)`` pair (the numpy harness always), the epsilon draw among legal
actions, where masks come from (``env.action_mask``), and the one-paragraph errors of bad masks."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlgraph_core.action_masks import with_action_mask
from rlgraph_core.components.distributions import DistributionHead
from rlgraph_core.components.dqn_loss import DQNLoss
from rlgraph_core.components.exploration import EpsilonGreedy, random_legal_actions
from rlgraph_core.components.masks import check_legal, mask_layout, split_observation
from rlgraph_core.errors import ConfigError
from rlgraph_core.spaces import BoolBox, Dict, Discrete, FloatBox, IntBox, MultiDiscrete
from rlgraph_core.testing import ComponentTest, backend_params
from rlgraph_core.testing.masked_env import IllegalActionError, PickLegalMax

B, F = 64, 5


@pytest.fixture(params=backend_params())
def backend(request):
    """A ``(backend_name, mode)`` pair: numpy-eager, and each plugin backend eager and static."""
    return request.param


def np_log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def fb(*shape):
    return FloatBox(shape=shape).with_batch_rank()


def random_mask(rng, shape):
    """Random flags with at least one legal action per row (last axis)."""
    mask = rng.random(shape) < 0.4
    rows = mask.reshape(-1, shape[-1])
    rows[np.arange(len(rows)), rng.integers(0, shape[-1], len(rows))] = True
    return rows.reshape(shape)


def head_test(action_space, size, backend, mask_space):
    """A built DistributionHead with every categorical API taking a mask, and weights that make
    logits of magnitude up to ~1e4 (so illegal ones would win without the mask)."""
    head = DistributionHead(action_space, rng=np.random.default_rng(0))
    action_b = IntBox(0, 100, shape=action_space.shape).with_batch_rank()
    with np.errstate(divide="ignore"):  # the build samples with all-zero uniform noise: log(0)
        test = ComponentTest(
            head,
            {
                "sample": {
                    "features": fb(F),
                    "noise": FloatBox(0.0, 1.0, shape=(size,)).with_batch_rank(),
                    "mask": mask_space,
                },
                "sample_actions": {
                    "features": fb(F),
                    "noise": FloatBox(0.0, 1.0, shape=(size,)).with_batch_rank(),
                    "mask": mask_space,
                },
                "deterministic": {"features": fb(F), "mask": mask_space},
                "log_prob_entropy": {"features": fb(F), "actions": action_b, "mask": mask_space},
            },
            backend,
        )
    rng = np.random.default_rng(1)
    w = {k: (rng.standard_normal(v.shape) * 2000).astype(np.float32) for k, v in test.get_weights().items()}
    test.set_weights(w)
    return test, w


def test_masked_categorical_matches_numpy(backend):
    n = 7
    rng = np.random.default_rng(3)
    test, w = head_test(Discrete(n), n, backend, IntBox(0, 1, shape=(n,), dtype="int8").with_batch_rank())
    feats = rng.standard_normal((B, F)).astype(np.float32)
    mask = random_mask(rng, (B, n))
    mask_i8 = mask.astype(np.int8)
    logits = (feats.astype(np.float64) @ w["logits/W"] + w["logits/b"]).astype(np.float64)
    legal_logits = np.where(mask, logits, -np.inf)
    logp = np_log_softmax(legal_logits)
    p = np.exp(logp)
    ref_entropy = -np.sum(np.where(mask, p * np.where(mask, logp, 0.0), 0.0), axis=-1)
    noise = rng.uniform(1e-6, 1.0, (B, n)).astype(np.float32)
    ref_sample = np.argmax(legal_logits - np.log(-np.log(noise.astype(np.float64))), axis=-1)

    actions, log_probs = test.call("sample", feats, noise, mask_i8)
    np.testing.assert_array_equal(actions, ref_sample)
    assert mask[np.arange(B), actions].all()
    np.testing.assert_allclose(log_probs, logp[np.arange(B), ref_sample], rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(test.call("sample_actions", feats, noise, mask_i8), ref_sample)
    np.testing.assert_array_equal(test.call("deterministic", feats, mask_i8), np.argmax(legal_logits, axis=-1))
    given = np.array([np.flatnonzero(row)[0] for row in mask])
    lp, ent = test.call("log_prob_entropy", feats, given, mask_i8)
    assert np.isfinite(lp).all() and np.isfinite(ent).all()
    np.testing.assert_allclose(lp, logp[np.arange(B), given], rtol=1e-4, atol=1e-2)
    np.testing.assert_allclose(ent, ref_entropy, rtol=1e-4, atol=1e-3)
    # one legal action: log-prob 0 and entropy 0 exactly (the illegal ones contribute nothing)
    only = np.zeros((B, n), np.int8)
    only[:, 2] = 1
    lp1, ent1 = test.call("log_prob_entropy", feats, np.full(B, 2), only)
    np.testing.assert_array_equal(lp1, 0.0)
    np.testing.assert_array_equal(ent1, 0.0)


def test_masked_multi_categorical_matches_numpy(backend):
    nvec = (3, 2, 4)  # ragged: the padded slots are never chosen, masked or not
    size = sum(nvec)
    k, m = len(nvec), max(nvec)
    rng = np.random.default_rng(4)
    test, w = head_test(MultiDiscrete(nvec), k * m, backend, BoolBox(shape=(size,)).with_batch_rank())
    feats = rng.standard_normal((B, F)).astype(np.float32)
    masks = [random_mask(rng, (B, n)) for n in nvec]
    flat = np.concatenate(masks, axis=-1)
    logits = (feats.astype(np.float64) @ w["logits/W"] + w["logits/b"]).reshape(B, k, m)
    noise = rng.uniform(1e-6, 1.0, (B, k * m)).astype(np.float32)
    gumbel = -np.log(-np.log(noise.astype(np.float64))).reshape(B, k, m)
    ref_actions, ref_modes, ref_ent = [], [], np.zeros(B)
    for i, n in enumerate(nvec):
        legal = np.where(masks[i], logits[:, i, :n], -np.inf)
        ref_actions.append(np.argmax(legal + gumbel[:, i, :n], axis=-1))
        ref_modes.append(np.argmax(legal, axis=-1))
        logp = np_log_softmax(legal)
        ref_ent -= np.sum(np.where(masks[i], np.exp(logp) * np.where(masks[i], logp, 0.0), 0.0), axis=-1)
    ref_actions, ref_modes = np.stack(ref_actions, -1), np.stack(ref_modes, -1)
    ref_lp = sum(
        np_log_softmax(np.where(masks[i], logits[:, i, :n], -np.inf))[np.arange(B), ref_actions[:, i]]
        for i, n in enumerate(nvec)
    )

    actions, log_probs = test.call("sample", feats, noise, flat)
    np.testing.assert_array_equal(actions, ref_actions)
    np.testing.assert_allclose(log_probs, ref_lp, rtol=1e-4, atol=1e-2)
    np.testing.assert_array_equal(test.call("deterministic", feats, flat), ref_modes)
    lp, ent = test.call("log_prob_entropy", feats, ref_actions, flat)
    np.testing.assert_allclose(lp, ref_lp, rtol=1e-4, atol=1e-2)
    np.testing.assert_allclose(ent, ref_ent, rtol=1e-4, atol=1e-3)


def test_unmasked_ragged_multi_discrete_never_picks_a_padded_slot(backend):
    nvec = (2, 5)
    head = DistributionHead(MultiDiscrete(nvec), rng=np.random.default_rng(0))
    with np.errstate(divide="ignore"):
        test = ComponentTest(
            head,
            {
                "sample": {"features": fb(F), "noise": fb(10)},
                "sample_actions": {"features": fb(F), "noise": fb(10)},
                "deterministic": {"features": fb(F)},
                "log_prob_entropy": {"features": fb(F), "actions": IntBox(0, 4, shape=(2,)).with_batch_rank()},
            },
            backend,
        )
    w = test.get_weights()
    b = np.zeros_like(w["logits/b"])
    b[2:5] = 100.0  # the padded slots 2..4 of sub-action 0 would win
    test.set_weights({"logits/W": np.zeros_like(w["logits/W"]), "logits/b": b})
    modes = test.call("deterministic", np.zeros((3, F), np.float32))
    assert (modes[:, 0] < 2).all() and (modes[:, 1] < 5).all()


def test_dqn_target_bootstraps_from_the_best_legal_action(backend):
    n = 4
    rng = np.random.default_rng(5)
    spaces = {
        "loss": {
            "q_values": fb(n),
            "actions": IntBox(0, n - 1, shape=()).with_batch_rank(),
            "rewards": fb(),
            "terminals": BoolBox().with_batch_rank(),
            "discounts": fb(),
            "q_next_target": fb(n),
            "q_next_online": fb(n),
            "weights": fb(),
            "next_mask": BoolBox(shape=(n,)).with_batch_rank(),
        }
    }
    for double_q in (True, False):
        test = ComponentTest(DQNLoss("mse", double_q), spaces, backend)
        q, qt, qo = (rng.standard_normal((B, n)).astype(np.float32) for _ in range(3))
        qo[:, 0] = qt[:, 0] = 100.0  # illegal everywhere below: would win without the mask
        mask = random_mask(rng, (B, n))
        mask[:, 0] = False
        mask[-1] = False  # a finished game's final observation: nothing legal, value stays finite
        acts = rng.integers(0, n, B)
        r = rng.standard_normal(B).astype(np.float32)
        term = rng.random(B) < 0.3
        term[-1] = True
        disc = np.full(B, 0.9, np.float32)
        wts = np.ones(B, np.float32)
        selector = np.where(mask, qo if double_q else qt, -np.inf)
        best = np.where(mask.any(-1), np.argmax(selector, -1), 0)
        target = r + disc * (1 - term) * qt[np.arange(B), best]
        td = q[np.arange(B), acts] - target
        loss, abs_td = test.call("loss", q, acts, r, term, disc, qt, qo, wts, mask)
        np.testing.assert_allclose(abs_td, np.abs(td), rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(loss, np.mean(td**2), rtol=1e-5, atol=1e-4)


def test_epsilon_greedy_draws_only_legal_actions_uniformly():
    rng = np.random.default_rng(0)
    legal = np.zeros((20_000, 5), np.int8)
    legal[:, [1, 3, 4]] = 1
    legal[:10, :] = 0
    legal[:10, 2] = 1  # a row with one legal action
    actions = random_legal_actions(rng, legal)
    assert legal[np.arange(len(legal)), actions].all()
    counts = np.bincount(actions[10:], minlength=5) / (len(legal) - 10)
    np.testing.assert_allclose(counts[[1, 3, 4]], 1 / 3, atol=0.015)
    noise = EpsilonGreedy(5, 1.0).draw_noise(rng, len(legal), legal=legal)
    assert legal[np.arange(len(legal)), noise[:, 1].astype(np.int64)].all()


def test_mask_layout_and_split():
    obs_space = Dict({"observation": FloatBox(shape=(3,)), "action_mask": IntBox(0, 1, shape=(4,), dtype="int8")})
    layout = mask_layout(obs_space, Discrete(4))
    assert layout.policy_space == FloatBox(shape=(3,)) and layout.single_key == "observation"
    obs = {"observation": np.ones((2, 3)), "action_mask": np.ones((2, 4))}
    policy_obs, mask = split_observation(obs, layout)
    assert policy_obs is obs["observation"] and mask is obs["action_mask"]
    three = Dict({"a": FloatBox(shape=(1,)), "b": FloatBox(shape=(2,)), "action_mask": BoolBox(shape=(4,))})
    assert mask_layout(three, Discrete(4)).policy_space == Dict({"a": FloatBox(shape=(1,)), "b": FloatBox(shape=(2,))})
    assert mask_layout(FloatBox(shape=(3,)), Discrete(4)) is None
    assert mask_layout(Dict({"x": FloatBox(shape=(3,))}), Discrete(4)) is None
    assert mask_layout(Dict({"x": FloatBox(shape=(3,)), "action_mask": BoolBox(shape=(9,))}), MultiDiscrete([4, 5]))


def test_bad_masks_are_one_paragraph_errors():
    wrong = Dict({"observation": FloatBox(shape=(3,)), "action_mask": BoolBox(shape=(5,))})
    with pytest.raises(ConfigError, match=r"has shape \(5,\), but the action space .* needs a mask of shape \(4,\)"):
        mask_layout(wrong, Discrete(4), "PPO")
    with pytest.raises(ConfigError, match="not Discrete or MultiDiscrete"):
        mask_layout(wrong, FloatBox(shape=(2,)), "PPO")
    with pytest.raises(ConfigError, match="only the legal-action mask"):
        mask_layout(Dict({"action_mask": BoolBox(shape=(4,))}), Discrete(4))
    with pytest.raises(ValueError, match="mask of env 1 at env step 37 allows no action"):
        check_legal(np.array([[0, 1, 0], [0, 0, 0]], np.int8), 37)
    with pytest.raises(ValueError, match="env 0 at env step 5 allows no value of sub-action 1"):
        check_legal(np.array([[1, 0, 0, 0, 0]]), 5, nvec=(2, 3))
    check_legal(np.array([[0, 1, 1, 0, 0]]), 5, nvec=(2, 3))


# --------------------------------------------------------------------------- env side
def test_action_masks_method_becomes_an_observation_key():
    env = with_action_mask(PickLegalMax(n=4, mask_in="method"))
    assert set(env.observation_space.spaces) == {"observation", "action_mask"}
    obs, _ = env.reset(seed=0)
    assert obs["action_mask"].dtype == np.int8
    np.testing.assert_array_equal(obs["action_mask"], env.unwrapped.action_masks())
    legal = int(np.flatnonzero(obs["action_mask"])[0])
    obs, *_ = env.step(legal)
    np.testing.assert_array_equal(obs["action_mask"], env.unwrapped.action_masks())  # the new state's mask
    illegal = np.flatnonzero(obs["action_mask"] == 0)
    if illegal.size:
        with pytest.raises(IllegalActionError):
            env.step(int(illegal[0]))
    # a PettingZoo-style key is used as it is; an env without either is left alone
    keyed = PickLegalMax(n=4)
    assert with_action_mask(keyed) is keyed
    plain = gym.make("CartPole-v1")
    assert with_action_mask(plain) is plain


def test_named_mask_sources():
    env = with_action_mask(PickLegalMax(n=4, mask_in="method"), "action_masks()")
    assert "action_mask" in env.observation_space.spaces
    renamed = with_action_mask(
        gym.wrappers.TransformObservation(
            PickLegalMax(n=4),
            lambda o: {"obs": o["observation"], "legal": o["action_mask"]},
            gym.spaces.Dict({"obs": gym.spaces.Box(0, 1, (4,)), "legal": gym.spaces.Box(0, 1, (4,), np.int8)}),
        ),
        "legal",
    )
    assert set(renamed.observation_space.spaces) == {"obs", "action_mask"}
    assert set(renamed.reset(seed=0)[0]) == {"obs", "action_mask"}
    with pytest.raises(
        ConfigError,
        match=r"env.action_mask = 'legal_moves' is not a key of the env's observation \(its keys are \['action_mask', 'observation'\]\)",
    ):
        with_action_mask(PickLegalMax(n=4), "legal_moves")
    with pytest.raises(ConfigError, match="has no method 'legal_moves' to call"):
        with_action_mask(gym.make("CartPole-v1"), "legal_moves()")


def test_vector_env_carries_masks_and_final_masks():
    from rlgraph_core.config.sections import EnvConfig
    from rlgraph_core.envs import make_vector_env
    from rlgraph_core.execution.env_runner import true_next_obs

    cfg = EnvConfig(
        id="rlgraph_core.testing.masked_env:PickLegalMax", num_envs=2, kwargs={"mask_in": "method", "length": 3}
    )
    envs = make_vector_env(cfg, seed=0)
    try:
        obs, _ = envs.reset(seed=0)
        assert obs["action_mask"].shape == (2, 6)
        for t in range(3):
            actions = np.array([np.flatnonzero(m)[0] for m in obs["action_mask"]])
            obs, _, terminated, _, infos = envs.step(actions)
        assert terminated.all()
        final = true_next_obs(obs, infos)
        np.testing.assert_array_equal(final["action_mask"], 0)  # the finished episodes' final masks
        assert obs["action_mask"].any(axis=-1).all()  # the next episodes' first masks
    finally:
        envs.close()


def test_a_mask_method_of_the_wrong_length_names_the_episode_step():
    class Grows(PickLegalMax):
        def action_masks(self):
            return np.ones(self.n + (self._t >= 2), bool)

    env = with_action_mask(Grows(n=3, p_legal=1.0, mask_in="method"))
    env.reset(seed=0)
    env.step(0)
    with pytest.raises(
        ValueError,
        match=r"action_masks\(\) returned 4 flags at step 2 of the episode, but its action space Discrete\(3\) needs 3",
    ):
        env.step(0)
