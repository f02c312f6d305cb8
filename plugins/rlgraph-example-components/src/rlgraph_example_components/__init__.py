"""rlgraph-example-components: a third-party rlgraph plugin package.

It registers, through the ``rlgraph`` entry-point group, a replay memory named
``fifo_replay`` (:class:`FifoReplay`, settings :class:`FifoReplaySettings`), a metric logger
named ``csv`` (:class:`CsvLogger`), and three slot components: ``clip_obs``
(:class:`ClipObservation`) for the ``preprocessor`` slot, ``layer_norm_mlp``
(:class:`LayerNormMLP`, settings :class:`LayerNormMLPSettings`) for network slots and
``boltzmann`` (:class:`Boltzmann`, settings :class:`BoltzmannSettings`) for DQN's exploration
slot. The classes are imported on first access, so loading the
entry point (``rlgraph_example_components.plugin``) does not import the memory.
"""

import importlib

__all__ = [
    "Boltzmann",
    "BoltzmannSettings",
    "ClipObservation",
    "CsvLogger",
    "FifoReplay",
    "FifoReplaySettings",
    "LayerNormMLP",
    "LayerNormMLPSettings",
]
__version__ = "0.1.0"

_WHERE = {
    "Boltzmann": "boltzmann",
    "BoltzmannSettings": "settings",
    "LayerNormMLP": "layer_norm_mlp",
    "LayerNormMLPSettings": "settings",
    "ClipObservation": "clip_obs",
    "CsvLogger": "csv_logger",
    "FifoReplay": "fifo_replay",
    "FifoReplaySettings": "settings",
}


def __getattr__(name: str):
    """Import the public classes on first use (PEP 562)."""
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
