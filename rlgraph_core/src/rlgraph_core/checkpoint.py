"""Checkpoints: arrays in ``.npz`` (never pickled) plus JSON, committed atomically, checked against the agent.

A checkpoint is a folder of four files::

    meta.json       format version, agent type, backend it was written on, spaces, counters,
                    and a manifest {array name: [shape, dtype]} for every stored array
    config.json     the full run config
    weights.npz     agent variables, backend-neutral names and layout
    state.npz       optimizer state, replay memory and other arrays needed to resume

**Atomic at every instant.** A folder is never modified once it carries a checkpoint's name:
every save writes a complete new folder under a temporary name (each file fsynced), renames it
to a fresh name, and only then switches what the user's path means, with one atomic
``os.replace``. For a fixed path (:func:`save_checkpoint`, ``runs/x/checkpoint``) the path is a
symbolic link into a hidden sibling store::

    runs/x/checkpoint -> .checkpoint.versions/v7
    runs/x/.checkpoint.versions/v7/{meta.json, config.json, weights.npz, state.npz}

Periodic checkpoints (:func:`save_periodic`) live side by side, with a ``latest`` link::

    runs/x/checkpoints/step-20000/...
    runs/x/checkpoints/step-30000/...
    runs/x/checkpoints/latest -> step-30000

Old folders are deleted only after the switch (renamed to a temporary name first, so a folder
with a checkpoint's name is always complete). Whatever instant a save is interrupted at, the
path names either the complete old or the complete new checkpoint; a loader that finds the
path missing (an interrupted first save over a pre-link checkpoint, or a file system without
symbolic links, where the new folder is renamed into place instead) recovers the newest
complete folder of the store. Leftovers of an interrupted save are removed by the next save.
One process writes a given path at a time (the run-folder lock sees to that).

**Checked against the agent, all or nothing.** Loading reads every ``.npy`` header first (no
data), checks names, shapes and dtypes against the manifest and against the agent (weights:
exactly the agent's variables, same dtype family; state: optimizer slots of the optimized
variables' shapes, replay records of the agent's spaces and at most the memory's capacity, a
size cap for the rest), then reads the data, checks values (actions within the action space,
counters, generator states), and only then changes the agent.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import secrets
import shutil
import tempfile
import warnings
import zipfile
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
from numpy.lib import format as npy_format

from rlgraph_core.errors import CheckpointError, DiskFullError, NonFiniteError
from rlgraph_core.spaces import Space

FORMAT_VERSION = 1

#: The files every checkpoint folder has (``state.npz`` too, but older ones may lack it when empty).
REQUIRED_FILES = ("meta.json", "config.json", "weights.npz")

#: Subfolder of a run folder that holds the periodic checkpoints, and the name of its pointer.
PERIODIC_DIR = "checkpoints"
LATEST = "latest"

#: Counters a checkpoint must carry to be resumed from.
TRAINING_COUNTERS = ("timesteps", "updates")

_FAMILIES = {"f": "float", "i": "integer", "u": "integer", "b": "bool"}


def dtype_family(dtype: Any) -> str | None:
    """``"float"``, ``"integer"`` or ``"bool"`` for numeric dtypes; None for any other (strings, objects ...)."""
    return _FAMILIES.get(np.dtype(dtype).kind)


def weight_problem(
    name: str, shape: tuple[int, ...], dtype: Any, want_shape: tuple[int, ...], want_dtype: Any
) -> str | None:
    """Why an array of ``shape``/``dtype`` cannot be the weight ``name`` of ``want_shape``/``want_dtype``, or None.

    The dtype must be of the variable's family (a float variable takes float16/32/64, never
    integers or strings); the shape must be exactly the variable's.
    """
    family, want_family = dtype_family(dtype), dtype_family(want_dtype)
    if family is None or family != want_family:
        return (
            f"Weight '{name}' is stored as {np.dtype(dtype)}, but this agent's variable is {np.dtype(want_dtype)}: "
            f"a {want_family} weight must be stored with a {want_family} dtype. The weights are corrupt or "
            f"were not written by rlgraph."
        )
    if tuple(shape) != tuple(want_shape):
        return (
            f"Weight '{name}' has shape {tuple(shape)} but this agent expects {tuple(want_shape)}; the weights "
            f"come from a different network spec or environment."
        )
    return None


def nonfinite_arrays(arrays: Mapping[str, Any]) -> list[str]:
    """Names of the float arrays in ``arrays`` that hold a NaN or an infinity (in order)."""
    bad = []
    for name, value in arrays.items():
        array = np.asarray(value)
        if array.dtype.kind in "fc" and not np.isfinite(array).all():
            bad.append(name)
    return bad


#: Replay fields that hold observations (``env.allow_nonfinite_obs`` may let NaN/inf into them).
_OBS_FIELDS = ("obs", "next_obs")


def nonfinite_state_problem(state: Mapping[str, Any], config: Mapping[str, Any]) -> str | None:
    """Why the state arrays of a checkpoint written with run config ``config`` hold non-finite values, or None.

    Every float array (replay records, priorities, optimizer slots ...) must be finite, except
    the replay observations of a run whose env was configured with ``allow_nonfinite_obs: true``
    (envs that leave unused dimensions at inf); rewards and discounts are always checked.
    """
    env = config.get("env") if isinstance(config, Mapping) else None
    allow_obs = isinstance(env, Mapping) and env.get("allow_nonfinite_obs") is True
    obs_prefixes = tuple(f"memory/data/{field}" for field in _OBS_FIELDS)

    def exempt(name: str) -> bool:
        return allow_obs and any(name == p or name.startswith(p + "/") for p in obs_prefixes)

    bad = nonfinite_arrays({k: v for k, v in state.items() if not exempt(k)})
    if not bad:
        return None
    first = np.asarray(state[bad[0]])
    index = tuple(int(i) for i in np.argwhere(~np.isfinite(first))[0]) if first.ndim else ()
    return (
        f"its state.npz holds NaN or infinite values in {', '.join(repr(b) for b in bad[:4])}"
        f"{' ...' if len(bad) > 4 else ''} (first at index {list(index)} of '{bad[0]}'); rlgraph never saves "
        f"non-finite data (observations and rewards are checked where they enter), so these records are "
        f"corrupt or were not written by rlgraph, and training on them would only produce NaN."
    )


def _refuse_nonfinite(agent, weights: Mapping[str, Any], state_arrays: Mapping[str, Any], where: Path) -> None:
    """Raise :class:`NonFiniteError` if a weight or optimizer slot of ``agent`` is NaN or infinite."""
    bad = nonfinite_arrays(weights) + nonfinite_arrays(
        {k: v for k, v in state_arrays.items() if k.startswith("optimizer/")}
    )
    if bad:
        raise NonFiniteError(
            f"Refused to write a checkpoint to '{where}': the agent's {', '.join(bad[:4])}"
            f"{' ...' if len(bad) > 4 else ''} hold NaN or infinite values (after {agent.updates} updates), so "
            f"the checkpoint would be useless and would replace a good one. Nothing was written; the "
            f"checkpoints already there are unchanged."
        )


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


#: What an attachment of a checkpoint may be called (its file is ``<name>.npz``).
_ATTACHMENT_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")

#: Arrays a caller stores next to the agent's in one checkpoint: ``{name: (arrays, info)}``, each
#: written as ``<name>.npz`` with its manifest and the JSON ``info`` in ``meta.json``.
Attachments = Mapping[str, tuple[Mapping[str, np.ndarray], Mapping[str, Any]]]


def _check_attachment_names(attachments: Attachments) -> None:
    for name in attachments:
        if not _ATTACHMENT_RE.match(name) or name in ("weights", "state", "meta", "config"):
            raise ValueError(
                f"checkpoint attachment name {name!r} must be lowercase letters, digits and underscores "
                f"(starting with a letter) and not one of weights, state, meta, config."
            )


def _write_version(
    agent, store: Path, name: str, extra: Mapping, more_meta: Mapping, attachments: Attachments | None = None
) -> Path:
    """Write a complete checkpoint of ``agent`` (and its attachments) as ``store/name``: temp folder, fsync, rename."""
    attachments = dict(attachments or {})
    _check_attachment_names(attachments)
    weights = agent.get_weights()
    state_arrays, counters = agent.get_state()
    hidden = store.name.startswith(".") and store.name.endswith(".versions")
    _refuse_nonfinite(agent, weights, state_arrays, store.parent / store.name[1:-9] if hidden else store / name)
    meta = {
        "format_version": FORMAT_VERSION,
        "agent_type": agent.config.type,
        "backend": agent.backend.name,
        "observation_space": agent.observation_space.to_json(),
        "action_space": agent.action_space.to_json(),
        "counters": counters,
        "weights": _manifest(weights),
        "state": _manifest(state_arrays),
        **more_meta,
    }
    meta.update({k: v for k, v in extra.items() if k != "config"})
    if attachments:
        meta["attachments"] = {
            key: {"arrays": _manifest(dict(arrays)), "info": dict(info)} for key, (arrays, info) in attachments.items()
        }
    store.mkdir(parents=True, exist_ok=True)
    shown = store.parent / store.name[1:-9] if hidden else store / name
    needed = sum(np.asarray(a).nbytes for a in weights.values()) + sum(
        np.asarray(a).nbytes for a in state_arrays.values()
    )
    needed += sum(np.asarray(a).nbytes for arrays, _ in attachments.values() for a in arrays.values())
    try:
        tmp = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX, dir=store))
    except OSError as exc:
        raise _disk_full(exc, shown, store, needed) from None
    current = store
    try:
        current = tmp / "weights.npz"
        _write_file(tmp / "weights.npz", lambda f: np.savez(f, **weights))
        current = tmp / "state.npz"
        _write_file(tmp / "state.npz", lambda f: np.savez(f, **state_arrays))
        for key, (arrays, _) in attachments.items():
            current = tmp / f"{key}.npz"
            _write_file(tmp / f"{key}.npz", lambda f, arrays=arrays: np.savez(f, **arrays))
        config = _json_bytes(extra.get("config", {}))
        current = tmp / "config.json"
        _write_file(tmp / "config.json", lambda f: f.write(config))
        meta_bytes = _json_bytes(meta)
        current = tmp / "meta.json"
        _write_file(tmp / "meta.json", lambda f: f.write(meta_bytes))
        _fsync_dir(tmp)
        final = store / name
        os.rename(tmp, final)
        _fsync_dir(store)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError) and exc.errno in _DISK_FULL:
            raise _disk_full(exc, shown, store, needed + len(_json_bytes(meta)), current.name) from None
        raise
    return final


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


# --------------------------------------------------------------------------- saving
def save_checkpoint(agent, directory: str | os.PathLike, extra: dict, attachments: Attachments | None = None) -> str:
    """Write ``agent``'s weights, state and config as the checkpoint ``directory``, atomically.

    ``directory`` becomes a symbolic link to a complete folder in the hidden sibling store
    ``.<name>.versions/``; the previous checkpoint is switched away in one ``os.replace`` and
    deleted afterwards. ``extra["config"]`` becomes ``config.json``; every other key of
    ``extra`` is added to ``meta.json``. ``attachments`` (``{name: (arrays, info)}``) are
    written into the same folder as ``<name>.npz`` (read back with :func:`read_attachment`),
    e.g. a distributed executor's replay shards. Returns ``str(directory)``.

    Raises:
        CheckpointError: ``directory`` exists but is a file, or a folder that is not a checkpoint
            (it is never replaced then).
    """
    link = Path(directory)
    link.parent.mkdir(parents=True, exist_ok=True)
    is_real_dir = link.is_dir() and not link.is_symlink()
    if link.exists() and not link.is_dir():
        raise CheckpointError(f"Cannot save a checkpoint as '{link}': a file of that name exists; choose another path.")
    if is_real_dir and any(link.iterdir()) and not (link / "meta.json").is_file():
        raise CheckpointError(
            f"Cannot save a checkpoint as '{link}': that folder exists and is not an rlgraph checkpoint "
            f"(it has no meta.json), so it is left untouched; choose another path."
        )
    store = _store_of(link)
    refuse_linked_store(store, link)
    _clean_temporaries(store, link)
    numbers = [int(m.group(1)) for m in map(_VERSION_RE.match, _listdir(store)) if m]
    top = max(numbers, default=0)
    # A real folder at ``link`` (written before links were used, or where symlinks are not
    # supported) is moved into the store under the number below the new one.
    new = _write_version(agent, store, f"v{top + 2 if is_real_dir else top + 1}", extra, {}, attachments)
    if is_real_dir:
        os.rename(link, store / f"v{top + 1}")  # now ``link`` is missing: loaders recover ``new``
        _fsync_dir(link.parent)
    if not _switch_link(link, new):
        if link.is_symlink():
            os.unlink(link)
        os.rename(new, link)  # no symlinks here: the complete folder itself moves into place
        _fsync_dir(link.parent)
        _fsync_dir(store)
        new = link
    for name in _listdir(store):
        if _VERSION_RE.match(name) and store / name != new:
            _remove_tree(store / name)
    _remove_legacy_leftovers(link)
    if store.is_dir() and not any(store.iterdir()):
        try:
            store.rmdir()
        except OSError:
            pass
    return str(link)


def remove_checkpoint(directory: str | os.PathLike) -> None:
    """Delete the checkpoint ``directory`` names: its versions store, then the link (or folder) itself.

    Also removes what interrupted saves left next to it. Use this (or delete the whole run
    folder) rather than ``shutil.rmtree(directory)``, which refuses a symbolic link. A missing
    checkpoint is no error.
    """
    link = Path(directory)
    store = _store_of(link)
    refuse_linked_store(store, link, "remove the checkpoint")
    _clean_temporaries(store, link)
    if store.is_dir() and not store.is_symlink():
        shutil.rmtree(store)  # first: a link without its store recovers nothing afterwards
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link)
    _remove_legacy_leftovers(link)


def _listdir(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _legacy_leftovers(link: Path) -> list[Path]:
    """What saves of rlgraph before the link layout left after an interruption."""
    pattern = re.compile(rf"^\.{re.escape(link.name)}\.(?:old|[a-z0-9_]{{8}})$")
    keep = _store_of(link).name
    return [link.parent / n for n in _listdir(link.parent) if pattern.match(n) and n != keep]


def _remove_legacy_leftovers(link: Path) -> None:
    """Delete legacy leftovers that hold nothing but checkpoint files (never a folder of anything else)."""
    names = {"meta.json", "config.json", "weights.npz", "state.npz"}
    for path in _legacy_leftovers(link):
        if path.is_dir() and not path.is_symlink() and set(_listdir(path)) <= names:
            shutil.rmtree(path, ignore_errors=True)


def save_periodic(
    agent,
    run_dir: str | os.PathLike,
    step: int,
    extra: dict,
    keep: int = 3,
    attachments: Attachments | None = None,
) -> Path:
    """Write a periodic checkpoint ``run_dir/checkpoints/step-<step>`` atomically; keep the newest ``keep``.

    The folder is written under a temporary name, fsynced and renamed into place (an existing
    ``step-<step>`` is never touched: the new one is then ``step-<step>.1``, ``.2`` ...); then
    the link ``run_dir/checkpoints/latest`` is switched to it with one ``os.replace``, and all but
    the ``keep`` newest periodic checkpoints (by step) are deleted, never the one just written.
    ``extra`` and ``attachments`` are as for :func:`save_checkpoint`; ``meta.json`` also records
    ``periodic_step``.
    Returns the new folder (a complete checkpoint that ``agent.load`` takes directly).
    """
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ValueError(f"keep must be an integer >= 1, got {keep!r}.")
    step = int(step)
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}.")
    store = Path(run_dir) / PERIODIC_DIR
    refuse_linked_store(store, store / f"step-{step}")
    store.mkdir(parents=True, exist_ok=True)
    link = store / LATEST
    _clean_temporaries(store, link)
    name, k = f"step-{step}", 0
    while os.path.lexists(store / name):
        k += 1
        name = f"step-{step}.{k}"
    path = _write_version(agent, store, name, extra, {"periodic_step": step}, attachments)
    if not link.is_dir() or link.is_symlink():
        _switch_link(link, path)  # without symlink support, latest_checkpoint finds the newest by step
    ordered = _periodic_folders(store)
    for old in ordered[keep:]:
        if old != path:
            _remove_tree(old)
    return path


def adopt_checkpoint(source: str | os.PathLike, run_dir: str | os.PathLike) -> Path:
    """Copy the complete checkpoint ``source`` into ``run_dir`` as its newest periodic checkpoint; return it.

    For a checkpoint kept outside the run folder (e.g. a snapshot on a RAM-backed path) whose
    writer can no longer put it there itself. The files are copied into a temporary folder of
    ``run_dir/checkpoints`` (each fsynced) and checked there before the folder gets a
    checkpoint's name: ``meta.json`` and ``config.json`` must parse and carry training counters,
    and every array file (weights, state, attachments) must be an npz whose arrays match the
    manifest by their headers and whose CRCs hold (nothing is unpickled, no array is loaded
    into memory whole). It is then renamed to ``step-<its env steps>`` (``.1``, ``.2`` ... if
    that is taken) and ``checkpoints/latest`` is switched to it, which is what
    :func:`latest_checkpoint` and ``--resume`` read. Older periodic checkpoints are kept.

    Raises:
        CheckpointError: ``source`` is missing, incomplete or corrupt (nothing is left in ``run_dir``).
    """
    shown = Path(source)
    folder = resolve_checkpoint(shown)
    store = Path(run_dir) / PERIODIC_DIR
    refuse_linked_store(store, shown, "adopt the checkpoint")
    store.mkdir(parents=True, exist_ok=True)
    link = store / LATEST
    _clean_temporaries(store, link)
    tmp = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX, dir=store))
    try:
        for entry in sorted(_listdir(folder)):
            src = folder / entry
            if src.is_symlink() or not src.is_file():
                raise CheckpointError(
                    f"Checkpoint '{shown}' holds '{entry}', which is not a plain file; a checkpoint folder holds "
                    f"only its files (meta.json, config.json, *.npz). Nothing was copied."
                )
            with open(src, "rb") as f_in:
                _write_file(tmp / entry, lambda f, f_in=f_in: shutil.copyfileobj(f_in, f))
        _fsync_dir(tmp)
        meta = _verify_files(tmp, shown)
        step = meta["counters"]["timesteps"]
        name, k = f"step-{step}", 0
        while os.path.lexists(store / name):
            k += 1
            name = f"step-{step}.{k}"
        os.rename(tmp, store / name)
        _fsync_dir(store)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if not link.is_dir() or link.is_symlink():
        _switch_link(link, store / name)
    return store / name


def _verify_files(folder: Path, shown: Path) -> dict:
    """Check the checkpoint files in ``folder`` without loading them (see :func:`adopt_checkpoint`); its meta."""
    meta, _ = _read_meta_at(folder, shown)
    problem = _counters_problem(meta)
    if problem:
        raise CheckpointError(f"Checkpoint '{shown}' cannot be resumed from: {problem}; corrupt checkpoint.")
    attached = meta.get("attachments") or {}
    if not isinstance(attached, dict):
        raise CheckpointError(f"Checkpoint '{shown}' has 'attachments' in meta.json that are not a mapping; corrupt.")
    manifests = {"weights": meta.get("weights"), "state": meta.get("state") or {}}
    for key, entry in attached.items():
        manifests[key] = entry.get("arrays") if isinstance(entry, dict) else None
    for key, manifest in manifests.items():
        path = folder / f"{key}.npz"
        if key == "state" and not manifest and not path.exists():
            continue  # older checkpoints without state arrays lack the file
        if not path.is_file():
            raise CheckpointError(f"Checkpoint '{shown}' lacks '{key}.npz', which its meta.json lists; incomplete.")
        _read_npz(path, shown / f"{key}.npz", manifest, lambda headers: None, skip=lambda name: True)
        try:
            with zipfile.ZipFile(path) as zf:
                bad = zf.testzip()
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError, RuntimeError) as exc:
            bad = f"unreadable ({exc})"
        if bad is not None:
            raise CheckpointError(f"Checkpoint file '{shown / f'{key}.npz'}' is corrupt: member {bad} fails its CRC.")
    return meta


def _periodic_folders(store: Path) -> list[Path]:
    """The ``step-*`` folders of ``store``, newest (highest step, then highest suffix) first."""
    found = []
    for name in _listdir(store):
        m = _STEP_RE.match(name)
        if m:
            found.append(((int(m.group(1)), int(m.group(2) or 0)), store / name))
    return [p for _, p in sorted(found, reverse=True)]


def latest_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint of a run folder, or None if it has none.

    Candidates are the periodic checkpoint ``run_dir/checkpoints/latest`` names (or, if that
    link is missing or broken, the complete ``step-*`` folder with the highest step) and the
    final checkpoint ``run_dir/checkpoint``. Of these, the one whose counters show more env
    steps wins; on a tie, ``run_dir/checkpoint``. Returns ``run_dir/checkpoint`` itself or the
    ``run_dir/checkpoints/step-*`` folder.
    """
    run_dir = Path(run_dir)
    candidates: list[Path] = []
    periodic = _latest_periodic(run_dir / PERIODIC_DIR)
    if periodic is not None:
        candidates.append(periodic)
    final = run_dir / "checkpoint"
    if _complete(final) or (not final.is_dir() and _recovery_candidate(final) is not None):
        candidates.append(final)
    best, best_key = None, None
    for i, path in enumerate(candidates):
        try:
            meta, _ = read_meta(path)
        except CheckpointError:
            continue
        counters = meta.get("counters")
        steps = counters.get("timesteps") if isinstance(counters, dict) else None
        key = (steps if is_count(steps) else -1, i)
        if best_key is None or key > best_key:
            best, best_key = path, key
    return best


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


# --------------------------------------------------------------------------- resolving and reading
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


def _read_meta_at(folder: Path, shown: Path) -> tuple[dict, dict]:
    for name in REQUIRED_FILES:
        if not (folder / name).is_file():
            raise CheckpointError(
                f"Checkpoint '{shown}' lacks '{name}'; it is incomplete or not an "
                f"rlgraph checkpoint (expected meta.json, config.json, weights.npz, state.npz)."
            )
    try:
        meta = json.loads((folder / "meta.json").read_text())
        config = json.loads((folder / "config.json").read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"Checkpoint '{shown}' has a corrupt JSON file ({exc}); it cannot be loaded.") from None
    if not isinstance(meta, dict) or not isinstance(config, dict):
        raise CheckpointError(
            f"Checkpoint '{shown}' has a meta.json or config.json that is not a JSON object; it cannot be loaded."
        )
    if meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"Checkpoint '{shown}' has format version {meta.get('format_version')!r}; "
            f"this rlgraph reads version {FORMAT_VERSION}."
        )
    return meta, config


def read_meta(directory: str | os.PathLike) -> tuple[dict, dict]:
    """Read and check ``meta.json`` and ``config.json``; return ``(meta, config)``."""
    return _read_meta_at(resolve_checkpoint(directory), Path(directory))


Headers = dict[str, tuple[tuple[int, ...], np.dtype]]

#: The most bytes an ``.npy`` member may hold beyond its data (magic, header dict, padding).
_MAX_NPY_HEADER = 65_536 + 16


def _npy_header(zf: zipfile.ZipFile, member: str) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from the ``.npy`` header of ``member``, without reading its data."""
    with zf.open(member) as f:
        version = npy_format.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = npy_format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, _, dtype = npy_format.read_array_header_2_0(f)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
    if any(d < 0 for d in shape):
        raise ValueError(f"negative dimension in shape {shape}")
    return tuple(int(d) for d in shape), dtype


def _read_npz(
    path: Path,
    shown: Path,
    manifest: Any,
    check: Callable[[Headers], None],
    skip: Callable[[str], bool] = lambda name: False,
) -> dict[str, np.ndarray]:
    """Check the arrays of ``path`` by their headers (manifest, then ``check``), then read them.

    Nothing is read beyond the headers until every array passed; members ``skip`` names are
    checked against the manifest only and not read. Never unpickles.
    """
    if not isinstance(manifest, dict):
        raise CheckpointError(f"The manifest for '{shown}' in meta.json is not a mapping; corrupt checkpoint.")
    corrupt = (OSError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError, RuntimeError)
    try:
        zf = zipfile.ZipFile(path)
    except corrupt as exc:
        raise CheckpointError(f"Checkpoint file '{shown}' is corrupt or not an npz archive ({exc}).") from None
    with zf:
        members = zf.namelist()
        if len(members) != len(set(members)):
            raise CheckpointError(f"Checkpoint file '{shown}' names an array twice; corrupt checkpoint.")
        headers: Headers = {}
        for member in members:
            if not member.endswith(".npy"):
                raise CheckpointError(
                    f"Checkpoint file '{shown}' holds '{member}', which is not an .npy array; corrupt checkpoint."
                )
            try:
                shape, dtype = _npy_header(zf, member)
            except corrupt as exc:
                raise CheckpointError(
                    f"Checkpoint file '{shown}' is corrupt: the header of array '{member[:-4]}' is unreadable ({exc})."
                ) from None
            if dtype.hasobject:
                raise CheckpointError(
                    f"Checkpoint file '{shown}' holds array '{member[:-4]}' of object dtype. Object arrays need "
                    f"pickle to load, and rlgraph never loads with allow_pickle; corrupt or malicious checkpoint."
                )
            data_bytes = math.prod(shape) * dtype.itemsize
            if zf.getinfo(member).file_size > data_bytes + _MAX_NPY_HEADER:
                raise CheckpointError(
                    f"Checkpoint file '{shown}': array '{member[:-4][:60]}' inflates to "
                    f"{zf.getinfo(member).file_size:,} bytes, but its header describes {data_bytes:,} bytes of "
                    f"data; corrupt or malicious checkpoint. Nothing was loaded."
                )
            headers[member[:-4]] = (shape, dtype)
        if set(headers) != set(manifest):
            raise CheckpointError(
                f"Checkpoint file '{shown}' holds arrays {sorted(headers)[:5]}... but its manifest "
                f"lists {sorted(manifest)[:5]}...; the checkpoint is corrupt."
            )
        for name, entry in manifest.items():
            shape, dtype = headers[name]
            try:
                want_shape, want_dtype = entry
                matches = list(shape) == list(want_shape) and str(dtype) == want_dtype
            except (TypeError, ValueError):
                raise CheckpointError(
                    f"The manifest entry for '{name}' of '{shown}' is {entry!r}, not [shape, dtype]; corrupt checkpoint."
                ) from None
            if not matches:
                raise CheckpointError(
                    f"Array '{name}' in '{shown}' has shape {list(shape)} dtype {dtype}, but the manifest says "
                    f"{want_shape} {want_dtype}; corrupt checkpoint."
                )
        wanted = {name: header for name, header in headers.items() if not skip(name)}
        check(wanted)
        arrays = {}
        for name in wanted:
            try:
                with zf.open(name + ".npy") as f:
                    arrays[name] = npy_format.read_array(f, allow_pickle=False)
            except corrupt as exc:
                raise CheckpointError(
                    f"Checkpoint file '{shown}' is corrupt: array '{name}' cannot be read ({exc})."
                ) from None
    return arrays


def is_count(value: Any) -> bool:
    """True for a non-negative Python int (not a bool): what a counter must be."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _counters_problem(meta: dict) -> str | None:
    """Why the checkpoint's counters cannot resume training, or None."""
    counters = meta.get("counters")
    if not isinstance(counters, dict):
        return (
            "its meta.json has no 'counters'" if counters is None else f"its 'counters' are {counters!r}, not a mapping"
        )
    missing = [k for k in TRAINING_COUNTERS if k not in counters]
    if missing:
        return f"its counters lack {', '.join(repr(k) for k in missing)}"
    bad = [f"{k}={counters[k]!r}" for k in TRAINING_COUNTERS if not is_count(counters[k])]
    if bad:
        return f"its counters are not non-negative integers ({', '.join(bad)})"
    return None


def _check_weight_headers(agent, shown: Path) -> Callable[[Headers], None]:
    def check(headers: Headers) -> None:
        own = agent.weight_specs()
        missing, extra = sorted(set(own) - set(headers)), sorted(set(headers) - set(own))
        if missing or extra:
            raise CheckpointError(
                f"The weights in '{shown}' do not match this agent: missing {missing[:5]}"
                f"{'...' if len(missing) > 5 else ''}, unexpected {extra[:5]}{'...' if len(extra) > 5 else ''}. "
                f"The weights must come from an agent of the same type, network spec and spaces."
            )
        for name, (shape, dtype) in headers.items():
            problem = weight_problem(name, shape, dtype, *own[name])
            if problem:
                raise CheckpointError(f"Checkpoint file '{shown}': {problem} Nothing was loaded.")

    return check


def _check_state_headers(agent, shown: Path) -> Callable[[Headers], None]:
    def check(headers: Headers) -> None:
        for name, (shape, dtype) in headers.items():
            problem = agent.state_array_problem(name, shape, dtype)
            if problem:
                raise CheckpointError(
                    f"Checkpoint file '{shown}': array '{name}' (shape {shape}, dtype {dtype}, "
                    f"{math.prod(shape):,} elements) {problem}. Nothing was loaded."
                )

    return check


def load_checkpoint_into(agent, directory: str | os.PathLike, *, for_training: bool = True) -> dict:
    """Validate the checkpoint in ``directory`` against ``agent`` and load it; return its meta.

    With ``for_training`` (the default: resuming) weights, optimizer state, replay memory and
    counters are loaded, and a checkpoint without ``timesteps``/``updates`` counters is refused.
    Without it (evaluation only) only the weights are loaded (``state.npz`` is not read) and
    missing counters merely warn. Nothing in the agent changes unless every check passes.

    Raises:
        CheckpointError: a missing, corrupt or mismatching checkpoint; the message names the
            file, the array, what was found and what was expected.
    """

    shown = Path(directory)
    folder = resolve_checkpoint(shown)
    meta, stored_config = _read_meta_at(folder, shown)
    lacking = [k for k in ("agent_type", "observation_space", "action_space", "weights") if k not in meta]
    if lacking:
        raise CheckpointError(f"Checkpoint '{shown}' has a meta.json without {lacking}; corrupt checkpoint.")
    if meta.get("agent_type") != agent.config.type:
        raise CheckpointError(
            f"Checkpoint '{shown}' holds a '{meta.get('agent_type')}' agent; it cannot "
            f"be loaded into a '{agent.config.type}' agent."
        )
    for key, own in (("observation_space", agent.observation_space), ("action_space", agent.action_space)):
        try:
            stored = Space.from_json(meta[key])
        except Exception as exc:  # any malformed space description is a corrupt checkpoint
            raise CheckpointError(
                f"Checkpoint '{shown}' has an unreadable {key} in meta.json "
                f"({type(exc).__name__}: {exc}); corrupt checkpoint."
            ) from None
        if stored != own:
            raise CheckpointError(
                f"Checkpoint '{shown}' was written for {key.replace('_', ' ')} {stored!r}, "
                f"but this agent has {own!r}; use the same environment."
            )
    problem = _counters_problem(meta)
    if problem is not None:
        if for_training:
            raise CheckpointError(
                f"Checkpoint '{shown}' cannot be resumed from: {problem}, so training would silently "
                f"restart its schedules (exploration, learning rate, target sync) from step 0. Resume "
                f"from a checkpoint written by 'rlgraph train' or agent.save; to only evaluate it, use "
                f"'rlgraph evaluate' or agent.load(dir, for_training=False)."
            )
        warnings.warn(
            f"Checkpoint '{shown}': {problem}; loading its weights for evaluation only (it could not be resumed from).",
            stacklevel=3,
        )
    weights = _read_npz(
        folder / "weights.npz",
        shown / "weights.npz",
        meta["weights"],
        _check_weight_headers(agent, shown / "weights.npz"),
    )
    bad = nonfinite_arrays(weights)
    if bad:
        what = (
            f"Checkpoint '{shown}' holds NaN or infinite weights ({', '.join(bad[:4])}{' ...' if len(bad) > 4 else ''})"
        )
        if for_training:
            raise CheckpointError(
                f"{what}; training from them would only produce NaN. Resume from an earlier checkpoint of the "
                f"run (checkpoints/step-*). Nothing was loaded."
            )
        warnings.warn(f"{what}; its actions will be meaningless.", RuntimeWarning, stacklevel=3)
    if not for_training:
        agent.set_weights(weights)  # checked above: every name, shape and dtype family
        return meta
    counters = meta["counters"]
    state_manifest = meta.get("state", {})
    # Optimizer state is framework-specific; weights are backend-neutral and still load.
    other_backend = meta.get("backend") != agent.backend.name
    if (folder / "state.npz").is_file():
        state = _read_npz(
            folder / "state.npz",
            shown / "state.npz",
            state_manifest,
            _check_state_headers(agent, shown / "state.npz"),
            skip=lambda name: other_backend and name.startswith("optimizer/"),
        )
    elif state_manifest:
        raise CheckpointError(
            f"Checkpoint '{shown}' lacks 'state.npz', which its meta.json lists "
            f"{len(state_manifest)} arrays of; it is incomplete."
        )
    else:
        state = {}
    problem = nonfinite_state_problem(state, stored_config)
    if problem:
        raise CheckpointError(
            f"Checkpoint '{shown}' cannot be resumed from: {problem} Resume from an earlier checkpoint of the "
            f"run (checkpoints/step-*). Nothing was loaded."
        )
    problem = agent.state_problem(state, counters)
    if problem:
        raise CheckpointError(
            f"Checkpoint '{shown}' (state.npz and the counters in meta.json) holds state this agent cannot "
            f"take: {problem} Nothing was loaded."
        )
    old_weights = agent.get_weights()
    old_arrays, old_counters = agent.get_state()
    try:
        agent.set_state(state, counters)  # the memory validates itself before it changes
        agent.set_weights(weights)
    except Exception as exc:
        # Leave the agent exactly as it was: weights, optimizer, memory and counters.
        agent.set_weights(old_weights)
        agent.set_state(old_arrays, old_counters)
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(
            f"Checkpoint '{shown}' holds state this agent cannot take "
            f"({type(exc).__name__}: {exc}); the agent was left unchanged."
        ) from exc
    return meta


# --------------------------------------------------------------------------- attachments
def read_attachment(
    directory: str | os.PathLike, name: str, check: Callable[[Headers], None] = lambda headers: None
) -> tuple[dict, dict[str, np.ndarray]] | None:
    """The attachment ``name`` of the checkpoint ``directory`` as ``(info, arrays)``; None without one.

    Every array is checked against the manifest in ``meta.json`` and then by ``check`` (shapes
    and dtypes from the ``.npy`` headers, before any data is read; raise :class:`CheckpointError`
    to refuse); never unpickles.

    Raises:
        CheckpointError: a missing, corrupt or refused attachment.
    """
    shown = Path(directory)
    folder = resolve_checkpoint(shown)
    meta, _ = _read_meta_at(folder, shown)
    entry = (meta.get("attachments") or {}).get(name) if isinstance(meta.get("attachments"), dict) else None
    if entry is None:
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("info", {}), dict):
        raise CheckpointError(
            f"Checkpoint '{shown}' describes its attachment '{name}' as {entry!r}; corrupt checkpoint."
        )
    path = folder / f"{name}.npz"
    if not path.is_file():
        raise CheckpointError(
            f"Checkpoint '{shown}' lacks '{name}.npz', which its meta.json lists as an attachment; it is incomplete."
        )
    arrays = _read_npz(path, shown / f"{name}.npz", entry.get("arrays"), check)
    return dict(entry.get("info", {})), arrays


# --------------------------------------------------------------------------- array folders (snapshots)
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
        _write_file(tmp / "arrays.npz", lambda f: np.savez(f, **arrays))
        meta_bytes = _json_bytes(meta)
        _write_file(tmp / "meta.json", lambda f: f.write(meta_bytes))
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
