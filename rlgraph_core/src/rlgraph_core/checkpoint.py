"""Checkpoints: arrays in ``.npz`` (never pickled) plus JSON, written atomically, validated on load.

Layout of a checkpoint directory::

    meta.json       format version, agent type, backend it was written on, spaces, counters,
                    and a manifest {array name: [shape, dtype]} for every stored array
    config.json     the full run config
    weights.npz     agent variables, backend-neutral names and layout
    state.npz       optimizer state and other arrays needed to resume

The directory is written under a temporary name and renamed into place, so a crash never
leaves a half-written checkpoint where a good one was.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from rlgraph_core.errors import CheckpointError

FORMAT_VERSION = 1


def _manifest(arrays: dict[str, np.ndarray]) -> dict:
    return {k: [list(np.shape(v)), str(np.asarray(v).dtype)] for k, v in arrays.items()}


def save_checkpoint(agent, directory: str | os.PathLike, extra: dict) -> str:
    """Write ``agent``'s weights, state and config into ``directory`` (replaced atomically)."""
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    weights = agent.get_weights()
    state_arrays, counters = agent.get_state()
    meta = {
        "format_version": FORMAT_VERSION,
        "agent_type": agent.config.type,
        "backend": agent.backend.name,
        "observation_space": agent.observation_space.to_json(),
        "action_space": agent.action_space.to_json(),
        "counters": counters,
        "weights": _manifest(weights),
        "state": _manifest(state_arrays),
    }
    meta.update({k: v for k, v in extra.items() if k != "config"})
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    old = None
    try:
        np.savez(tmp / "weights.npz", **weights)
        np.savez(tmp / "state.npz", **state_arrays)
        (tmp / "config.json").write_text(json.dumps(extra.get("config", {}), indent=2))
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2, default=_json_default))
        old = None
        if directory.exists():
            old = directory.with_name(f".{directory.name}.old")
            if old.exists():
                shutil.rmtree(old)
            os.replace(directory, old)
        os.replace(tmp, directory)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and old.exists() and not directory.exists():
            os.replace(old, directory)  # the swap failed half-way: put the previous checkpoint back
        raise
    return str(directory)


def _json_default(obj):
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def read_meta(directory: str | os.PathLike) -> tuple[dict, dict]:
    """Read and check ``meta.json`` and ``config.json``; return ``(meta, config)``."""
    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(
            f"Checkpoint directory '{directory}' does not exist; pass the folder "
            f"'rlgraph train' wrote (its 'checkpoint' subfolder under --out)."
        )
    for name in ("meta.json", "config.json", "weights.npz"):
        if not (directory / name).is_file():
            raise CheckpointError(
                f"Checkpoint '{directory}' lacks '{name}'; it is incomplete or not an "
                f"rlgraph checkpoint (expected meta.json, config.json, weights.npz, state.npz)."
            )
    try:
        meta = json.loads((directory / "meta.json").read_text())
        config = json.loads((directory / "config.json").read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(
            f"Checkpoint '{directory}' has a corrupt JSON file ({exc}); it cannot be loaded."
        ) from None
    if not isinstance(meta, dict) or not isinstance(config, dict):
        raise CheckpointError(
            f"Checkpoint '{directory}' has a meta.json or config.json that is not a JSON object; it cannot be loaded."
        )
    if meta.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"Checkpoint '{directory}' has format version {meta.get('format_version')!r}; "
            f"this rlgraph reads version {FORMAT_VERSION}."
        )
    return meta, config


def _load_npz(path: Path, manifest: dict) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise CheckpointError(f"Checkpoint file '{path}' is corrupt or not an npz archive ({exc}).") from None
    if not isinstance(manifest, dict):
        raise CheckpointError(f"The manifest for '{path}' in meta.json is not a mapping; corrupt checkpoint.")
    if set(arrays) != set(manifest):
        raise CheckpointError(
            f"Checkpoint file '{path}' holds arrays {sorted(arrays)[:5]}... but its manifest "
            f"lists {sorted(manifest)[:5]}...; the checkpoint is corrupt."
        )
    for k, entry in manifest.items():
        try:
            shape, dtype = entry
            matches = list(arrays[k].shape) == list(shape) and str(arrays[k].dtype) == dtype
        except (TypeError, ValueError):
            raise CheckpointError(
                f"The manifest entry for '{k}' of '{path}' is {entry!r}, not [shape, dtype]; corrupt checkpoint."
            ) from None
        if not matches:
            raise CheckpointError(
                f"Array '{k}' in '{path}' has shape {list(arrays[k].shape)} dtype "
                f"{arrays[k].dtype}, but the manifest says {shape} {dtype}; corrupt checkpoint."
            )
    return arrays


def load_checkpoint_into(agent, directory: str | os.PathLike) -> dict:
    """Validate the checkpoint in ``directory`` against ``agent`` and load it; return its meta.

    Nothing in the agent changes unless every check passes.
    """
    from rlgraph_core.spaces import Space

    directory = Path(directory)
    meta, _ = read_meta(directory)
    lacking = [k for k in ("agent_type", "observation_space", "action_space", "weights") if k not in meta]
    if lacking:
        raise CheckpointError(f"Checkpoint '{directory}' has a meta.json without {lacking}; corrupt checkpoint.")
    if meta.get("agent_type") != agent.config.type:
        raise CheckpointError(
            f"Checkpoint '{directory}' holds a '{meta.get('agent_type')}' agent; it cannot "
            f"be loaded into a '{agent.config.type}' agent."
        )
    for key, own in (("observation_space", agent.observation_space), ("action_space", agent.action_space)):
        try:
            stored = Space.from_json(meta[key])
        except Exception as exc:  # any malformed space description is a corrupt checkpoint
            raise CheckpointError(
                f"Checkpoint '{directory}' has an unreadable {key} in meta.json "
                f"({type(exc).__name__}: {exc}); corrupt checkpoint."
            ) from None
        if stored != own:
            raise CheckpointError(
                f"Checkpoint '{directory}' was written for {key.replace('_', ' ')} {stored!r}, "
                f"but this agent has {own!r}; use the same environment."
            )
    weights = _load_npz(directory / "weights.npz", meta["weights"])
    state_manifest = meta.get("state", {})
    if (directory / "state.npz").is_file():
        state = _load_npz(directory / "state.npz", state_manifest)
    elif state_manifest:
        raise CheckpointError(
            f"Checkpoint '{directory}' lacks 'state.npz', which its meta.json lists "
            f"{len(state_manifest)} arrays of; it is incomplete."
        )
    else:
        state = {}
    if meta.get("backend") != agent.backend.name:
        # Optimizer state is framework-specific; weights are backend-neutral and still load.
        state = {k: v for k, v in state.items() if not k.startswith("optimizer/")}
    old_weights = agent.get_weights()
    old_arrays, old_counters = agent.get_state()
    agent.set_weights(weights)  # validates names and shapes before assigning anything
    try:
        agent.set_state(state, meta.get("counters", {}))
    except Exception as exc:
        # Leave the agent exactly as it was: weights, optimizer, memory and counters.
        agent.set_weights(old_weights)
        agent.set_state(old_arrays, old_counters)
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(
            f"Checkpoint '{directory}' holds state this agent cannot take "
            f"({type(exc).__name__}: {exc}); the agent was left unchanged."
        ) from exc
    return meta
