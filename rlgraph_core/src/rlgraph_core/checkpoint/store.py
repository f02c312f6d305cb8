"""The atomic versions store: every file-system step of a save and of finding what a path names.

Folders are written under a temporary name and fsynced, renamed to a fresh name in a store,
and a path is switched to them with one ``os.replace`` of a symbolic link; old folders are
renamed away before they are deleted, and leftovers of interrupted saves are cleaned or
recovered from (see the package docstring for the layout).
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import shutil
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

from rlgraph_core.checkpoint.checks import LATEST, REQUIRED_FILES
from rlgraph_core.errors import CheckpointError, DiskFullError


_TMP_PREFIX = ".tmp-"
_VERSION_RE = re.compile(r"^v(\d+)$")
_STEP_RE = re.compile(r"^step-(\d+)(?:\.(\d+))?$")


# --------------------------------------------------------------------------- file-system steps
def _fsync_dir(path: Path) -> None:
    """Make the entries of directory ``path`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return  # e.g. Windows: directories cannot be opened; rename durability is the FS's
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF, errno.EACCES):
            raise
    finally:
        os.close(fd)


def _write_file(path: Path, write: Callable[[Any], None]) -> None:
    """Create ``path``, let ``write`` fill the binary file object, and fsync it."""
    with open(path, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())


def _json_default(obj):
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, indent=2, default=_json_default).encode()


def _manifest(arrays: dict[str, np.ndarray]) -> dict:
    return {k: [list(np.shape(v)), str(np.asarray(v).dtype)] for k, v in arrays.items()}


def _remove_tree(path: Path) -> None:
    """Delete the folder ``path``: first renamed to a temporary name (atomic), then removed.

    A folder that carries a checkpoint's name is therefore always complete, even when the
    deletion is interrupted. Errors are ignored (the save that calls this has committed already;
    a leftover is removed by the next save).
    """
    trash = path.parent / f"{_TMP_PREFIX}del-{secrets.token_hex(4)}"
    try:
        os.rename(path, trash)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def _clean_temporaries(store: Path, link: Path) -> None:
    """Remove what interrupted saves left: temporary folders in ``store``, temporary links next to ``link``."""
    if store.is_dir():
        for entry in store.iterdir():
            if entry.name.startswith(_TMP_PREFIX):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    _unlink_quietly(entry)
    prefix = f".{link.name}.link-"
    if link.parent.is_dir():
        for entry in link.parent.iterdir():
            if entry.name.startswith(prefix) and entry.is_symlink():
                _unlink_quietly(entry)


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _store_of(link: Path) -> Path:
    """The hidden folder holding the versions a fixed checkpoint path links to."""
    return link.parent / f".{link.name}.versions"


def refuse_linked_store(store: Path, shown: Path, doing: str = "save the checkpoint") -> None:
    """Raise :class:`CheckpointError` if ``store`` (a versions store or ``checkpoints/``) is a symbolic link.

    rlgraph's stores are real folders beside the checkpoint path: a save writes a version there
    and deletes the old ones, so a store that is a link (perhaps out of the run folder) would
    make a save write and delete wherever it leads. Nothing is written, read or removed then.
    """
    if store.is_symlink():
        try:
            target = os.readlink(store)
        except OSError:
            target = "?"
        raise CheckpointError(
            f"Cannot {doing} '{shown}': '{store}' is a symbolic link (to '{target[:120]}'), but rlgraph keeps "
            f"checkpoint versions in a real folder beside the checkpoint and never writes or deletes through "
            f"a link that may lead out of the run folder. Nothing was written or removed; replace the link "
            f"with the folder it points to, or use another output folder."
        )


def _complete(folder: Path) -> bool:
    return folder.is_dir() and all((folder / name).is_file() for name in REQUIRED_FILES)


#: errno values that mean the device (or the user's quota) is full.
_DISK_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


def _disk_full(exc: OSError, shown: Path, store: Path, needed: int, file: str | None = None) -> Exception:
    """One paragraph for a checkpoint that did not fit: the file, the bytes needed, where, what is kept."""
    if exc.errno not in _DISK_FULL:
        return exc
    try:
        free = f"{shutil.disk_usage(store).free:,} bytes free"
    except OSError:
        free = "the free space unknown"
    previous = _newest_complete(shown, store)
    kept = (
        f"The previous checkpoint '{previous}' is intact and is still the newest."
        if previous is not None
        else "No earlier checkpoint exists there."
    )
    return DiskFullError(
        f"No space left to write the checkpoint '{shown}'{f' (at {file})' if file else ''}: it needs about "
        f"{needed:,} bytes on the device holding '{store}' ({free}; {exc.strerror or exc}). The partial "
        f"files were removed. {kept} Free some space there (or run with --out on another disk)."
    )


def _newest_complete(shown: Path, store: Path) -> Path | None:
    """The checkpoint a failed save leaves as the newest: the fixed path's target, or the newest periodic one."""
    if shown.parent == store:  # periodic: store is run/checkpoints
        return _latest_periodic(store)
    return shown if _complete(Path(os.path.realpath(shown))) else None


def _switch_link(link: Path, target: Path) -> bool:
    """Atomically make ``link`` a symbolic link to ``target``; False where symlinks are unsupported."""
    tmp_link = link.parent / f".{link.name}.link-{secrets.token_hex(4)}"
    try:
        os.symlink(os.path.relpath(target, link.parent), tmp_link, target_is_directory=True)
    except (OSError, NotImplementedError):
        return False
    try:
        os.replace(tmp_link, link)
    except BaseException:
        _unlink_quietly(tmp_link)
        raise
    _fsync_dir(link.parent)
    return True


def _listdir(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []


#: the files a checkpoint folder holds: its JSON and its arrays (weights, state, attachments such as env_runner)
_CHECKPOINT_FILE_RE = re.compile(r"^(?:meta\.json|config\.json|[a-z][a-z0-9_]{0,63}\.npz)$")


def _legacy_leftovers(link: Path) -> list[Path]:
    """What saves of rlgraph before the link layout left after an interruption."""
    pattern = re.compile(rf"^\.{re.escape(link.name)}\.(?:old|[a-z0-9_]{{8}})$")
    keep = _store_of(link).name
    return [link.parent / n for n in _listdir(link.parent) if pattern.match(n) and n != keep]


def _remove_legacy_leftovers(link: Path) -> None:
    """Delete legacy leftovers that hold nothing but checkpoint files (never a folder of anything else):
    meta.json, config.json and ``.npz`` arrays named as a checkpoint's (weights, state, an attachment)."""
    for path in _legacy_leftovers(link):
        if path.is_dir() and not path.is_symlink() and all(map(_CHECKPOINT_FILE_RE.match, _listdir(path))):
            shutil.rmtree(path, ignore_errors=True)


def _periodic_folders(store: Path) -> list[Path]:
    """The ``step-*`` folders of ``store``, newest (highest step, then highest suffix) first."""
    found = []
    for name in _listdir(store):
        m = _STEP_RE.match(name)
        if m:
            found.append(((int(m.group(1)), int(m.group(2) or 0)), store / name))
    return [p for _, p in sorted(found, reverse=True)]


def _latest_periodic(store: Path) -> Path | None:
    link = store / LATEST
    if link.is_symlink():
        target = Path(os.path.realpath(link))
        if target.parent == Path(os.path.realpath(store)) and _STEP_RE.match(target.name) and _complete(target):
            return store / target.name
    for folder in _periodic_folders(store):
        if _complete(folder):
            return folder
    return None


def _recovery_candidate(link: Path) -> Path | None:
    """The newest complete folder a missing or broken checkpoint path can be recovered from."""
    ordered = []
    store = _store_of(link)
    numbered = [(int(m.group(1)), store / n) for n in _listdir(store) if (m := _VERSION_RE.match(n))]
    ordered += [p for _, p in sorted(numbered, reverse=True)]
    if link.name == LATEST:
        ordered += _periodic_folders(link.parent)
    ordered += [p for p in _legacy_leftovers(link) if p.name.endswith(".old")]
    return next((p for p in ordered if _complete(p)), None)


def interrupted_save(directory: str | os.PathLike) -> Path | None:
    """The complete folder a missing checkpoint path would be recovered from (an interrupted save), or None.

    None also when the path exists: then it is no interrupted save's (it loads as it is).
    """
    path = Path(directory)
    return None if os.path.lexists(path) and path.is_dir() else _recovery_candidate(path)


def resolve_checkpoint(directory: str | os.PathLike) -> Path:
    """The folder that holds the checkpoint ``directory`` names right now.

    A link is followed (once: read every file from the folder returned, so that a concurrent
    save cannot mix two checkpoints). A missing or broken path whose store holds a complete
    checkpoint (an interrupted save) is recovered with a warning.

    Raises:
        CheckpointError: nothing to load there.
    """
    path = Path(directory)
    if path.is_dir():
        return Path(os.path.realpath(path)) if path.is_symlink() else path
    if path.exists():
        raise CheckpointError(f"Checkpoint '{path}' is a file, not a checkpoint folder; pass the folder.")
    found = _recovery_candidate(path)
    if found is None:
        raise CheckpointError(
            f"Checkpoint directory '{path}' does not exist; pass the folder "
            f"'rlgraph train' wrote (its 'checkpoint' subfolder under --out)."
        )
    warnings.warn(
        f"Checkpoint '{path}' is missing: a save was interrupted. Loading the newest complete "
        f"checkpoint found, '{found}'; the next save to '{path}' repairs it.",
        stacklevel=3,
    )
    return found
