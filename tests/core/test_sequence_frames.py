"""The sequence replay of a recurrent DQN (R2D2) with image and Dict observations, in plain numpy:
windows of ``seq_len + 1`` uint8 frames are stored as frame slots into one shared pool, so a frame
that many overlapping windows hold is stored once (no copy per window, no next-obs copy), and what
a sampled window returns is exactly the frames that were added, per key of a Dict observation,
through a snapshot (arrays only, no pickling) too."""

from __future__ import annotations

import numpy as np
import pytest

from rlgraph_core.errors import CheckpointError
from rlgraph_core.memories import PrioritizedReplay, ReplayMemory
from rlgraph_core.memories.sequences import SequenceAssembler
from rlgraph_core.memories.snapshot import load_memory_snapshot, save_memory_snapshot
from rlgraph_core.spaces import BoolBox, FloatBox, IntBox


def fill(memory, num_envs: int, burn_in: int, seq_len: int, steps: int, obs_of, seed: int = 0) -> dict:
    """Step ``num_envs`` made-up envs ``steps`` times through a :class:`SequenceAssembler` into
    ``memory``; ``obs_of(rng, num_envs)`` draws a step's observations. Returns the plain numpy
    reference: every step's observation, action and state per env, and the window starts."""
    rng = np.random.default_rng(seed)
    assembler = SequenceAssembler(num_envs, burn_in, seq_len)
    seen: dict = {"obs": [], "actions": [], "h": [], "windows": []}
    for i in range(steps):
        obs = obs_of(rng, num_envs)
        actions = rng.integers(0, 3, num_envs)
        h = rng.normal(size=(num_envs, 4)).astype(np.float32)
        seen["obs"].append(obs)
        seen["actions"].append(actions)
        seen["h"].append(h)
        record = assembler.add(
            obs, rng.random(num_envs) < 0.2, {"h": h}, actions, rng.random(num_envs), np.zeros(num_envs, bool),
            np.zeros(num_envs, bool),
        )  # fmt: skip
        if record is not None:
            memory.insert(record)
            seen["windows"].append(i - seq_len)  # the window's first step
    return seen


def frames(rng, n):
    """A step's observations: distinct random 84x84 uint8 frames (one channel)."""
    return rng.integers(0, 256, (n, 84, 84, 1), dtype=np.uint8)


def window_of(seen: dict, slot: int, num_envs: int, seq_len: int, key: str | None = None) -> np.ndarray:
    """The ``seq_len + 1`` observations of the window stored in ``slot`` (no wrap-around), from the reference."""
    start, env = seen["windows"][slot // num_envs], slot % num_envs
    steps = seen["obs"][start : start + seq_len + 1]
    return np.stack([(s if key is None else s[key])[env] for s in steps])


@pytest.mark.parametrize("cls", [ReplayMemory, PrioritizedReplay])
def test_a_window_returns_the_frames_added_and_each_frame_is_stored_once(cls):
    """2 envs x 130 steps of 84x84 uint8 frames, windows of 8 steps (+1 observation) every 2 steps
    (burn-in 6): 122 windows of 9 frames hold 1,098 frame copies, but the memory stores each of the
    2 x 129 frames they reach once, and its bytes are about one frame per step (the pool grows by
    half when full), not the 4.3 frames per step of windows stored as given."""
    num_envs, burn_in, seq_len, steps = 2, 6, 8, 130
    memory = cls(128, seed=0)
    seen = fill(memory, num_envs, burn_in, seq_len, steps, frames)
    records = len(memory)
    assert records == num_envs * len(seen["windows"]) == 122
    sample = memory.sample(32)
    assert sample["obs"].dtype == np.uint8 and sample["obs"].shape == (32, seq_len + 1, 84, 84, 1)
    for i, slot in enumerate(sample["indices"]):
        np.testing.assert_array_equal(sample["obs"][i], window_of(seen, int(slot), num_envs, seq_len))
        start, env = seen["windows"][slot // num_envs], slot % num_envs
        np.testing.assert_array_equal(sample["actions"][i], [a[env] for a in seen["actions"][start : start + seq_len]])
        np.testing.assert_array_equal(sample["state"]["h"][i], seen["h"][start][env])
    # one stored frame per step the windows reach (steps 0 ... last window start + seq_len, per env)
    reached = num_envs * (seen["windows"][-1] + seq_len + 1)
    store = memory.frame_store("obs")
    frame = 84 * 84
    assert len(store) == reached == 258
    assert memory.framed_fields == {"obs": "obs"} and memory.state_dict()["frames/obs"].shape == (reached, 84, 84)
    copies = records * (seq_len + 1) * frame  # each window's frames stored as given
    assert memory.nbytes() <= 1.5 * reached * frame and copies >= 3 * memory.nbytes(), (memory.nbytes(), copies)


def test_overwritten_windows_free_their_frames_and_the_pool_stays_one_frame_per_step():
    """A full memory (16 windows) overwritten many times: windows still return the frames added,
    and the frames held are those of the windows held, once each."""
    num_envs, burn_in, seq_len = 2, 2, 6
    memory = PrioritizedReplay(16, seed=1)
    seen = fill(memory, num_envs, burn_in, seq_len, 200, lambda rng, n: rng.integers(0, 256, (n, 6, 6, 2), np.uint8))
    written = num_envs * len(seen["windows"])
    assert len(memory) == 16 and written > 6 * 16
    sample = memory.sample(16)
    for i, slot in enumerate(sample["indices"]):
        newest = written - 1 - ((written - 1 - slot) % 16)  # the record number now in this slot
        np.testing.assert_array_equal(sample["obs"][i], window_of(seen, int(newest), num_envs, seq_len))
    held_windows = 16 // num_envs  # the newest 8 windows of each env, each 4 steps after the last
    held_steps = (held_windows - 1) * (seq_len - burn_in) + seq_len + 1
    assert len(memory.frame_store("obs")) == num_envs * held_steps * 2  # 2 channels: 2 frames per step


def test_dict_observations_are_stored_per_key_the_image_as_shared_frames():
    """{image: uint8 (6, 6, 3), vector: float32 (3,)}: the image key as shared frames, the vector as
    float32 windows; a sampled window is the dict of what was added, key by key."""
    num_envs, burn_in, seq_len = 3, 3, 6

    def dict_obs(rng, n):
        return {
            "image": rng.integers(0, 256, (n, 6, 6, 3), dtype=np.uint8),
            "vector": rng.normal(size=(n, 3)).astype(np.float32),
        }

    memory = PrioritizedReplay(100, seed=2)
    seen = fill(memory, num_envs, burn_in, seq_len, 40, dict_obs)
    assert memory.framed_fields == {"obs/image": "obs/image"}
    assert {"obs/image", "obs/vector"} <= set(memory.fields)
    sample = memory.sample(20)
    assert sample["obs"]["image"].dtype == np.uint8 and sample["obs"]["vector"].dtype == np.float32
    for i, slot in enumerate(sample["indices"]):
        for key in ("image", "vector"):
            np.testing.assert_array_equal(sample["obs"][key][i], window_of(seen, int(slot), num_envs, seq_len, key))
    reached = num_envs * (seen["windows"][-1] + seq_len + 1)
    assert len(memory.frame_store("obs/image")) == 3 * reached  # 3 channels


def test_a_snapshot_of_sequence_frames_round_trips_as_arrays_and_checks_the_record_spaces(tmp_path):
    """A snapshot (np.savez arrays, loaded without pickling) holds the pool once and (records, 9, 1)
    frame slots; it restores to the same windows, and record spaces of another frame shape are refused."""
    num_envs, burn_in, seq_len = 2, 4, 8
    memory = PrioritizedReplay(64, seed=3)
    fill(memory, num_envs, burn_in, seq_len, 60, lambda rng, n: rng.integers(0, 256, (n, 6, 6, 1), np.uint8))
    state = memory.state_dict()
    assert state["frame_index/obs"].shape == (len(memory), seq_len + 1, 1) and state["frames/obs"].shape[1:] == (6, 6)
    records = {
        "obs": IntBox(0, 255, shape=(seq_len + 1, 6, 6, 1), dtype=np.uint8),
        "starts": BoolBox(shape=(seq_len + 1,)),
        "actions": IntBox(0, 2, shape=(seq_len,)),
        "rewards": FloatBox(shape=(seq_len,)),
        "terminated": BoolBox(shape=(seq_len,)),
        "truncated": BoolBox(shape=(seq_len,)),
        "state/h": FloatBox(shape=(4,)),
    }
    path = save_memory_snapshot(tmp_path / "snap", memory, {"inserted": len(memory)})
    restored = PrioritizedReplay(64, seed=7)
    load_memory_snapshot(path, restored, records)
    every = np.arange(len(memory))
    np.testing.assert_array_equal(restored._gather(every)["obs"], memory._gather(every)["obs"])
    np.testing.assert_array_equal(restored.priorities(every), memory.priorities(every))
    wrong = dict(records, obs=IntBox(0, 255, shape=(seq_len + 1, 6, 7, 1), dtype=np.uint8))
    with pytest.raises(CheckpointError, match="frames"):
        load_memory_snapshot(path, PrioritizedReplay(64), wrong)
    # slots that no record layout gives (a frame per window instead of per step) are refused by value
    bad = dict(state, **{"frame_index/obs": state["frame_index/obs"][:, :1, 0]})
    with pytest.raises(ValueError, match="which no record is stored as"):
        PrioritizedReplay(64).load_state_dict({**bad, "frames/obs": state["frames/obs"][:, None].repeat(2, 1)})
