"""Replay of image observations: uint8 kept, every frame stored once, stacks rebuilt exactly.

The reference is plain numpy: the same records in a memory that stores every field as given
(``frames="off"``), and the stacks the gymnasium env itself produced (``FrameStackObservation``
through the ``frame_stack`` wrapper, across episode boundaries, with n-step folding).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlgraph_core.execution.local import true_next_obs
from rlgraph_core.memories import NStepAssembler, PrioritizedReplay, ReplayMemory
from rlgraph_core.memories.frames import FrameStore
from rlgraph_core.wrappers import FrameStackSettings, _frame_stack

from image_envs import H, W, DictFlickerEnv, FlickerEnv


def _stream(num_envs: int, steps: int, n_step: int, seed: int = 0):
    """Yield the n-step batches of a frame-stacked vector env, as an agent inserts them."""
    envs = gym.vector.SyncVectorEnv(
        [lambda: _frame_stack(FlickerEnv(), FrameStackSettings(stack_size=4))] * num_envs,
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    nstep = NStepAssembler(num_envs, n_step, 0.9)
    obs, _ = envs.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        actions = rng.integers(0, 2, num_envs)
        next_obs, rewards, term, trunc, infos = envs.step(actions)
        out = nstep.add(obs, actions, rewards, true_next_obs(next_obs, infos), term, trunc)
        if out is not None:
            yield out
        obs = next_obs
    envs.close()


@pytest.mark.parametrize("n_step", [1, 3])
@pytest.mark.parametrize("cls", [ReplayMemory, PrioritizedReplay])
def test_sampled_stacks_equal_the_env_stacks(cls, n_step):
    """Samples equal a plain memory's (the env's own stacks) through ring overwrites, priorities
    and a state round trip; frames are stored about once each."""
    framed, plain = cls(150, seed=3), cls(150, seed=3, frames="off")
    inserted = 0
    for batch in _stream(num_envs=3, steps=120, n_step=n_step):
        assert batch["obs"].dtype == np.uint8 and batch["obs"].shape[1:] == (H, W, 4)
        np.testing.assert_array_equal(framed.insert(batch), plain.insert(batch))
        inserted += len(batch["obs"])
        a, b = framed.sample(32), plain.sample(32)
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        assert a["obs"].dtype == np.uint8 and a["next_obs"].dtype == np.uint8
        if cls is PrioritizedReplay:
            td = np.random.default_rng(inserted).random(32)
            framed.update_priorities(a["indices"], td)
            plain.update_priorities(b["indices"], td)
    assert inserted > framed.capacity  # the ring wrapped: released frames were reused
    store = framed.frame_store("obs")
    # the 150 records hold about one new frame each (plus resets and the last next_obs)
    assert len(store) < 1.5 * framed.capacity
    plain_obs_bytes = plain._storage["obs"].nbytes + plain._storage["next_obs"].nbytes
    assert len(store) * store.frame_bytes < plain_obs_bytes / 5
    # every held frame is referenced, and the references are exactly the records' slots
    slots = np.concatenate([framed._storage[f][: len(framed)].ravel() for f in ("obs", "next_obs")])
    np.testing.assert_array_equal(np.bincount(slots, minlength=len(store.pool)), store.refs)

    state = framed.state_dict()
    assert "data/obs" not in state and state["frames/obs"].dtype == np.uint8
    restored, reference = cls(150, seed=0), cls(150, seed=0, frames="off")
    restored.load_state_dict(state)
    reference.load_state_dict(plain.state_dict())
    a, b = restored.sample(64), reference.sample(64)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    batch = next(_stream(num_envs=3, steps=5, n_step=1, seed=9))
    restored.insert(batch), reference.insert(batch)
    np.testing.assert_array_equal(restored.sample(16)["next_obs"], reference.sample(16)["next_obs"])


def test_dict_observations_are_stored_per_key():
    """A Dict observation (image + vector) is stored as one field per key and sampled back as a dict."""
    rng = np.random.default_rng(0)
    memory, reference = ReplayMemory(20, seed=1), ReplayMemory(20, seed=1, frames="off")
    for _ in range(6):
        obs = {"image": rng.integers(0, 256, (4, 5, 5, 3), dtype=np.uint8), "vector": rng.random((4, 3), np.float32)}
        batch = {"obs": obs, "actions": rng.integers(0, 3, 4), "next_obs": {k: v[::-1] for k, v in obs.items()}}
        memory.insert(batch), reference.insert(batch)
    assert set(memory.fields) == {"obs/image", "obs/vector", "actions", "next_obs/image", "next_obs/vector"}
    assert memory.framed_fields == {"obs/image": "obs/image", "next_obs/image": "obs/image"}
    a, b = memory.sample(8), reference.sample(8)
    assert set(a["obs"]) == {"image", "vector"} and a["obs"]["image"].dtype == np.uint8
    for key in ("obs", "next_obs"):
        for sub in ("image", "vector"):
            np.testing.assert_array_equal(a[key][sub], b[key][sub])
    restored = ReplayMemory(20, seed=1)
    restored.load_state_dict(memory.state_dict())
    x, y = restored.sample(4), memory.sample(4)
    np.testing.assert_array_equal(x["next_obs"]["image"], y["next_obs"]["image"])
    np.testing.assert_array_equal(x["obs"]["vector"], y["obs"]["vector"])


def test_frame_store_reference_counts_and_collisions():
    """Equal frames share a slot; a slot is reused only when its last reference is released."""
    store = FrameStore((2, 2), np.uint8, initial=16)
    a, b = np.zeros((2, 2), np.uint8), np.ones((2, 2), np.uint8)
    slots = store.add(np.stack([a, b, a, a]))
    assert slots[0] == slots[2] == slots[3] != slots[1] and len(store) == 2
    store.release(slots[:3])
    assert len(store) == 1 and store.refs[slots[0]] == 1  # b is freed, a keeps one reference
    store.release(slots[3:])
    assert len(store) == 0
    again = store.add(np.stack([a] * 20))  # one distinct frame, twenty references
    assert len(set(again.tolist())) == 1 and len(store) == 1 and store.refs[again[0]] == 20
    many = store.add(np.arange(40 * 4, dtype=np.uint8).reshape(40, 2, 2))  # grows past 16 slots
    assert len(store) == 41 and len(store.pool) >= 41
    np.testing.assert_array_equal(store.get(many), np.arange(160, dtype=np.uint8).reshape(40, 2, 2))


@pytest.mark.parametrize("n_step", [1, 3])
def test_nstep_folds_dict_observations_per_key(n_step):
    """n-step folding of a Dict observation equals folding each key's array on its own; dtypes kept."""
    rng = np.random.default_rng(n_step)
    whole = NStepAssembler(2, n_step, 0.9)
    by_key = {k: NStepAssembler(2, n_step, 0.9) for k in ("image", "vector")}
    for t in range(12):
        obs = {"image": rng.integers(0, 256, (2, 3, 3, 2), dtype=np.uint8), "vector": rng.random((2, 4))}
        nxt = {"image": rng.integers(0, 256, (2, 3, 3, 2), dtype=np.uint8), "vector": rng.random((2, 4))}
        args = (rng.integers(0, 2, 2), rng.random(2), rng.random(2) < 0.2, np.array([t == 7, False]))
        out = whole.add(obs, args[0], args[1], nxt, *args[2:])
        refs = {k: a.add(obs[k], args[0], args[1], nxt[k], *args[2:]) for k, a in by_key.items()}
        if out is None:
            assert all(r is None for r in refs.values())
            continue
        for k, ref in refs.items():
            np.testing.assert_array_equal(out["obs"][k], ref["obs"])
            np.testing.assert_array_equal(out["next_obs"][k], ref["next_obs"])
            np.testing.assert_array_equal(out["rewards"], ref["rewards"])
        assert out["obs"]["image"].dtype == np.uint8 and out["next_obs"]["image"].dtype == np.uint8


def test_rollout_buffer_keeps_uint8_and_stores_dicts_per_key():
    """Rollout storage keeps uint8 images and gives Dict observations back as dicts, in every view."""
    from rlgraph_core.memories import RolloutBuffer

    rng = np.random.default_rng(0)
    buf = RolloutBuffer(n_steps=5, num_envs=2, seed=0)
    steps = []
    for _ in range(5):
        obs = {"image": rng.integers(0, 256, (2, 4, 4, 3), dtype=np.uint8), "vector": rng.random((2, 3), np.float32)}
        steps.append(obs)
        buf.add(obs=obs, rewards=rng.random(2, np.float32))
    data = buf.data()
    assert data["obs"]["image"].dtype == np.uint8 and data["obs"]["image"].shape == (5, 2, 4, 4, 3)
    np.testing.assert_array_equal(data["obs"]["vector"], np.stack([s["vector"] for s in steps]))
    flat = buf.flat()
    np.testing.assert_array_equal(flat["obs"]["image"], np.stack([s["image"] for s in steps]).reshape(10, 4, 4, 3))
    seen = np.concatenate([mb["indices"] for mb in buf.minibatches(4, n_epochs=1)])
    assert sorted(seen.tolist()) == list(range(10))
    for mb in buf.minibatches(4):
        np.testing.assert_array_equal(mb["obs"]["image"], flat["obs"]["image"][mb["indices"]])


def test_true_next_obs_of_dict_observations_holds_the_final_observation():
    """At an episode end the next observation of a Dict env is its final one, per key; others unchanged."""
    envs = gym.vector.SyncVectorEnv([DictFlickerEnv] * 3, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    envs.reset(seed=0)
    ended = 0
    for _ in range(30):
        next_obs, _, term, trunc, infos = envs.step(np.zeros(3, np.int64))
        true = true_next_obs(next_obs, infos)
        for i in range(3):
            if term[i] or trunc[i]:
                ended += 1
                np.testing.assert_array_equal(true["image"][i], infos["final_obs"][i]["image"])
                assert true["vector"][i, 0] == infos["final_obs"][i]["vector"][0] > 0
                assert next_obs["vector"][i, 0] == 0  # the reset observation was replaced, not changed
            else:
                np.testing.assert_array_equal(true["image"][i], next_obs["image"][i])
    assert ended > 0
    envs.close()


def test_a_snapshot_keeps_frames_once_and_uint8_and_checks_record_spaces(tmp_path):
    """Replay snapshots (shard checkpoints) hold the shared frames as uint8, checked against the record spaces."""
    from rlgraph_core.errors import CheckpointError
    from rlgraph_core.memories.snapshot import load_memory_snapshot, save_memory_snapshot
    from rlgraph_core.spaces import BoolBox, FloatBox, IntBox

    memory = PrioritizedReplay(100, seed=0)
    for batch in _stream(num_envs=2, steps=40, n_step=1):
        memory.insert(batch)
    image = IntBox(0, 255, shape=(H, W, 4), dtype=np.uint8)
    records = {
        "obs": image,
        "next_obs": image,
        "actions": IntBox(0, 1, shape=(), dtype=np.int64),
        "rewards": FloatBox(shape=()),
        "terminals": BoolBox(shape=()),
        "discounts": FloatBox(0.0, 1.0, shape=()),
    }
    path = save_memory_snapshot(tmp_path / "snap", memory, {"inserted": len(memory)})
    restored = PrioritizedReplay(100, seed=5)
    load_memory_snapshot(path, restored, records)
    state = restored.state_dict()
    assert state["frames/obs"].dtype == np.uint8 and len(state["frames/obs"]) < 1.5 * len(memory)
    a, b = restored.sample(16), memory.sample(16)
    np.testing.assert_array_equal(a["next_obs"], b["next_obs"])
    wrong = dict(records, obs=IntBox(0, 255, shape=(H, W + 1, 4), dtype=np.uint8))
    with pytest.raises(CheckpointError, match="frames"):
        load_memory_snapshot(path, PrioritizedReplay(100), wrong)


def test_a_million_pong_transitions_pass_the_memory_check_on_24_gb():
    """The estimator counts shared frames: 1M Pong records (84x84, stack 4) take about 7.2 GB, not 226 GB."""
    from rlgraph_core.memories.sizing import check_replay_fits

    pong, actions = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8), gym.spaces.Discrete(6)
    size = check_replay_fits(10**6, pong, actions, prioritized=True, available=24 * 2**30, frame_stack=4)
    assert 7.0e9 < size < 7.3e9
    with pytest.raises(Exception, match="lower the capacity"):
        check_replay_fits(10**6, pong, actions, available=24 * 2**30, frames="off")
