"""Entry-point module: the hook implementations rlgraph's plugin manager calls.

The memory, network and exploration classes are registered as
:class:`~rlgraph_core.plugins.LazyObject` s with their settings models, and the logger
is imported inside its hook, so listing plugins and validating configs stay cheap and a
problem in one class cannot break the import of this module.
"""

from rlgraph_core.plugins import LazyObject, hookimpl


@hookimpl
def rlgraph_memories():
    """Register the FIFO replay memory; configs select it with ``agent.memory.type: fifo_replay``."""
    # deferred (here and below): a broken class cannot break loading this module
    from rlgraph_example_components.settings import FifoReplaySettings

    return {"fifo_replay": (LazyObject("rlgraph_example_components.fifo_replay:FifoReplay"), FifoReplaySettings)}


@hookimpl
def rlgraph_loggers():
    """Register the CSV logger; configs enable it with ``train.loggers: [..., csv]``."""
    from rlgraph_example_components.csv_logger import CsvLogger  # deferred: see rlgraph_memories

    return {"csv": CsvLogger}


@hookimpl
def rlgraph_components():
    """Register the slot components.

    ``clip_obs`` fills a preprocessor slot (``agent.preprocessor: {type: clip_obs, bound: 5}``);
    ``layer_norm_mlp`` a network slot (``agent.network: {type: layer_norm_mlp, hidden: [64]}``) and
    ``boltzmann`` DQN's exploration slot (``agent.exploration: {type: boltzmann, temperature: 0.5}``),
    each with the settings model that validates its config section. The network and the
    exploration are registered lazily: validating a config imports only their settings models.
    """
    # deferred: see rlgraph_memories
    from rlgraph_example_components.clip_obs import ClipObservation
    from rlgraph_example_components.settings import BoltzmannSettings, LayerNormMLPSettings  # deferred, as above

    return {
        "clip_obs": ClipObservation,
        "layer_norm_mlp": (LazyObject("rlgraph_example_components.layer_norm_mlp:LayerNormMLP"), LayerNormMLPSettings),
        "boltzmann": (LazyObject("rlgraph_example_components.boltzmann:Boltzmann"), BoltzmannSettings),
    }
