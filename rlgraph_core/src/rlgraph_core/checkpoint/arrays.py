"""Array folders: arrays that are not an agent's (e.g. a replay shard's snapshot) saved and loaded
with a checkpoint's atomicity and checks.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

# ``_write_file`` is looked up on the store module at each call, so a test that replaces it there
# (crash and ENOSPC injection) reaches every writer.
from rlgraph_core.checkpoint import store as atomic
from rlgraph_core.checkpoint.checks import FORMAT_VERSION
from rlgraph_core.checkpoint.npz import Headers, _read_npz
from rlgraph_core.checkpoint.store import (
    _TMP_PREFIX,
    _VERSION_RE,
    _clean_temporaries,
    _fsync_dir,
    _json_bytes,
    _listdir,
    _manifest,
    _remove_tree,
    _store_of,
    _switch_link,
    refuse_linked_store,
)
from rlgraph_core.errors import CheckpointError


#: The files of an array folder (:func:`save_arrays`): JSON info and manifest, and the arrays.
ARRAY_FILES = ("meta.json", "arrays.npz")


def _complete_arrays(folder: Path) -> bool:
    return folder.is_dir() and all((folder / name).is_file() for name in ARRAY_FILES)


def save_arrays(directory: str | os.PathLike, arrays: Mapping[str, np.ndarray], info: Mapping[str, Any]) -> str:
    """Write ``arrays`` (``arrays.npz``) and the JSON ``info`` (``meta.json``) as the folder ``directory``, atomically.

    The layout and the guarantees are a checkpoint's (:func:`save_checkpoint`): ``directory``
    is a symbolic link into the hidden store ``.<name>.versions/``, switched with one
    ``os.replace`` to a complete, fsynced new folder, so a reader finds the old or the new
    contents, never a mix. Used for snapshots that are not an agent's (e.g. a replay shard's).
    Returns ``str(directory)``.

    Raises:
        CheckpointError: ``directory`` exists and is not such a folder (it is left untouched).
    """
    link = Path(directory)
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.exists() and not link.is_symlink() and not (link.is_dir() and (link / "meta.json").is_file()):
        raise CheckpointError(
            f"Cannot save arrays as '{link}': something else of that name exists; it is left untouched."
        )
    store = _store_of(link)
    refuse_linked_store(store, link, "save arrays as")
    _clean_temporaries(store, link)
    numbers = [int(m.group(1)) for m in map(_VERSION_RE.match, _listdir(store)) if m]
    store.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX, dir=store))
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    meta = {"format_version": FORMAT_VERSION, "kind": "arrays", "info": dict(info), "arrays": _manifest(arrays)}
    try:
        atomic._write_file(tmp / "arrays.npz", lambda f: np.savez(f, **arrays))
        meta_bytes = _json_bytes(meta)
        atomic._write_file(tmp / "meta.json", lambda f: f.write(meta_bytes))
        _fsync_dir(tmp)
        new = store / f"v{max(numbers, default=0) + 1}"
        os.rename(tmp, new)
        _fsync_dir(store)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if not _switch_link(link, new):
        if link.is_dir() and not link.is_symlink():
            _remove_tree(link)  # now ``link`` is missing: loaders recover ``new`` from the store
        os.rename(new, link)
        _fsync_dir(link.parent)
        new = link
    for name in _listdir(store):
        if _VERSION_RE.match(name) and store / name != new:
            _remove_tree(store / name)
    return str(link)


def load_arrays(
    directory: str | os.PathLike, check: Callable[[Headers], None] = lambda headers: None
) -> tuple[dict, dict[str, np.ndarray]]:
    """Read an array folder written by :func:`save_arrays`: ``(info, arrays)``.

    The arrays are checked against the manifest and by ``check`` (headers only, before any data
    is read) as checkpoints are; never unpickles. A missing link whose store holds a complete
    folder (an interrupted save) is recovered.

    Raises:
        CheckpointError: nothing there, or a corrupt or refused folder.
    """
    shown = Path(directory)
    if shown.is_dir():
        folder = Path(os.path.realpath(shown)) if shown.is_symlink() else shown
    else:
        store = _store_of(shown)
        numbered = sorted(((int(m.group(1)), store / n) for n in _listdir(store) if (m := _VERSION_RE.match(n))))
        folder = next((p for _, p in reversed(numbered) if _complete_arrays(p)), None)
        if folder is None:
            raise CheckpointError(f"No saved arrays at '{shown}'.")
    if not _complete_arrays(folder):
        raise CheckpointError(
            f"'{shown}' lacks {' or '.join(ARRAY_FILES)}; it is incomplete or not written by rlgraph."
        )
    try:
        meta = json.loads((folder / "meta.json").read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"'{shown}' has a corrupt meta.json ({exc}); it cannot be loaded.") from None
    if not isinstance(meta, dict) or meta.get("kind") != "arrays" or not isinstance(meta.get("info"), dict):
        raise CheckpointError(f"'{shown}/meta.json' does not describe saved arrays; corrupt or not written by rlgraph.")
    if meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"'{shown}' has format version {meta.get('format_version')!r}; this rlgraph reads version {FORMAT_VERSION}."
        )
    return meta["info"], _read_npz(folder / "arrays.npz", shown / "arrays.npz", meta.get("arrays"), check)
