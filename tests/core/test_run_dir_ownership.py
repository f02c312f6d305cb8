"""``--overwrite`` removes only what an rlgraph run wrote; a folder holding anything else is refused."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from rlgraph_core.checkpoint import FORMAT_VERSION, save_arrays
from rlgraph_core.execution.run_dir import RunDirError, claim_run_dir, foreign_files


def _fake_run(out):
    """The files an rlgraph run leaves: metrics, summary, plot, checkpoint links, stores, periodic folders."""
    out.mkdir(parents=True)
    (out / "metrics.jsonl").write_text('{"timesteps": 250, "loss": 0.5}\n{"timesteps": 500, "eval_return_mean": 9}\n')
    (out / "summary.json").write_text('{"ended_by": "total_timesteps", "exit_code": 0, "timesteps": 500}')
    (out / "learning_curve.png").write_bytes(b"\x89PNG\r\n\x1a\n...")
    (out / ".rlgraph.lock").write_text("{}")
    store = out / ".checkpoint.versions" / "v3"
    store.mkdir(parents=True)
    (store / "meta.json").write_text(
        json.dumps({"format_version": FORMAT_VERSION, "attachments": {"replay_shard_0": {}}})
    )
    for name in ("config.json", "weights.npz", "state.npz", "replay_shard_0.npz"):
        (store / name).write_text("x")
    os.symlink(".checkpoint.versions/v3", out / "checkpoint")
    step = out / "checkpoints" / "step-500"
    step.mkdir(parents=True)
    (step / "meta.json").write_text(json.dumps({"format_version": FORMAT_VERSION}))
    for name in ("config.json", "weights.npz"):
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
    (tmp_path / "metrics.jsonl").write_text('{"timesteps": 0}\n')
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


@pytest.mark.parametrize(
    "lookalike, named",
    [
        ({"checkpoint/weights.npz": "w", "checkpoint/config.json": "{}"}, ["checkpoint/config.json", "checkpoint/weights.npz"]),
        ({"checkpoints/model.npz": "m"}, ["checkpoints/model.npz"]),
        ({"checkpoints/step-100/meta.json": '{"format_version": 99}', "checkpoints/step-100/weights.npz": "w"},
         ["checkpoints/step-100/meta.json", "checkpoints/step-100/weights.npz"]),
        ({"summary.json": '{"accuracy": 0.9}'}, ["summary.json"]),
        ({"metrics.jsonl": '{"epoch": 1, "loss": 0.3}\n'}, ["metrics.jsonl"]),
        ({"metrics.jsonl": '{"timesteps": 1}\n', "learning_curve.png": "not a png"}, ["learning_curve.png"]),
    ],
)  # fmt: skip
def test_lookalikes_of_rlgraph_files_are_foreign_and_overwrite_deletes_nothing(tmp_path, lookalike, named):
    """Issue 35: another tool's checkpoint/weights.npz, checkpoints/model.npz, summary.json and
    metrics.jsonl were deleted by --overwrite: only what proves itself rlgraph's (a meta.json of
    rlgraph's format version, rlgraph's keys) is, and anything else is refused by name."""
    out = tmp_path / "lookalike"
    for rel, text in lookalike.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    assert foreign_files(out) == named
    with pytest.raises(RunDirError) as info:
        with claim_run_dir(out, overwrite=True):
            pass
    assert all(n in str(info.value) for n in named)
    assert all((out / rel).read_text() == text for rel, text in lookalike.items())
