"""The ``tensorboard`` and ``wandb`` loggers (extras ``tensorboard``, ``wandb``): a short run writes
every metric row as scalars and weight histograms, read back from the files they wrote."""

from __future__ import annotations

import importlib.util
import json
import struct

import pytest

from extras_helpers import TINY_DQN, has_backend, run_cli

pytestmark = pytest.mark.skipif(not has_backend("torch"), reason="needs the torch backend to train")


def read_events(path) -> list:
    """Every ``Event`` of a TensorBoard event file, parsed with tensorboardX's own protobuf.

    The file is a TFRecord stream (u64 length, u32 crc, payload, u32 crc); tensorboardX has a
    writer but no reader, and the tensorboard package is not needed for four lines.
    """
    from tensorboardX.proto.event_pb2 import Event

    data, events, pos = path.read_bytes(), [], 0
    while pos < len(data):
        (length,) = struct.unpack("<Q", data[pos : pos + 8])
        payload = data[pos + 12 : pos + 12 + length]
        pos += 12 + length + 4
        events.append(Event.FromString(payload))
    return events


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory):
    """400 steps of DQN with the jsonl, tensorboard and wandb loggers; histograms every 2 rows."""
    import os

    os.environ["WANDB_MODE"] = "offline"
    os.environ["WANDB_SILENT"] = "true"
    loggers = ["jsonl", "tensorboard"] + (["wandb"] if importlib.util.find_spec("wandb") else [])
    out = tmp_path_factory.mktemp("logged") / "run"
    code, _, stderr = run_cli(
        "train",
        *TINY_DQN,
        "--set",
        f"train.loggers={json.dumps(loggers)}",
        "--set",
        "train.histogram_interval=2",
        "--out",
        str(out),
    )
    assert code == 0, stderr
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return out, rows


def test_tensorboard_scalars_and_histograms(logged_run):
    out, rows = logged_run
    files = list((out / "tensorboard").glob("events.out.tfevents.*"))
    assert len(files) == 1
    scalars, histograms = {}, {}
    for event in read_events(files[0]):
        for value in event.summary.value:
            if value.HasField("histo"):
                histograms.setdefault(value.tag, []).append((event.step, value.histo))
            else:
                scalars.setdefault(value.tag, []).append((event.step, value.simple_value))
    # Every numeric metric of every row, at its env step, with the value metrics.jsonl holds.
    for key in ("episode_return_mean", "env_steps_per_s", "loss", "epsilon", "eval_return_mean"):
        expected = [(r["timesteps"], r[key]) for r in rows if r.get(key) is not None]
        assert expected, key
        got = scalars[key]
        assert [s for s, _ in got] == [s for s, _ in expected], key
        assert [v for _, v in got] == pytest.approx([v for _, v in expected], rel=1e-5), key
    # Evaluations every 200 steps of 400.
    assert [s for s, _ in scalars["eval_return_mean"]] == [200, 400]
    # Histograms of every weight every 2nd row (rows at 100, 200, 300, 400 -> 100 and 300).
    weight_tags = [t for t in histograms if t.startswith("weights/")]
    assert any(t.endswith("/W") for t in weight_tags) and any(t.endswith("/b") for t in weight_tags)
    for tag in weight_tags:
        assert [s for s, _ in histograms[tag]] == [100, 300], tag
    w = next(t for t in weight_tags if t.endswith("dense_0/W") and "target" not in t)
    assert histograms[w][0][1].num == 4 * 8  # CartPole's 4 inputs x 8 hidden units


def read_wandb_records(path) -> list:
    """Every ``Record`` of an offline wandb run file (``run-*.wandb``).

    The file is a leveldb-style log (7-byte file header; 32 KiB blocks of chunks with a 7-byte
    header: crc32, length, type FULL/FIRST/MIDDLE/LAST); wandb ships the protobuf but no reader.
    """
    from wandb.proto import wandb_internal_pb2 as pb

    data, block, records, buf = path.read_bytes(), 32768, [], b""
    assert data[:4] == b":W&B"
    pos = 7
    while pos + 7 <= len(data):
        left = block - pos % block
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7]) if left >= 7 else (0, 0, 0)
        if left < 7 or (kind == 0 and length == 0):  # block trailer / padding
            pos += left
            continue
        buf += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # FULL or LAST chunk: a whole record
            records.append(pb.Record.FromString(buf))
            buf = b""
    return records


@pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="the wandb extra is not installed")
def test_wandb_offline_run(logged_run):
    out, rows = logged_run
    runs = list((out / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(runs) == 1
    records = read_wandb_records(runs[0])
    config = next(r.run.config for r in records if r.WhichOneof("record_type") == "run")
    assert {"agent", "env", "train"} <= {u.key for u in config.update}
    history = {}
    for r in records:
        if r.WhichOneof("record_type") == "history":
            items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
            history.setdefault(r.history.step.num, {}).update(items)
    assert sorted(history) == [row["timesteps"] for row in rows]
    for row in rows:
        logged = history[row["timesteps"]]
        for key in ("loss", "episode_return_mean", "eval_return_mean"):
            if row.get(key) is not None:
                assert logged[key] == pytest.approx(row[key]), key
    # Weight histograms every 2nd row.
    with_weights = [step for step, items in history.items() if any(k.startswith("weights/") for k in items)]
    assert with_weights == [100, 300]


def test_missing_extra_is_a_config_error(monkeypatch):
    """A config naming a logger whose library is missing stops before anything runs (exit 2)."""
    import importlib.util as util

    real = util.find_spec
    monkeypatch.setattr(util, "find_spec", lambda name, *a: None if name == "tensorboardX" else real(name, *a))
    code, _, stderr = run_cli("train", "--dry-run", "--set", "train.loggers=[tensorboard]")
    assert code == 2
    from rlgraph_core.install_hints import extra_install_command

    assert extra_install_command("tensorboard") in stderr and "tensorboardX" in stderr


# ---------------------------------------------------------------- loggers that fail (issue 35 §2)
class _RaisingLogger:
    """A third party's logger that fails where ``fails`` says: "init", "log" or "close"."""

    fails: tuple = ()

    def __init__(self, out_dir):
        if "init" in self.fails:
            raise RuntimeError("cannot reach the metrics server")
        self.calls = 0

    def log(self, metrics):
        if "log" in self.fails:
            raise OSError("the metrics server went away")

    def close(self):
        if "close" in self.fails:
            raise OSError("flush failed")


@pytest.fixture
def faulty_loggers(monkeypatch):
    """The process's plugin manager with loggers ``broken_init`` and ``broken_log`` (log and close raise)."""
    import types

    from rlgraph_core.plugins import hookimpl
    from rlgraph_core.plugins import manager

    broken_init = type("BrokenInit", (_RaisingLogger,), {"fails": ("init",)})
    broken_log = type("BrokenLog", (_RaisingLogger,), {"fails": ("log", "close")})
    pm = manager.PluginManager()
    pm.register(
        types.SimpleNamespace(rlgraph_loggers=hookimpl(lambda: {"broken_init": broken_init, "broken_log": broken_log})),
        "faulty-loggers",
    )
    monkeypatch.setattr(manager, "_DEFAULT", pm)
    return pm


def test_a_logger_whose_log_and_close_raise_is_dropped_and_the_run_writes_its_final_artifacts(faulty_loggers, tmp_path):
    out = tmp_path / "run"
    code, stdout, stderr = run_cli(
        "train",
        *TINY_DQN,
        "--set",
        "agent.gradient_steps=1",
        "--set",
        "train.loggers=[jsonl, broken_log]",
        "--out",
        str(out),
    )
    assert code == 0, stderr
    assert "Traceback" not in stderr
    # warned once (log raised first; the dropped logger is never called again, close included)
    assert stderr.count("the logger BrokenLog raised OSError in log(): the metrics server went away") == 1, stderr
    assert "flush failed" not in stderr
    assert (out / "checkpoint" / "meta.json").is_file() and (out / "learning_curve.png").is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ended_by"] == "total_timesteps" and summary["timesteps"] >= 400
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 4  # the other loggers go on


def test_a_logger_whose_constructor_raises_is_one_paragraph_and_leaves_no_folder(faulty_loggers, tmp_path):
    out = tmp_path / "new" / "run"
    code, _, stderr = run_cli("train", *TINY_DQN, "--set", "train.loggers=[jsonl, broken_init]", "--out", str(out))
    assert code == 2, stderr
    assert "Traceback" not in stderr
    assert (
        "train.loggers: the 'broken_init' logger could not start (RuntimeError: cannot reach the metrics server)"
        in stderr
    )
    assert not (tmp_path / "new").exists()  # no lock, no empty metrics.jsonl, no folder
    # The same in a folder that existed: it is left as it was.
    out.mkdir(parents=True)
    (out / "notes.txt").write_text("mine")
    code, _, stderr = run_cli("train", *TINY_DQN, "--set", "train.loggers=[jsonl, broken_init]", "--out", str(out))
    assert code == 2 and sorted(p.name for p in out.iterdir()) == ["notes.txt"], stderr


def test_a_tensorboard_folder_that_is_a_file_is_refused_before_anything_is_made(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "tensorboard").write_text("not a folder")
    for dry in (["--dry-run"], []):
        code, _, stderr = run_cli(
            "train", *TINY_DQN, *dry, "--set", "train.loggers=[jsonl, tensorboard]", "--out", str(out)
        )
        assert code == 2, stderr
        assert f"'{out / 'tensorboard'}', which is not a folder" in stderr and "Traceback" not in stderr
        assert sorted(p.name for p in out.iterdir()) == ["tensorboard"]  # no lock, no metrics.jsonl


@pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="the wandb extra is not installed")
def test_wandb_refusals_are_one_paragraph_at_validation(monkeypatch, tmp_path):
    """A project name W&B rejects, and online mode without credentials: refused by --dry-run already."""
    monkeypatch.setenv("WANDB_PROJECT", "team/project")
    code, _, stderr = run_cli(
        "train", *TINY_DQN, "--dry-run", "--set", "train.loggers=[wandb]", "--out", str(tmp_path / "a")
    )
    assert code == 2 and "Traceback" not in stderr, stderr
    assert "W&B rejects the settings of the 'wandb' logger (WANDB_PROJECT='team/project'" in stderr
    monkeypatch.delenv("WANDB_PROJECT")
    monkeypatch.delenv("WANDB_MODE")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("HOME", str(tmp_path))
    for dry in (["--dry-run"], []):
        code, _, stderr = run_cli(
            "train", *TINY_DQN, *dry, "--set", "train.loggers=[wandb]", "--out", str(tmp_path / "b")
        )
        assert code == 2 and "Traceback" not in stderr, stderr
        assert "W&B has no credentials here" in stderr and "WANDB_MODE=offline" in stderr
        assert not (tmp_path / "b").exists()
