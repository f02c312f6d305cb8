"""Replay snapshots and checkpoint attachments: the checkpoint's safe array format outside an agent.

A replay shard's snapshot is an array folder (``save_arrays``: ``meta.json`` + ``arrays.npz``,
atomic, a link into a versions store); a checkpoint may carry named attachments beside the
agent's arrays. Both are read back only after every header passed the manifest and the memory's
checks (capacity, record spaces), and record values are checked before the memory changes.
"""

from __future__ import annotations

import json
import zipfile
from types import SimpleNamespace

import numpy as np
import pytest

from rlgraph_core import checkpoint
from rlgraph_core.errors import CheckpointError, NonFiniteError
from rlgraph_core.memories import PrioritizedReplay, ReplayMemory
from rlgraph_core.memories.snapshot import load_memory_snapshot, save_memory_snapshot
from rlgraph_core.spaces import BoolBox, Discrete, FloatBox

RECORDS = {"obs": FloatBox(shape=(3,)), "actions": Discrete(2), "rewards": FloatBox(shape=()), "done": BoolBox()}


def batch(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.normal(size=(n, 3)).astype(np.float32),
        "actions": rng.integers(0, 2, size=n).astype(np.int64),
        "rewards": rng.normal(size=n).astype(np.float32),
        "done": rng.random(n) < 0.1,
    }


def filled(cls=PrioritizedReplay, n: int = 40, capacity: int = 64):
    memory = cls(capacity, seed=3)
    idx = memory.insert(batch(n))
    if getattr(memory, "prioritized", False):
        memory.update_priorities(idx, np.linspace(0.1, 2.0, n))
    return memory


def assert_same_state(a, b) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert set(sa) == set(sb)
    for key in sa:
        np.testing.assert_array_equal(sa[key], sb[key], err_msg=key)


def test_a_snapshot_round_trips_and_replaces_the_previous_one(tmp_path):
    memory = filled()
    path = tmp_path / "snap" / "shard-0"
    save_memory_snapshot(path, memory, {"inserted": 40})
    memory.insert(batch(10, seed=1))
    save_memory_snapshot(path, memory, {"inserted": 50})
    assert path.is_symlink() and len(list((tmp_path / "snap" / ".shard-0.versions").iterdir())) == 1
    fresh = PrioritizedReplay(64, seed=0)
    info = load_memory_snapshot(path, fresh, RECORDS)
    assert info["inserted"] == 50 and len(fresh) == 50
    assert_same_state(memory, fresh)
    np.testing.assert_array_equal(memory.sample(8)["indices"], fresh.sample(8)["indices"])  # same sampling state


def test_an_interrupted_switch_is_recovered_from_the_store(tmp_path):
    path = tmp_path / "shard-0"
    save_memory_snapshot(path, filled(ReplayMemory), {"inserted": 40})
    path.unlink()  # as if a save stopped between removing and replacing the link
    fresh = ReplayMemory(64, seed=0)
    assert load_memory_snapshot(path, fresh, RECORDS)["inserted"] == 40 and len(fresh) == 40


def rewrite(path, change) -> None:
    """Rewrite the snapshot's arrays.npz (and its manifest) after ``change(arrays)``."""
    folder = path.resolve()
    with np.load(folder / "arrays.npz") as f:
        arrays = {k: f[k] for k in f.files}
    change(arrays)
    np.savez(folder / "arrays.npz", **arrays)
    meta = json.loads((folder / "meta.json").read_text())
    meta["arrays"] = {k: [list(v.shape), str(v.dtype)] for k, v in arrays.items()}
    (folder / "meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a: a.update({"data/obs": np.zeros((40, 5), np.float32)}), "records of shape (5,)"),
        (lambda a: a.update({"data/actions": a["data/actions"].astype(np.float64)}), "dtype float64"),
        (lambda a: a["data/actions"].__setitem__(0, 7), "outside the bounds"),
        (lambda a: a.update({"data/extra": np.zeros(40)}), "not stored"),
        (lambda a: a.pop("data/done"), "every record must carry exactly"),
        (lambda a: a.update({"priorities": np.zeros(10**6)}), "claims 8,000,000 bytes"),
    ],
)
def test_a_snapshot_that_does_not_fit_is_refused_and_nothing_changes(tmp_path, change, message):
    path = tmp_path / "shard-0"
    save_memory_snapshot(path, filled(), {"inserted": 40})
    rewrite(path, change)
    fresh = PrioritizedReplay(64, seed=0)
    with pytest.raises(CheckpointError, match="Replay snapshot") as exc:
        load_memory_snapshot(path, fresh, RECORDS)
    assert message in str(exc.value)
    assert len(fresh) == 0


def test_a_snapshot_of_a_larger_memory_is_refused_from_its_header(tmp_path):
    path = tmp_path / "shard-0"
    save_memory_snapshot(path, filled(n=40, capacity=64), {"inserted": 40})
    with pytest.raises(CheckpointError, match="claims 40 records, but the replay memory holds at most 32"):
        load_memory_snapshot(path, PrioritizedReplay(32, seed=0), RECORDS)


def test_a_snapshot_whose_manifest_disagrees_or_whose_meta_is_torn_is_refused(tmp_path):
    path = tmp_path / "shard-0"
    save_memory_snapshot(path, filled(), {"inserted": 40})
    folder = path.resolve()
    meta = json.loads((folder / "meta.json").read_text())
    meta["arrays"]["data/obs"] = [[40, 4], "float32"]
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="manifest says"):
        load_memory_snapshot(path, PrioritizedReplay(64, seed=0), RECORDS)
    (folder / "meta.json").write_text('{"format_version": 1, "kind": "arr')
    with pytest.raises(CheckpointError, match="corrupt meta.json"):
        load_memory_snapshot(path, PrioritizedReplay(64, seed=0), RECORDS)
    with pytest.raises(CheckpointError, match="No saved arrays"):
        load_memory_snapshot(tmp_path / "missing", PrioritizedReplay(64, seed=0), RECORDS)


def test_snapshot_arrays_are_never_unpickled(tmp_path):
    path = tmp_path / "shard-0"
    save_memory_snapshot(path, filled(ReplayMemory), {"inserted": 40})
    folder = path.resolve()
    with zipfile.ZipFile(folder / "arrays.npz", "a") as zf:
        with zf.open("evil.npy", "w") as f:
            np.save(f, np.array([object()], dtype=object), allow_pickle=True)
    meta = json.loads((folder / "meta.json").read_text())
    meta["arrays"]["evil"] = [[1], "object"]
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="object dtype"):
        load_memory_snapshot(path, ReplayMemory(64, seed=0), RECORDS)


@pytest.mark.parametrize("field, value", [("data/obs", np.nan), ("data/rewards", np.inf), ("priorities", np.nan)])
def test_a_snapshot_with_non_finite_records_is_refused_and_nothing_changes(tmp_path, field, value):
    """Issue 35: a replay shard's snapshot (and checkpoint attachment) loaded NaN records that an agent's
    checkpoint refuses."""
    path = tmp_path / "shard-0"
    save_memory_snapshot(path, filled(), {"inserted": 40})
    rewrite(path, lambda a: a[field].__setitem__(2, value))
    fresh = PrioritizedReplay(64, seed=0)
    with pytest.raises(CheckpointError, match="Replay snapshot") as exc:
        load_memory_snapshot(path, fresh, RECORDS)
    assert f"'{field}'" in str(exc.value) and "Nothing was loaded" in str(exc.value)
    assert len(fresh) == 0


def test_a_snapshot_of_non_finite_records_is_refused_at_save_and_the_previous_one_stays(tmp_path):
    path = tmp_path / "shard-0"
    memory = filled()
    save_memory_snapshot(path, memory, {"inserted": 40})
    memory.insert({**batch(2, seed=1), "rewards": np.array([0.0, np.nan], np.float32)})
    with pytest.raises(NonFiniteError, match=r"replay snapshot .*'data/rewards'.*Nothing was written"):
        save_memory_snapshot(path, memory, {"inserted": 42})
    assert load_memory_snapshot(path, PrioritizedReplay(64, seed=0), RECORDS)["inserted"] == 40


def test_non_finite_snapshot_observations_load_only_where_the_run_allows_them(tmp_path):
    path = tmp_path / "shard-0"
    save_memory_snapshot(path, filled(), {"inserted": 40})
    rewrite(path, lambda a: a["data/obs"].__setitem__(2, np.inf))
    fresh = PrioritizedReplay(64, seed=0)
    assert load_memory_snapshot(path, fresh, RECORDS, allow_nonfinite_obs=True)["inserted"] == 40
    assert np.isinf(fresh.state_dict()["data/obs"][2]).all()
    rewrite(path, lambda a: a["data/rewards"].__setitem__(2, np.nan))
    with pytest.raises(CheckpointError, match="'data/rewards'"):
        load_memory_snapshot(path, PrioritizedReplay(64, seed=0), RECORDS, allow_nonfinite_obs=True)


class StubAgent:
    """What ``save_checkpoint`` asks of an agent, and no more."""

    config = SimpleNamespace(type="stub")
    backend = SimpleNamespace(name="numpy")
    observation_space = FloatBox(shape=(3,))
    action_space = Discrete(2)

    def get_weights(self):
        return {"w": np.ones(3, np.float32)}

    def get_state(self):
        return {}, {"timesteps": 5, "updates": 1}


def test_a_checkpoint_carries_attachments_in_the_same_atomic_folder(tmp_path):
    memory = filled()
    arrays = {f"shard_0/{k}": v for k, v in memory.state_dict().items()}
    path = checkpoint.save_checkpoint(StubAgent(), tmp_path / "checkpoint", {}, {"replay": (arrays, {"shards": 1})})
    assert (checkpoint.resolve_checkpoint(path) / "replay.npz").is_file()
    info, loaded = checkpoint.read_attachment(path, "replay")
    assert info == {"shards": 1} and set(loaded) == set(arrays)
    np.testing.assert_array_equal(loaded["shard_0/data/obs"], arrays["shard_0/data/obs"])
    assert checkpoint.read_attachment(path, "other") is None

    periodic = checkpoint.save_periodic(StubAgent(), tmp_path, 5, {}, attachments={"replay": (arrays, {})})
    assert checkpoint.read_attachment(periodic, "replay")[1].keys() == arrays.keys()

    def refuse(headers):
        raise CheckpointError("refused by the caller")

    with pytest.raises(CheckpointError, match="refused by the caller"):
        checkpoint.read_attachment(path, "replay", refuse)
    poisoned = {**arrays, "shard_0/data/rewards": np.where(np.arange(40) == 5, np.nan, 0.0).astype(np.float32)}
    with pytest.raises(NonFiniteError, match="'replay.npz: shard_0/data/rewards'.*Nothing was written"):
        checkpoint.save_checkpoint(StubAgent(), tmp_path / "checkpoint", {}, {"replay": (poisoned, {"shards": 1})})
    assert checkpoint.read_attachment(path, "replay")[1].keys() == arrays.keys()  # the previous one is intact
    with pytest.raises(ValueError, match="attachment name 'weights'"):
        checkpoint.save_checkpoint(StubAgent(), tmp_path / "c2", {}, {"weights": ({}, {})})
