"""Loading a checkpoint into an agent (all or nothing, checked against it) and reading its attachments."""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path
from typing import Callable

import numpy as np

from rlgraph_core.checkpoint.checks import (
    _counters_problem,
    nonfinite_arrays,
    nonfinite_state_problem,
    weight_names_problem,
    weight_problem,
)
from rlgraph_core.checkpoint.meta import _read_meta_at
from rlgraph_core.checkpoint.npz import Headers, _read_npz
from rlgraph_core.checkpoint.store import resolve_checkpoint
from rlgraph_core.errors import CheckpointError
from rlgraph_core.spaces import Space


def _check_weight_headers(agent, shown: Path) -> Callable[[Headers], None]:
    def check(headers: Headers) -> None:
        own = agent.weight_specs()
        names = weight_names_problem(own, headers)
        if names:
            raise CheckpointError(f"The weights in '{shown}' {names}")
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
