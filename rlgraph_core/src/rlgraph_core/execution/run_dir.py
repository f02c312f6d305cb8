"""Output folders that belong to one run: a lock, a refusal to mix runs, and robust metrics files.

A run's output folder (``--out``) holds its ``metrics.jsonl``, plot, checkpoints and summary.
:func:`claim_run_dir` takes an exclusive lock on it for the life of the run (a second run gets a
clear error naming the first one's pid), and refuses a folder that already holds another run
unless the caller resumes that run or asks to overwrite it. The lock is an ``flock`` on a small
file, so the operating system releases it when the process ends, even after ``kill -9``.

Metrics are JSON lines; :func:`json_line` writes NaN and infinities as ``null`` (the bare
``NaN`` literal is not JSON) and :func:`read_metrics` skips a torn last line (a run killed in
the middle of a write) with a warning instead of failing.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import shutil
import socket
import time
import warnings
from pathlib import Path
from typing import Any, Iterator

from rlgraph_core.errors import RLGraphError

LOCK_NAME = ".rlgraph.lock"
METRICS_NAME = "metrics.jsonl"

#: What rlgraph writes into a run folder (removed by ``overwrite``); other files are left alone.
RUN_ARTIFACTS = (
    "metrics.jsonl",
    "metrics.csv",
    "learning_curve.png",
    "summary.json",
    "checkpoint",
    "checkpoint_best",
    "checkpoints",
    "replay_snapshots",
)


class RunDirError(RLGraphError):
    """The output folder cannot be used for this run (locked, holds another run, unwritable)."""


def _holder(lock_file: Path) -> str:
    try:
        info = json.loads(lock_file.read_text() or "{}")
    except (OSError, ValueError):
        return "another process"
    started = info.get("started")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if started else "an unknown time"
    return f"pid {info.get('pid', '?')} on {info.get('host', '?')}, started {when}"


def _occupants(out_dir: Path) -> list[str]:
    return sorted(p.name for p in out_dir.iterdir() if p.name != LOCK_NAME)


@contextlib.contextmanager
def claim_run_dir(out_dir: str | Path, *, resume: bool = False, overwrite: bool = False) -> Iterator[Path]:
    """Lock ``out_dir`` for one run for the duration of the ``with`` block.

    Args:
        out_dir: the run's output folder (created if missing).
        resume: the run continues the run already in ``out_dir`` (its files are kept).
        overwrite: remove a previous run's files (:data:`RUN_ARTIFACTS`) before starting.

    Raises:
        RunDirError: another live run holds the folder (its pid is named), or the folder holds
            files and neither ``resume`` nor ``overwrite`` was given.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    lock_file = out_dir / LOCK_NAME
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunDirError(
                f"The output folder '{out_dir}' is in use by another rlgraph run ({_holder(lock_file)}). Two "
                f"runs in one folder would interleave their metrics and overwrite each other's checkpoints: "
                f"wait for that run to finish, stop it, or pass another --out."
            ) from None
        occupants = _occupants(out_dir)
        if occupants and not resume:
            if not overwrite:
                raise RunDirError(
                    f"The output folder '{out_dir}' already holds {', '.join(occupants[:6])}"
                    f"{' ...' if len(occupants) > 6 else ''}. A new run would mix its metrics and checkpoints with "
                    f"those: pass --resume {out_dir} to continue that run, --overwrite to replace it, or another --out."
                )
            for name in RUN_ARTIFACTS:
                path = out_dir / name
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                elif path.exists() or path.is_symlink():
                    path.unlink()
            for leftover in out_dir.glob(".checkpoint*"):
                shutil.rmtree(leftover, ignore_errors=True) if leftover.is_dir() else leftover.unlink()
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}).encode())
        yield out_dir
    finally:
        os.close(fd)  # releases the flock


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities (also inside lists and dicts) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _finite(value.item())
    return value


def json_line(row: dict) -> str:
    """One metrics row as strict JSON (NaN and infinities written as ``null``), no newline."""
    return json.dumps(_finite(row), allow_nan=False, default=str)


def read_metrics(path: str | Path) -> list[dict]:
    """The rows of a ``metrics.jsonl``; lines that are not complete JSON objects are skipped.

    A torn last line (a run killed in the middle of a write) is expected after a crash and
    skipped with a warning; any other unreadable line is skipped with a warning naming it.
    """
    path = Path(path)
    if not path.is_file():
        return []
    lines = path.read_text(errors="replace").split("\n")
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("not an object")
        except ValueError:
            last = all(not rest.strip() for rest in lines[number:])
            what = "a torn last line (the run was stopped while writing it)" if last else f"unreadable line {number}"
            warnings.warn(f"{path}: skipped {what}.", RuntimeWarning, stacklevel=2)
            continue
        rows.append(row)
    return rows


def trim_metrics(path: str | Path, max_timesteps: int) -> int:
    """Keep only readable rows with ``timesteps <= max_timesteps`` (a resumed run starts there).

    Rows logged after the checkpoint a run resumes from would be logged again; they, and a
    torn last line, are removed. The file is rewritten atomically. Returns the rows dropped.
    """
    path = Path(path)
    if not path.is_file():
        return 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        rows = read_metrics(path)
    keep = [r for r in rows if isinstance(r.get("timesteps"), (int, float)) and r["timesteps"] <= max_timesteps]
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(json_line(r) + "\n" for r in keep))
    os.replace(tmp, path)
    return len(rows) - len(keep)


def run_dir_of(checkpoint: str | Path) -> Path | None:
    """The run folder a checkpoint belongs to (``<run>/checkpoint``, ``<run>/checkpoints/<name>``),
    or None when it does not sit in one (no ``metrics.jsonl`` or ``summary.json`` next to it)."""
    checkpoint = Path(checkpoint)
    candidates = [checkpoint, checkpoint.parent]
    if checkpoint.parent.name == "checkpoints":
        candidates.append(checkpoint.parent.parent)
    for folder in candidates:
        if (folder / METRICS_NAME).is_file() or (folder / "summary.json").is_file():
            return folder
    return None
