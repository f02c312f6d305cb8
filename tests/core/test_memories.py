"""Tests for rlgraph_core.memories against plain numpy / Python reference computations."""

from __future__ import annotations

import io

import numpy as np
import pytest

from rlgraph_core.memories import (
    MinSegmentTree,
    NStepAssembler,
    PrioritizedReplay,
    ReplayMemory,
    SumSegmentTree,
)


def cartpole_batch(start: int, n: int) -> dict[str, np.ndarray]:
    """Records whose every field encodes its global insertion number, for order checks."""
    ids = np.arange(start, start + n)
    return {
        "obs": np.repeat(ids[:, None], 4, axis=1).astype(np.float32),
        "actions": ids.astype(np.int64),
        "rewards": ids.astype(np.float32),
        "next_obs": np.repeat(ids[:, None] + 0.5, 4, axis=1).astype(np.float32),
        "terminals": ids % 2 == 0,
        "discounts": np.full(n, 0.99, dtype=np.float32),
    }


def stored_ids(mem: ReplayMemory) -> np.ndarray:
    return mem.state_dict()["data/actions"]


def npz_round_trip(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    buf = io.BytesIO()
    np.savez(buf, **state)
    buf.seek(0)
    with np.load(buf, allow_pickle=False) as loaded:
        return {k: loaded[k] for k in loaded.files}


# ---------------------------------------------------------------------------- segment trees


@pytest.mark.parametrize("capacity", [1, 5, 37, 64])
def test_sum_tree_matches_numpy_with_duplicate_updates(capacity):
    rng = np.random.default_rng(0)
    tree = SumSegmentTree(capacity)
    leaves = np.zeros(capacity)
    for _ in range(50):
        k = rng.integers(1, 2 * capacity + 2)
        idx = rng.integers(0, capacity, size=k)  # duplicates are likely
        vals = rng.random(k) * 10
        tree.update(idx, vals)
        for i, v in zip(idx, vals):  # reference: sequential writes, last one wins
            leaves[i] = v
        np.testing.assert_allclose(tree.total(), leaves.sum(), rtol=1e-12)
        np.testing.assert_array_equal(tree[np.arange(capacity)], leaves)
        prefixes = rng.random(200) * leaves.sum()
        expected = np.searchsorted(np.cumsum(leaves), prefixes, side="right")
        np.testing.assert_array_equal(tree.find_prefixsum_index(prefixes), expected)


def test_segment_trees_with_large_batches():
    # Batches above 512 leaves take the per-level deduplicating update path.
    rng = np.random.default_rng(12)
    capacity = 3000
    sum_tree, min_tree = SumSegmentTree(capacity), MinSegmentTree(capacity)
    leaves = np.zeros(capacity)
    for _ in range(4):
        idx = rng.integers(0, capacity, size=2500)
        vals = rng.random(2500)
        vals[rng.random(2500) < 0.2] = 0.0  # zero leaves in the middle must be skipped
        sum_tree.update(idx, vals)
        min_tree.update(idx, vals)
        for i, v in zip(idx, vals):
            leaves[i] = v
        touched = np.unique(idx)
        np.testing.assert_array_equal(sum_tree[touched], leaves[touched])
        np.testing.assert_allclose(sum_tree.total(), leaves.sum(), rtol=1e-12)
        assert min_tree.min() == leaves[touched].min()
        prefixes = rng.random(5000) * leaves.sum()
        expected = np.searchsorted(np.cumsum(leaves), prefixes, side="right")
        np.testing.assert_array_equal(sum_tree.find_prefixsum_index(prefixes), expected)


def test_sum_tree_duplicate_index_last_write_wins():
    tree = SumSegmentTree(8)
    tree.update(np.array([3, 1, 3, 3, 1]), np.array([1.0, 2.0, 5.0, 7.0, 4.0]))
    assert tree[3] == 7.0 and tree[1] == 4.0
    assert tree.total() == 11.0


def test_sum_tree_prefix_search_skips_zero_leaves_at_the_end():
    tree = SumSegmentTree(6)
    tree.update(np.arange(3), np.array([1.0, 0.0, 2.0]))
    # The upper end (and anything rounded onto it) must map to the last positive leaf.
    found = tree.find_prefixsum_index(np.array([0.0, 0.999, 1.0, 3.0]))
    np.testing.assert_array_equal(found, [0, 0, 2, 2])


@pytest.mark.parametrize("capacity", [1, 7, 32])
def test_min_tree_matches_numpy(capacity):
    rng = np.random.default_rng(1)
    tree = MinSegmentTree(capacity)
    assert tree.min() == np.inf
    leaves = np.full(capacity, np.inf)
    for _ in range(50):
        idx = rng.integers(0, capacity, size=rng.integers(1, 10))
        vals = rng.normal(size=idx.size)
        tree.update(idx, vals)
        for i, v in zip(idx, vals):
            leaves[i] = v
        assert tree.min() == leaves.min()


def test_segment_tree_errors():
    with pytest.raises(ValueError, match="capacity"):
        SumSegmentTree(0)
    with pytest.raises(ValueError, match="capacity"):
        MinSegmentTree(2.5)
    tree = SumSegmentTree(4)
    with pytest.raises(ValueError, match="positive total"):
        tree.find_prefixsum_index(np.array([0.0]))
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        tree.update(np.array([4]), np.array([1.0]))
    with pytest.raises(ValueError, match="non-negative"):
        tree.update(np.array([0]), np.array([-1.0]))
    with pytest.raises(ValueError, match="same 1-d shape"):
        tree.update(np.array([0, 1]), np.array([1.0]))
    with pytest.raises(ValueError, match="integers"):
        tree.update(np.array([0.5]), np.array([1.0]))
    tree.update(np.array([0]), np.array([1.0]))
    with pytest.raises(ValueError, match="prefixes"):
        tree.find_prefixsum_index(np.array([1.5]))
    with pytest.raises(ValueError, match="finite"):
        MinSegmentTree(4).update(np.array([0]), np.array([np.nan]))


# ---------------------------------------------------------------------------- ReplayMemory


def test_ring_buffer_overwrite_order_matches_one_at_a_time_reference():
    rng = np.random.default_rng(2)
    capacity = 7
    mem = ReplayMemory(capacity, seed=0)
    reference = [None] * capacity
    cursor, count = 0, 0
    for _ in range(30):
        n = int(rng.integers(0, 12))  # includes empty and larger-than-capacity batches
        mem.insert(cartpole_batch(count, n))
        for rid in range(count, count + n):
            reference[cursor] = rid
            cursor = (cursor + 1) % capacity
        count += n
        filled = [r for r in reference if r is not None]
        assert len(mem) == len(filled)
        np.testing.assert_array_equal(stored_ids(mem), filled)


def test_insert_returns_slots_and_oversized_batch_keeps_newest():
    mem = ReplayMemory(5)
    np.testing.assert_array_equal(mem.insert(cartpole_batch(0, 3)), [0, 1, 2])
    np.testing.assert_array_equal(mem.insert(cartpole_batch(3, 12)), [0, 1, 2, 3, 4])
    # 15 records went through a 5-slot ring: slots hold 10..14 with 15 % 5 = 0 next.
    np.testing.assert_array_equal(stored_ids(mem), [10, 11, 12, 13, 14])
    np.testing.assert_array_equal(mem.insert(cartpole_batch(15, 2)), [0, 1])
    np.testing.assert_array_equal(stored_ids(mem), [15, 16, 12, 13, 14])


def test_schema_matching_inserts_store_what_checked_inserts_store():
    """Dicts of matching arrays skip the checks (the per-step path); other mappings, lists and
    different dtypes go through them. Both must store the same records in the same slots."""
    from types import MappingProxyType

    rng = np.random.default_rng(7)
    fast, checked = ReplayMemory(9, seed=0), ReplayMemory(9, seed=0)
    count = 0
    for _ in range(40):
        n = int(rng.integers(0, 14))  # empty, wrapping and larger-than-capacity batches
        batch = cartpole_batch(count, n)
        np.testing.assert_array_equal(fast.insert(batch), checked.insert(MappingProxyType(batch)))
        count += n
        assert len(fast) == len(checked)
        for key, value in fast.state_dict().items():
            np.testing.assert_array_equal(value, checked.state_dict()[key], err_msg=key)
    # values that are not arrays of the stored dtypes still convert (or fail) as before
    with pytest.raises(ValueError, match="'actions'.*int32"):
        fast.insert({**cartpole_batch(count, 2), "actions": np.array([1, 2], np.int32)})
    fast.insert({**cartpole_batch(count, 2), "terminals": [True, False]})
    np.testing.assert_array_equal(fast.state_dict()["data/terminals"][fast._next_index - 2 : fast._next_index], [1, 0])


def test_sample_returns_consistent_records():
    mem = ReplayMemory(100, seed=3)
    mem.insert(cartpole_batch(0, 60))
    assert mem.fields == ("obs", "actions", "rewards", "next_obs", "terminals", "discounts")
    out = mem.sample(256)
    assert set(out) == set(mem.fields) | {"indices"}
    assert out["obs"].shape == (256, 4) and out["obs"].dtype == np.float32
    assert out["terminals"].dtype == bool and out["indices"].dtype == np.int64
    assert out["indices"].min() >= 0 and out["indices"].max() < 60
    np.testing.assert_array_equal(out["actions"], out["indices"])  # record i was written to slot i
    np.testing.assert_array_equal(out["obs"][:, 0], out["indices"])


def test_uniform_sampling_is_uniform():
    mem = ReplayMemory(10, seed=4)
    mem.insert(cartpole_batch(0, 10))
    counts = np.bincount(mem.sample(100_000)["indices"], minlength=10)
    chi2 = ((counts - 10_000) ** 2 / 10_000).sum()
    assert chi2 < 40  # df = 9; p ~ 5e-6


def test_replay_memory_errors():
    with pytest.raises(ValueError, match="capacity"):
        ReplayMemory(0)
    with pytest.raises(ValueError, match="capacity"):
        ReplayMemory(True)
    mem = ReplayMemory(10)
    with pytest.raises(RuntimeError, match="empty"):
        mem.sample(4)
    mem.insert(cartpole_batch(0, 3))
    with pytest.raises(ValueError, match="batch_size"):
        mem.sample(0)
    bad = cartpole_batch(0, 2)
    del bad["discounts"]
    with pytest.raises(ValueError, match="same fields"):
        mem.insert(bad)
    bad = cartpole_batch(0, 2)
    bad["obs"] = bad["obs"].astype(np.float64)
    with pytest.raises(ValueError, match="'obs'.*float64"):
        mem.insert(bad)
    bad = cartpole_batch(0, 2)
    bad["obs"] = np.zeros((2, 5), dtype=np.float32)
    with pytest.raises(ValueError, match=r"shape \(5,\)"):
        mem.insert(bad)
    bad = cartpole_batch(0, 2)
    bad["rewards"] = bad["rewards"][:1]
    with pytest.raises(ValueError, match="same batch size"):
        mem.insert(bad)
    with pytest.raises(ValueError, match="reserved"):
        ReplayMemory(4).insert({"indices": np.zeros(2)})
    with pytest.raises(ValueError, match="non-empty dict"):
        ReplayMemory(4).insert({})
    assert len(mem) == 3  # rejected batches changed nothing


def test_replay_state_dict_round_trip_through_npz():
    mem = ReplayMemory(8, seed=5)
    mem.insert(cartpole_batch(0, 11))
    state = npz_round_trip(mem.state_dict())
    assert all(v.dtype != object for v in state.values())
    clone = ReplayMemory(8, seed=123)
    clone.load_state_dict(state)
    assert len(clone) == 8 and clone.fields == mem.fields
    for key, value in mem.state_dict().items():
        np.testing.assert_array_equal(clone.state_dict()[key], value)
    a, b = mem.sample(32), clone.sample(32)  # the generator state travels too
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    mem.insert(cartpole_batch(11, 3))
    clone.insert(cartpole_batch(11, 3))
    np.testing.assert_array_equal(stored_ids(mem), stored_ids(clone))

    empty = ReplayMemory(8)
    empty.load_state_dict(ReplayMemory(8).state_dict())
    assert len(empty) == 0 and empty.fields == ()


def test_replay_load_state_dict_validates():
    mem = ReplayMemory(8)
    mem.insert(cartpole_batch(0, 4))
    state = mem.state_dict()
    with pytest.raises(ValueError, match="capacity 8"):
        ReplayMemory(16).load_state_dict(state)
    with pytest.raises(ValueError, match="missing keys"):
        ReplayMemory(8).load_state_dict({k: v for k, v in state.items() if k != "size"})
    with pytest.raises(ValueError, match="unexpected keys"):
        ReplayMemory(8).load_state_dict({**state, "bogus": np.array(1)})
    with pytest.raises(ValueError, match="4 records"):
        ReplayMemory(8).load_state_dict({**state, "data/obs": state["data/obs"][:2]})
    with pytest.raises(ValueError, match="0-d"):
        ReplayMemory(8).load_state_dict({**state, "size": np.array([4])})
    with pytest.raises(ValueError, match="next_index"):
        ReplayMemory(8).load_state_dict({**state, "next_index": np.array(1)})
    other = ReplayMemory(8)
    other.insert({"obs": np.zeros((1, 3), dtype=np.float32)})
    with pytest.raises(ValueError, match="same fields"):
        other.load_state_dict(state)
    assert len(other) == 1  # a rejected state changes nothing


# ---------------------------------------------------------------------------- PrioritizedReplay


def test_per_new_records_get_max_priority_and_updates_are_stored_with_alpha():
    per = PrioritizedReplay(16, alpha=0.5, epsilon=0.01, seed=0)
    per.insert(cartpole_batch(0, 4))
    np.testing.assert_array_equal(per.priorities(np.arange(4)), 1.0)
    per.update_priorities(np.array([0, 2, 2]), np.array([3.0, 8.0, 0.0]))
    expected = np.array([3.01**0.5, 1.0, 0.01**0.5, 1.0])
    np.testing.assert_allclose(per.priorities(np.arange(4)), expected)
    assert per.max_priority == pytest.approx(3.01**0.5)  # 8.0 was overwritten, so it does not count
    per.insert(cartpole_batch(4, 2))
    np.testing.assert_allclose(per.priorities(np.array([4, 5])), 3.01**0.5)


def test_per_wrapping_insert_keeps_trees_consistent():
    per = PrioritizedReplay(1000, seed=13)
    per.insert(cartpole_batch(0, 700))
    per.update_priorities(np.arange(700), np.full(700, 3.0))
    per.insert(cartpole_batch(700, 700))  # wraps: slots 700..999 then 0..399, all get max priority
    stored = per.priorities(np.arange(1000))
    p_max = (3.0 + 1e-6) ** 0.6
    np.testing.assert_allclose(stored, p_max)
    np.testing.assert_allclose(per._sum_tree.total(), stored.sum(), rtol=1e-12)
    per.update_priorities(np.arange(400, 700), np.zeros(300))
    assert per._min_tree.min() == pytest.approx(1e-6**0.6)


def test_per_sampling_proportions_converge():
    rng = np.random.default_rng(6)
    per = PrioritizedReplay(20, alpha=0.7, seed=7)
    per.insert(cartpole_batch(0, 20))
    td = rng.random(20) * 5
    per.update_priorities(np.arange(20), td)
    p = (td + 1e-6) ** 0.7
    counts = np.zeros(20)
    for _ in range(400):
        counts += np.bincount(per.sample(500)["indices"], minlength=20)
    expected = 200_000 * p / p.sum()
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 60  # df = 19; p ~ 5e-6 under pure multinomial, stratification only lowers it


def test_per_stratified_sampling_covers_every_segment():
    per = PrioritizedReplay(32, seed=8)
    per.insert(cartpole_batch(0, 32))  # equal priorities: one draw per record's own segment
    np.testing.assert_array_equal(per.sample(32)["indices"], np.arange(32))


def test_per_weights_match_direct_formula_and_beta_anneals():
    rng = np.random.default_rng(9)
    per = PrioritizedReplay(50, alpha=0.6, beta=0.4, beta_final=1.0, beta_annealing_steps=10, seed=1)
    per.insert(cartpole_batch(0, 30))
    td = rng.random(30) * 3
    per.update_priorities(np.arange(30), td)
    p = (td + 1e-6) ** 0.6
    probs = p / p.sum()
    for call in range(14):
        beta = 0.4 + 0.6 * min(1.0, call / 10)
        assert per.beta == pytest.approx(beta)
        out = per.sample(64)
        w = (30 * probs[out["indices"]]) ** -beta
        w_max = (30 * probs.min()) ** -beta
        assert out["weights"].dtype == np.float32
        np.testing.assert_allclose(out["weights"], w / w_max, rtol=1e-6)
    assert per.beta == 1.0
    assert PrioritizedReplay(4, beta_annealing_steps=0).beta == 1.0


def test_per_state_dict_round_trip():
    per = PrioritizedReplay(16, alpha=0.6, beta_annealing_steps=100, seed=10)
    per.insert(cartpole_batch(0, 20))
    per.update_priorities(np.arange(16), np.linspace(0.0, 4.0, 16))
    per.sample(8)
    clone = PrioritizedReplay(16, alpha=0.6, beta_annealing_steps=100, seed=99)
    clone.load_state_dict(npz_round_trip(per.state_dict()))
    np.testing.assert_array_equal(clone.priorities(np.arange(16)), per.priorities(np.arange(16)))
    assert clone.max_priority == per.max_priority and clone.beta == per.beta
    a, b = per.sample(16), clone.sample(16)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    with pytest.raises(ValueError, match="alpha"):
        PrioritizedReplay(16, alpha=0.5).load_state_dict(per.state_dict())
    with pytest.raises(ValueError, match="missing keys"):
        PrioritizedReplay(16).load_state_dict(ReplayMemory(16).state_dict())
    bad = {**per.state_dict(), "priorities": np.zeros(16)}
    with pytest.raises(ValueError, match="positive"):
        PrioritizedReplay(16, alpha=0.6).load_state_dict(bad)


def test_per_errors():
    for kwargs, word in [
        ({"alpha": -1.0}, "alpha"),
        ({"beta": -0.1}, "beta"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"beta_annealing_steps": -1}, "beta_annealing_steps"),
    ]:
        with pytest.raises(ValueError, match=word):
            PrioritizedReplay(8, **kwargs)
    per = PrioritizedReplay(8)
    with pytest.raises(RuntimeError, match="empty"):
        per.sample(2)
    per.insert(cartpole_batch(0, 3))
    with pytest.raises(ValueError, match="number of stored records"):
        per.update_priorities(np.array([3]), np.array([1.0]))
    with pytest.raises(ValueError, match="non-negative"):
        per.update_priorities(np.array([0]), np.array([-1.0]))
    with pytest.raises(ValueError, match="non-negative"):
        per.update_priorities(np.array([0]), np.array([np.nan]))


# ---------------------------------------------------------------------------- NStepAssembler


def reference_nstep(steps, num_envs, n, gamma):
    """Per-env Python reference: list of emitted transitions (as tuples) per step."""
    pending = [[] for _ in range(num_envs)]  # items: [obs, action, list_of_rewards]
    outputs = []

    def make(item, next_obs, terminal):
        rewards = item[2]
        ret = sum(gamma**k * r for k, r in enumerate(rewards))
        return (item[0], item[1], ret, next_obs, terminal, gamma ** len(rewards))

    for obs, act, rew, next_obs, term, trunc in steps:
        emitted = []
        for e in range(num_envs):
            pending[e].append([obs[e], act[e], []])
            for item in pending[e]:
                item[2].append(float(rew[e]))
            if term[e] or trunc[e]:
                emitted.extend(make(item, next_obs[e], bool(term[e])) for item in pending[e])
                pending[e] = []
            elif len(pending[e][0][2]) == n:
                emitted.append(make(pending[e].pop(0), next_obs[e], False))
        outputs.append(emitted)
    return outputs


def random_steps(rng, num_envs, num_steps):
    steps = []
    for _ in range(num_steps):
        steps.append(
            (
                rng.normal(size=(num_envs, 2)).astype(np.float32),
                rng.integers(0, 4, size=num_envs),
                rng.normal(size=num_envs).astype(np.float32),
                rng.normal(size=(num_envs, 2)).astype(np.float32),
                rng.random(num_envs) < 0.08,
                rng.random(num_envs) < 0.06,
            )
        )
    return steps


@pytest.mark.parametrize("n", [1, 3, 5])
def test_nstep_matches_reference(n):
    gamma = 0.9
    rng = np.random.default_rng(11 + n)
    steps = random_steps(rng, 3, 300)
    expected = reference_nstep(steps, 3, n, gamma)
    asm = NStepAssembler(3, n, gamma)
    memory = ReplayMemory(64)  # every emitted batch must be insertable as is
    emitted_total = 0
    for step, want in zip(steps, expected):
        got = asm.add(*step)
        if not want:
            assert got is None
            continue
        emitted_total += len(want)
        memory.insert(got)
        obs, act, ret, next_obs, term, disc = (np.array(col) for col in zip(*want))
        np.testing.assert_array_equal(got["obs"], obs)
        np.testing.assert_array_equal(got["actions"], act)
        np.testing.assert_allclose(got["rewards"], ret, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got["next_obs"], next_obs)
        np.testing.assert_array_equal(got["terminals"], term)
        np.testing.assert_allclose(got["discounts"], disc, rtol=1e-6)
        assert got["rewards"].dtype == np.float32 and got["discounts"].dtype == np.float32
        assert got["terminals"].dtype == bool
    # Every step is emitted exactly once, except those still pending at the end.
    assert emitted_total + asm.pending.sum() == 3 * len(steps)


def test_nstep_one_step_is_identity():
    rng = np.random.default_rng(20)
    asm = NStepAssembler(4, 1, 0.97)
    for obs, act, rew, next_obs, term, trunc in random_steps(rng, 4, 20):
        out = asm.add(obs, act, rew, next_obs, term, trunc)
        np.testing.assert_array_equal(out["obs"], obs)
        np.testing.assert_array_equal(out["actions"], act)
        np.testing.assert_array_equal(out["rewards"], rew)
        np.testing.assert_array_equal(out["next_obs"], next_obs)
        np.testing.assert_array_equal(out["terminals"], term)
        np.testing.assert_allclose(out["discounts"], 0.97)


def test_nstep_truncation_bootstraps_and_termination_does_not():
    asm = NStepAssembler(2, 3, 0.5)
    obs = np.zeros((2, 1), dtype=np.float32)
    no = np.zeros(2, dtype=bool)
    assert asm.add(obs, np.array([0, 0]), np.array([1.0, 1.0]), obs + 1, no, no) is None
    out = asm.add(
        obs, np.array([1, 1]), np.array([2.0, 2.0]), obs + 2, np.array([True, False]), np.array([False, True])
    )
    np.testing.assert_array_equal(out["actions"], [0, 1, 0, 1])
    np.testing.assert_allclose(out["rewards"], [2.0, 2.0, 2.0, 2.0])
    np.testing.assert_array_equal(out["terminals"], [True, True, False, False])
    np.testing.assert_allclose(out["discounts"], [0.25, 0.5, 0.25, 0.5])
    assert asm.pending.tolist() == [0, 0]


def test_nstep_reset_and_errors():
    asm = NStepAssembler(2, 3, 0.9)
    obs = np.zeros((2, 3), dtype=np.float32)
    no = np.zeros(2, dtype=bool)
    asm.add(obs, np.zeros(2, dtype=np.int64), np.ones(2), obs, no, no)
    assert asm.pending.tolist() == [1, 1]
    asm.reset()
    assert asm.pending.tolist() == [0, 0]
    with pytest.raises(ValueError, match="num_envs=2"):
        asm.add(obs[:1], np.zeros(1), np.ones(1), obs[:1], no[:1], no[:1])
    with pytest.raises(ValueError, match="obs"):
        asm.add(np.zeros((2, 4)), np.zeros(2, dtype=np.int64), np.ones(2), obs, no, no)
    with pytest.raises(ValueError, match="n_step"):
        NStepAssembler(2, 0, 0.9)
    with pytest.raises(ValueError, match="gamma"):
        NStepAssembler(2, 3, 1.5)
    with pytest.raises(ValueError, match="num_envs"):
        NStepAssembler(0, 3, 0.9)
