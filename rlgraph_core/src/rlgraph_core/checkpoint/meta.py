"""Reading a checkpoint's ``meta.json`` and ``config.json``, and choosing a run's newest checkpoint by them."""

from __future__ import annotations

import json
import os
from pathlib import Path

from rlgraph_core.checkpoint.checks import FORMAT_VERSION, PERIODIC_DIR, REQUIRED_FILES, is_count
from rlgraph_core.checkpoint.store import _complete, _latest_periodic, _recovery_candidate, resolve_checkpoint
from rlgraph_core.errors import CheckpointError


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
