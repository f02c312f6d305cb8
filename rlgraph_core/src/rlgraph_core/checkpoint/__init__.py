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
The package holds one job per module: :mod:`~rlgraph_core.checkpoint.checks` (format constants and
value checks), :mod:`~rlgraph_core.checkpoint.store` (the atomic versions store),
:mod:`~rlgraph_core.checkpoint.npz` (checked ``.npz`` reading), :mod:`~rlgraph_core.checkpoint.meta`
(``meta.json``/``config.json`` and a run's newest checkpoint), :mod:`~rlgraph_core.checkpoint.saving`,
:mod:`~rlgraph_core.checkpoint.loading` and :mod:`~rlgraph_core.checkpoint.arrays` (array folders).
"""

from __future__ import annotations

from rlgraph_core.checkpoint.arrays import ARRAY_FILES, load_arrays, save_arrays
from rlgraph_core.checkpoint.checks import (
    FORMAT_VERSION,
    LATEST,
    PERIODIC_DIR,
    REQUIRED_FILES,
    TRAINING_COUNTERS,
    dtype_family,
    is_count,
    allows_nonfinite_obs,
    nonfinite_arrays,
    nonfinite_records_problem,
    nonfinite_state_problem,
    weight_names_problem,
    weight_problem,
)
from rlgraph_core.checkpoint.loading import load_checkpoint_into, read_attachment
from rlgraph_core.checkpoint.meta import latest_checkpoint, read_meta
from rlgraph_core.checkpoint.npz import Headers
from rlgraph_core.checkpoint.saving import (
    Attachments,
    adopt_checkpoint,
    remove_checkpoint,
    save_checkpoint,
    save_periodic,
)
from rlgraph_core.checkpoint.store import interrupted_save, refuse_linked_store, resolve_checkpoint
from rlgraph_core.errors import CheckpointError, DiskFullError, NonFiniteError

__all__ = [
    "ARRAY_FILES",
    "FORMAT_VERSION",
    "LATEST",
    "PERIODIC_DIR",
    "REQUIRED_FILES",
    "TRAINING_COUNTERS",
    "Attachments",
    "CheckpointError",
    "DiskFullError",
    "Headers",
    "NonFiniteError",
    "adopt_checkpoint",
    "dtype_family",
    "interrupted_save",
    "is_count",
    "latest_checkpoint",
    "load_arrays",
    "load_checkpoint_into",
    "allows_nonfinite_obs",
    "nonfinite_arrays",
    "nonfinite_records_problem",
    "nonfinite_state_problem",
    "read_attachment",
    "read_meta",
    "refuse_linked_store",
    "remove_checkpoint",
    "resolve_checkpoint",
    "save_arrays",
    "save_checkpoint",
    "save_periodic",
    "weight_names_problem",
    "weight_problem",
]
