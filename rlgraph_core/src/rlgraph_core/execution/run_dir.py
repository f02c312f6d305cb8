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
import re
import shutil
import socket
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from rlgraph_core.checkpoint import interrupted_save, latest_checkpoint
from rlgraph_core.errors import RLGraphError
from rlgraph_core.checkpoint import FORMAT_VERSION

LOCK_NAME = ".rlgraph.lock"
METRICS_NAME = "metrics.jsonl"

#: What rlgraph writes into a run folder (removed by ``overwrite``) when it holds nothing else.
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

#: Files rlgraph writes at the top of a run folder.
_TOP_FILES = {"metrics.jsonl", "metrics.csv", "learning_curve.png", "summary.json", LOCK_NAME}
#: Folders (or links to folders) rlgraph writes at the top of a run folder.
_TOP_FOLDERS = {"checkpoint", "checkpoint_best", "checkpoints", "replay_snapshots"}
#: Hidden names rlgraph writes beside them: version stores, temporary links and files, legacy leftovers.
_HIDDEN_RE = re.compile(
    r"^\.(?:(?:checkpoint|checkpoint_best)\.(?:versions|old|[a-z0-9_]{8}|link-[0-9a-f]+)"
    r"|metrics\.(?:jsonl|csv)\.tmp|rlgraph-probe-.*)$"
)
#: Names of folders inside rlgraph's folders (versions, periodic steps, shard snapshots, temporaries).
_INNER_DIR_RE = re.compile(r"^(?:v\d+|step-\d+(?:\.\d+)?|shard-\d+|latest|\.tmp-.*|\.[a-z0-9_-]+\.versions)$")
#: Names of files inside rlgraph's checkpoint and snapshot folders.
_INNER_FILE_RE = re.compile(r"^(?:meta\.json|config\.json|[a-z][a-z0-9_]{0,63}\.npz|\.[a-z0-9_-]+\.link-[0-9a-f]+)$")


#: Folders the built-in logger plugins write into a run folder (``train.loggers``).
_LOGGER_FOLDERS = frozenset({"tensorboard", "wandb"})

#: Folders that hold checkpoints (the periodic ones, version stores, replay-shard snapshots).
_CONTAINER_RE = re.compile(r"^(?:checkpoints|replay_snapshots|\.[a-z0-9_-]+\.versions)$")
#: Folders each holding one checkpoint or array snapshot; each must prove it with its meta.json.
_LEAF_RE = re.compile(r"^(?:v\d+|step-\d+(?:\.\d+)?|shard-\d+|checkpoint|checkpoint_best|\.checkpoint(?:_best)?\.old)$")
#: Temporary folders of interrupted saves (partial files, no meta.json yet).
_TEMP_RE = re.compile(r"^(?:\.tmp-.*|\.checkpoint(?:_best)?\.[a-z0-9_]{8})$")
#: Keys that every row of rlgraph's ``metrics.jsonl`` and its ``summary.json`` carry.
_METRICS_KEYS = frozenset({"timesteps"})
_SUMMARY_KEYS = frozenset({"ended_by", "exit_code", "timesteps"})
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _rlgraph_meta(folder: Path) -> dict | None:
    """``folder/meta.json`` if it proves the folder rlgraph's (a JSON object of rlgraph's format version)."""

    try:
        meta = json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and meta.get("format_version") == FORMAT_VERSION else None


def _leaf_files(meta: dict) -> set[str]:
    """The files a checkpoint (or array snapshot) folder with ``meta`` holds."""
    if meta.get("kind") == "arrays":
        return {"meta.json", "arrays.npz"}
    attached = meta.get("attachments")
    return {"meta.json", "config.json", "weights.npz", "state.npz"} | {
        f"{name}.npz" for name in (attached if isinstance(attached, dict) else {}) if isinstance(name, str)
    }


def _entries(folder: Path) -> list[os.DirEntry] | None:
    try:
        return sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return None


def _foreign_inside(folder: Path, shown: str, found: list[str], limit: int, kind: str = "container") -> None:
    """Append to ``found`` what under ``folder`` (a ``kind`` of rlgraph's folder) does not prove itself rlgraph's.

    A container (``checkpoints/``, a versions store) holds only checkpoint folders, temporaries
    and rlgraph's relative links; a leaf (one checkpoint) only the files its ``meta.json`` of
    rlgraph's format names; a temporary folder only files named like a checkpoint's.
    """
    entries = _entries(folder)
    if entries is None:
        found.append(shown + "/")
        return
    allowed: set[str] | None = None
    if kind == "leaf" and entries:
        meta = _rlgraph_meta(folder)
        if meta is None:  # no proof: every file in it is foreign (named, so the user sees what)
            found.extend(f"{shown}/{e.name}" + ("/" if e.is_dir(follow_symlinks=False) else "") for e in entries)
            del found[limit:]
            return
        allowed = _leaf_files(meta)
    for entry in entries:
        if len(found) >= limit:
            return
        name = f"{shown}/{entry.name}"
        if entry.is_symlink():
            target = os.readlink(entry.path)
            # rlgraph's links are relative and stay inside the run folder (latest -> step-N)
            if kind != "container" or os.path.isabs(target) or not _INNER_DIR_RE.match(Path(target).name):
                found.append(name)
        elif entry.is_dir():
            inner = "leaf" if _LEAF_RE.match(entry.name) else "temp" if _TEMP_RE.match(entry.name) else None
            if kind == "container" and _CONTAINER_RE.match(entry.name):
                inner = "container"
            if kind != "container" or inner is None:
                found.append(name + "/")
            else:
                _foreign_inside(Path(entry.path), name, found, limit, inner)
        elif kind == "leaf":
            if entry.name not in (allowed or ()):
                found.append(name)
        elif kind == "temp":
            if not _INNER_FILE_RE.match(entry.name):
                found.append(name)
        elif not _TEMP_RE.match(entry.name):  # a container holds folders; a file there is not a checkpoint
            found.append(name)


def _json_rows_prove(path: Path, keys: frozenset[str]) -> bool:
    """True if every line of ``path`` is a JSON object with ``keys`` (an empty file holds no data).

    The last line may be torn (a run killed while writing it) when it does not end the file with
    a newline.
    """
    try:
        *lines, last = path.read_text().split("\n")
    except (OSError, UnicodeDecodeError):
        return False

    def proves(line: str) -> bool:
        try:
            row = json.loads(line)
        except ValueError:
            return False
        return isinstance(row, dict) and keys <= row.keys()

    rows = [line for line in lines if line.strip()]
    if not all(proves(line) for line in rows):
        return False
    if not last.strip():
        return True
    try:
        json.loads(last)
    except ValueError:
        return bool(rows)  # torn, after rows that proved the file rlgraph's
    return proves(last)


def _top_file_proves(path: Path, out_dir: Path) -> bool:
    """True if the top-level file ``path`` of ``out_dir`` proves itself rlgraph's by its content."""
    name = path.name
    if name == LOCK_NAME or _HIDDEN_RE.match(name):
        return True
    if name == METRICS_NAME:
        return _json_rows_prove(path, _METRICS_KEYS)
    if name == "summary.json":
        try:
            summary = json.loads(path.read_text())
        except (OSError, ValueError):
            return False
        return isinstance(summary, dict) and _SUMMARY_KEYS <= summary.keys()
    with_records = (out_dir / METRICS_NAME).is_file() or (out_dir / "summary.json").is_file()
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    if name == "metrics.csv":  # a logger plugin's file, but only next to a run's own records
        return with_records and b"timesteps" in head.split(b"\n", 1)[0]
    if name == "learning_curve.png":
        return with_records and head.startswith(_PNG_MAGIC)
    return False


def foreign_files(out_dir: str | Path, limit: int = 20) -> list[str]:
    """What in ``out_dir`` an rlgraph run did not write (paths relative to it; at most ``limit``).

    Something is rlgraph's only if it proves it, by name, place and content: ``metrics.jsonl``
    whose every row is a JSON object with ``timesteps``, ``summary.json`` with ``ended_by``,
    ``exit_code`` and ``timesteps``; ``metrics.csv`` (a ``timesteps`` column) and
    ``learning_curve.png`` (a PNG) only next to those; checkpoint folders (``checkpoint/``,
    ``checkpoints/step-N/``, ``.checkpoint.versions/vN/`` ...) only with a ``meta.json`` of
    rlgraph's format version, holding exactly the files it names; rlgraph's relative links
    and the temporaries its saves leave. Anything else (``checkpoints/my_model.pt``,
    ``checkpoint/weights.npz`` without ``meta.json``, a ``summary.json`` of another tool, a
    link out of the folder) is foreign, and :func:`claim_run_dir` never deletes a folder that
    holds any.
    """
    out_dir = Path(out_dir)
    found: list[str] = []
    for entry in sorted(os.scandir(out_dir), key=lambda e: e.name):
        if len(found) >= limit:
            break
        name = entry.name
        if entry.is_symlink():
            target = os.readlink(entry.path)
            ok = name in _TOP_FOLDERS and not os.path.isabs(target) and Path(target).parts[:1] == (f".{name}.versions",)
            if not ok:
                found.append(name)
        elif entry.is_dir():
            kind = (
                "container"
                if _CONTAINER_RE.match(name)
                else "leaf"
                if _LEAF_RE.match(name)
                else "temp"
                if _TEMP_RE.match(name)
                else None
            )
            if kind is not None:
                _foreign_inside(Path(entry.path), name, found, limit, kind)
            elif name in _LOGGER_FOLDERS and any(
                (out_dir / n).is_file() and _top_file_proves(out_dir / n, out_dir)
                for n in (METRICS_NAME, "summary.json")
            ):
                pass  # the tensorboard / wandb loggers' folders, next to a run's own records
            else:
                found.append(name + "/")
        elif name not in _TOP_FILES and not _HIDDEN_RE.match(name):
            found.append(name)
        elif not _top_file_proves(Path(entry.path), out_dir):
            found.append(name)
    return found


#: Folders of a run that rlgraph writes versions into and deletes from; never a symbolic link.
_STORE_RE = re.compile(r"^(?:checkpoints|replay_snapshots|\.[A-Za-z0-9_-]+\.versions)$")


def linked_stores(out_dir: str | Path) -> list[str]:
    """The stores of ``out_dir`` (``.checkpoint.versions``, ``checkpoints`` ...) that are symbolic links.

    A save writes new versions into a store and deletes old ones from it; through a link it
    would write and delete wherever the link leads, outside the run folder.
    """
    out_dir = Path(out_dir)
    entries = _entries(out_dir) or []
    return [e.name for e in entries if _STORE_RE.match(e.name) and e.is_symlink()]


def _remove_run_files(out_dir: Path) -> None:
    """Delete what an earlier run wrote into ``out_dir`` (call only when :func:`foreign_files` is empty)."""
    for entry in os.scandir(out_dir):
        if entry.name == LOCK_NAME:
            continue
        path = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(path)
        else:
            path.unlink()


#: What a run that trained leaves in its folder: a refused run never removes a folder that holds one.
_RECORD_RE = re.compile(r"^(?:checkpoint|checkpoint_best|checkpoints|replay_snapshots|summary\.json|\.checkpoint.*)$")


@dataclass(frozen=True)
class FolderBefore:
    """What a run's output folder held before the run claimed it (see :func:`remove_unused_claim`)."""

    #: the names in the folder (empty when it did not exist)
    names: frozenset[str]
    #: the outermost folder on the way to it that did not exist (None when it existed)
    created: Path | None


def folder_before(out_dir: str | Path) -> FolderBefore:
    """Note what ``out_dir`` holds now, before a run claims it."""
    out_dir = Path(out_dir)
    created = None
    for folder in (out_dir, *out_dir.parents):
        if os.path.lexists(folder):
            break
        created = folder
    return FolderBefore(frozenset(_listdir_or_empty(out_dir)), created)


def _listdir_or_empty(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def remove_unused_claim(out_dir: str | Path, before: FolderBefore) -> bool:
    """Remove what a run refused before it trained added to ``out_dir`` (its lock, an empty
    ``metrics.jsonl``, a logger's folder ...) and the folders it created; return whether it did.

    Nothing is removed when the run left a record of training (a checkpoint, ``summary.json`` or a
    non-empty ``metrics.jsonl``): then it trained, and what it wrote is kept.
    """
    out_dir = Path(out_dir)
    new = set(_listdir_or_empty(out_dir)) - before.names
    metrics = out_dir / METRICS_NAME
    if any(_RECORD_RE.match(n) for n in new) or (METRICS_NAME in new and metrics.is_file() and metrics.stat().st_size):
        return False
    for name in new:
        path = out_dir / name
        with contextlib.suppress(OSError):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    if before.created is not None:
        for folder in (out_dir, *out_dir.parents):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only while empty
            if folder == before.created:
                break
    return True


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


@dataclass(frozen=True)
class CallerTerms:
    """How a refusal names the caller's choices: the CLI's flags, or the Python facade's arguments.

    ``{run}`` in a field stands for the run folder concerned.
    """

    #: the output folder option, e.g. ``--out``
    out: str = "--out"
    #: continue the run in the folder
    resume: str = "--resume {run}"
    #: replace the run in the folder
    overwrite: str = "--overwrite"
    #: read the folder's checkpoint and write the continued run elsewhere
    resume_elsewhere: str = "--resume {run} --out NEW_FOLDER"


#: ``rlgraph train``'s words (the default).
CLI_TERMS = CallerTerms()
#: The Python facade's words (``Algorithm.learn(out=..., overwrite=...)``, ``rlgraph_core.load``).
PYTHON_TERMS = CallerTerms(
    out="out=",
    resume="rlgraph_core.load('{run}/checkpoint').learn(N, out=NEW_FOLDER) (or `rlgraph train --resume {run}`)",
    overwrite="overwrite=True",
    resume_elsewhere="rlgraph_core.load('{run}/checkpoint').learn(N, out=NEW_FOLDER)",
)


def _occupants(out_dir: Path) -> list[str]:
    return sorted(p.name for p in out_dir.iterdir() if p.name != LOCK_NAME)


@contextlib.contextmanager
def claim_run_dir(
    out_dir: str | Path, *, resume: bool = False, overwrite: bool = False, terms: CallerTerms = CLI_TERMS
) -> Iterator[Path]:
    """Lock ``out_dir`` for one run for the duration of the ``with`` block.

    Args:
        out_dir: the run's output folder (created if missing).
        resume: the run continues the run already in ``out_dir`` (its files are kept).
        overwrite: remove a previous run's files before starting; only a folder that holds nothing
            but rlgraph's own files (:func:`foreign_files` is empty) is ever cleared.

    Raises:
        RunDirError: another live run holds the folder (its pid is named), the folder holds
            files rlgraph did not write (named; refused even with ``overwrite``), or it holds an
            earlier run and neither ``resume`` nor ``overwrite`` was given. Its remedies are named
            in ``terms`` (the CLI's flags by default; :data:`PYTHON_TERMS` for the facade).
    """
    out_dir = Path(out_dir)
    another_out = f"pass another {terms.out} folder"
    lock_file = out_dir / LOCK_NAME
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        created = not os.path.lexists(lock_file)
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        os.close(os.open(out_dir / f".rlgraph-probe-{os.getpid()}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        os.unlink(out_dir / f".rlgraph-probe-{os.getpid()}")
    except OSError as exc:
        if "fd" in locals():
            os.close(fd)
        what = (
            f"To continue this run, read its checkpoint from there and write the new run to another folder: "
            f"{terms.resume_elsewhere.format(run=out_dir)}."
            if resume
            else f"{another_out[0].upper()}{another_out[1:]}."
        )
        raise RunDirError(
            f"The output folder '{out_dir}' cannot be written ({exc.strerror or exc}): a run writes its lock, "
            f"metrics and checkpoints there. {what}"
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunDirError(
                f"The output folder '{out_dir}' is in use by another rlgraph run ({_holder(lock_file)}). Two "
                f"runs in one folder would interleave their metrics and overwrite each other's checkpoints: "
                f"wait for that run to finish, stop it, or {another_out}."
            ) from None
        linked = linked_stores(out_dir)
        if linked and resume:
            shown = ", ".join(f"{n} -> {os.readlink(out_dir / n)[:80]}" for n in linked[:4])
            raise RunDirError(
                f"The run folder '{out_dir}' cannot be continued: {shown} is a symbolic link, but rlgraph writes "
                f"and deletes checkpoint versions only in real folders inside the run folder, never through a "
                f"link that may lead out of it. Nothing was written or removed; replace the link with the folder "
                f"it points to, or continue the run elsewhere: {terms.resume_elsewhere.format(run=out_dir)}."
            )
        occupants = _occupants(out_dir)
        if occupants and not resume:
            foreign = foreign_files(out_dir)
            if foreign:
                if created:
                    lock_file.unlink()  # leave a folder that is not ours as it was
                shown = ", ".join(foreign[:8]) + (" ..." if len(foreign) > 8 else "")
                raise RunDirError(
                    f"The output folder '{out_dir}' holds files that no rlgraph run wrote ({shown}). rlgraph "
                    f"never deletes or mixes its output with files it did not write, so this folder cannot "
                    f"take a new run: {another_out} (a new "
                    f"or empty one), or move those files away first."
                )
            if not overwrite:
                raise RunDirError(
                    f"The output folder '{out_dir}' already holds an earlier rlgraph run "
                    f"({', '.join(occupants[:6])}{' ...' if len(occupants) > 6 else ''}). A new run would mix its "
                    f"metrics and checkpoints with those: pass {terms.resume.format(run=out_dir)} to continue that "
                    f"run, {terms.overwrite} to replace it (only rlgraph's own files are removed), or another "
                    f"{terms.out} folder."
                )
            _remove_run_files(out_dir)
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


def resume_checkpoint(path: str | Path, argument: str = "--resume") -> Path:
    """The checkpoint ``--resume PATH`` means: PATH itself, or the newest checkpoint of run folder PATH.
    ``argument`` names where PATH came from in the error (``rlgraph evaluate`` and ``export`` read
    their checkpoint argument the same way).

    A run folder holds its final ``checkpoint`` and periodic ``checkpoints/``; after a crash the
    periodic one may be newer, so the one with the most env steps is taken. What an interrupted
    save left (a missing ``checkpoint`` link with its store, or an older layout's
    ``.checkpoint.old``) is recovered as loading recovers it.

    Raises:
        RunDirError: PATH holds no checkpoint.
    """

    path = Path(path)
    if (path / "meta.json").is_file():
        return path
    if not path.is_dir() and interrupted_save(path) is not None:
        return path  # e.g. RUN/checkpoint of an interrupted save: loading recovers it (with a warning)
    best = latest_checkpoint(path)
    if best is None:
        raise RunDirError(
            f"{argument} '{path}' is neither a checkpoint (a folder with meta.json) nor a run folder holding one "
            f"(checkpoint/ or checkpoints/); pass a run's --out folder or one of its checkpoints."
        )
    return best


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
