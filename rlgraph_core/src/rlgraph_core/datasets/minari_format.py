"""What reading and writing share: importing Minari, where a dataset lives, its metadata keys."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rlgraph_core.errors import ConfigError

#: The metadata key under which rlgraph stores the env section that made a recorded dataset
#: (id, kwargs and wrappers), so an offline run evaluates on the same wrapped env.
ENV_KEY = "rlgraph_env"

#: Minari's storage format rlgraph writes (its default; h5py).
DATA_FORMAT = "hdf5"


def import_minari() -> Any:
    """The ``minari`` module, or a ConfigError naming the extra that brings it."""
    try:
        import minari
    except ImportError as exc:
        raise ConfigError(
            f"Datasets are read and written with Minari, which is not installed ({exc}); "
            f'pip install "rlgraph-core[offline]" brings it (minari with its HDF5 storage).'
        ) from None
    return minari


def minari_root() -> Path:
    """Minari's local datasets folder (``MINARI_DATASETS_PATH``, default ``~/.minari/datasets``).

    Computed here rather than with ``minari.storage.get_dataset_path``, which creates the folder:
    looking a dataset up must write nothing."""
    root = os.environ.get("MINARI_DATASETS_PATH")
    return Path(root) if root else Path.home() / ".minari" / "datasets"


def data_folder(path: Path) -> Path | None:
    """The folder holding ``metadata.json`` of the dataset at ``path`` (``path/data`` in Minari's
    layout, or ``path`` itself), or None when there is none."""
    for candidate in (path / "data", path):
        if (candidate / "metadata.json").is_file():
            return candidate
    return None
