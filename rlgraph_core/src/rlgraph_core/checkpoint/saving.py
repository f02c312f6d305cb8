"""Saving an agent's checkpoint (fixed path or periodic, with attachments), removing one, and
adopting a checkpoint written elsewhere into a run folder.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Mapping

import numpy as np

# ``_write_file`` is looked up on the store module at each call, so a test that replaces it there
# (crash and ENOSPC injection) reaches every writer.
from rlgraph_core.checkpoint import store as atomic
from rlgraph_core.checkpoint.checks import (
    FORMAT_VERSION,
    LATEST,
    PERIODIC_DIR,
    _counters_problem,
    allows_nonfinite_obs,
    nonfinite_arrays,
    nonfinite_records_problem,
)
from rlgraph_core.checkpoint.meta import _read_meta_at
from rlgraph_core.checkpoint.npz import _read_npz
from rlgraph_core.checkpoint.store import (
    _TMP_PREFIX,
    _VERSION_RE,
    _clean_temporaries,
    _DISK_FULL,
    _disk_full,
    _fsync_dir,
    _json_bytes,
    _listdir,
    _manifest,
    _periodic_folders,
    _remove_legacy_leftovers,
    _remove_tree,
    _store_of,
    _switch_link,
    refuse_linked_store,
    resolve_checkpoint,
)
from rlgraph_core.errors import CheckpointError, NonFiniteError


def _refuse_nonfinite(
    agent,
    weights: Mapping[str, Any],
    state_arrays: Mapping[str, Any],
    where: Path,
    config: Mapping[str, Any],
    attachments: Attachments,
) -> None:
    """Raise :class:`NonFiniteError` if a weight, optimizer slot, replay record (the agent's or an
    attachment's, e.g. Ray replay shards') or priority is NaN or infinite: what loading refuses is
    never written. Replay observations are exempt where the run sets ``env.allow_nonfinite_obs``."""
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
    allow_obs = allows_nonfinite_obs(config)
    named = {f"state.npz: {k}": v for k, v in state_arrays.items() if not k.startswith("optimizer/")}
    for key, (arrays, _) in attachments.items():
        named.update({f"{key}.npz: {k}": v for k, v in arrays.items()})
    problem = nonfinite_records_problem(named, allow_obs)
    if problem:
        raise NonFiniteError(
            f"Refused to write a checkpoint to '{where}': the replay memory holds {problem}, which a resume "
            f"would refuse to load (rlgraph never saves non-finite data; observations and rewards are checked "
            f"where they enter, except observations under env.allow_nonfinite_obs). Nothing was written; the "
            f"checkpoints already there are unchanged. A reward or discount that is NaN or infinite, or an env "
            f"that returns NaN/inf observations without env.allow_nonfinite_obs: true, is the usual cause."
        )


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
    _refuse_nonfinite(
        agent,
        weights,
        state_arrays,
        store.parent / store.name[1:-9] if hidden else store / name,
        extra.get("config") or {},
        attachments,
    )
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
        atomic._write_file(tmp / "weights.npz", lambda f: np.savez(f, **weights))
        current = tmp / "state.npz"
        atomic._write_file(tmp / "state.npz", lambda f: np.savez(f, **state_arrays))
        for key, (arrays, _) in attachments.items():
            current = tmp / f"{key}.npz"
            atomic._write_file(tmp / f"{key}.npz", lambda f, arrays=arrays: np.savez(f, **arrays))
        config = _json_bytes(extra.get("config", {}))
        current = tmp / "config.json"
        atomic._write_file(tmp / "config.json", lambda f: f.write(config))
        meta_bytes = _json_bytes(meta)
        current = tmp / "meta.json"
        atomic._write_file(tmp / "meta.json", lambda f: f.write(meta_bytes))
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
                atomic._write_file(tmp / entry, lambda f, f_in=f_in: shutil.copyfileobj(f_in, f))
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
