"""``--overwrite`` removes only what an rlgraph run wrote; a folder holding anything else is refused."""

from __future__ import annotations

import os

import numpy as np
import pytest

from rlgraph_core.checkpoint import save_arrays
from rlgraph_core.execution.run_dir import RunDirError, claim_run_dir, foreign_files


def _fake_run(out):
    """The files an rlgraph run leaves: metrics, summary, plot, checkpoint links, stores, periodic folders."""
    out.mkdir(parents=True)
    for name in ("metrics.jsonl", "summary.json", "learning_curve.png", ".rlgraph.lock"):
        (out / name).write_text("{}")
    store = out / ".checkpoint.versions" / "v3"
    store.mkdir(parents=True)
    for name in ("meta.json", "config.json", "weights.npz", "state.npz", "replay_shard_0.npz"):
        (store / name).write_text("x")
    os.symlink(".checkpoint.versions/v3", out / "checkpoint")
    step = out / "checkpoints" / "step-500"
    step.mkdir(parents=True)
    for name in ("meta.json", "config.json", "weights.npz"):
        (step / name).write_text("x")
    os.symlink("step-500", out / "checkpoints" / "latest")
    save_arrays(out / "replay_snapshots" / "shard-0", {"a": np.zeros(3)}, {"k": 1})


def test_an_rlgraph_run_holds_nothing_foreign_and_is_overwritten(tmp_path):
    out = tmp_path / "run"
    _fake_run(out)
    assert foreign_files(out) == []
    with pytest.raises(RunDirError, match="--resume .* --overwrite"):
        with claim_run_dir(out):
            pass
    with claim_run_dir(out, overwrite=True):
        assert sorted(os.listdir(out)) == [".rlgraph.lock"]


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_folder_with_foreign_files_is_refused_and_kept_whole(tmp_path, overwrite):
    out = tmp_path / "userdir"
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "my_model.pt").write_bytes(b"weights")
    (out / "metrics.csv").write_text("step,loss\n")
    (out / "notes").mkdir()
    before = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    with pytest.raises(RunDirError) as info:
        with claim_run_dir(out, overwrite=overwrite):
            pass
    message = str(info.value)
    assert "checkpoints/my_model.pt" in message and "notes/" in message and "metrics.csv" in message
    assert "--overwrite" not in message and "another --out" in message
    after = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    assert after == before
    assert (out / "checkpoints" / "my_model.pt").read_bytes() == b"weights"


def test_a_foreign_file_inside_an_rlgraph_run_blocks_overwrite(tmp_path):
    out = tmp_path / "run"
    _fake_run(out)
    (out / ".checkpoint.versions" / "v3" / "my_notes.txt").write_text("mine")
    os.symlink("/etc", out / "data")
    assert foreign_files(out) == [".checkpoint.versions/v3/my_notes.txt", "data"]
    with pytest.raises(RunDirError, match="my_notes.txt"):
        with claim_run_dir(out, overwrite=True):
            pass
    assert (out / ".checkpoint.versions" / "v3" / "my_notes.txt").is_file() and (out / "metrics.jsonl").is_file()


def test_logger_folders_next_to_a_run_are_its_own(tmp_path):
    """The tensorboard / wandb loggers' folders belong to the run beside its records, not alone."""
    from rlgraph_core.execution.run_dir import foreign_files

    (tmp_path / "tensorboard").mkdir()
    (tmp_path / "tensorboard" / "events.out.tfevents.1.host").write_bytes(b"x")
    assert foreign_files(tmp_path) == ["tensorboard/"]
    (tmp_path / "metrics.jsonl").write_text("{}\n")
    assert foreign_files(tmp_path) == []


def test_resuming_a_run_whose_versions_store_leaves_the_folder_is_refused(tmp_path):
    """Issue 35: '--resume' followed '.checkpoint.versions' linked out of the run folder."""
    out = tmp_path / "run"
    _fake_run(out)
    outside = tmp_path / "outside"
    os.rename(out / ".checkpoint.versions", outside)
    os.symlink(outside, out / ".checkpoint.versions")
    with pytest.raises(RunDirError, match=r"\.checkpoint\.versions -> .*is a symbolic link.*--out NEW_FOLDER"):
        with claim_run_dir(out, resume=True):
            pass
    assert sorted(os.listdir(outside / "v3")) == sorted(
        ["meta.json", "config.json", "weights.npz", "state.npz", "replay_shard_0.npz"]
    )
