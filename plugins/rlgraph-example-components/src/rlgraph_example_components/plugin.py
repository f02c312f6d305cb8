"""Entry-point module: the hook implementations rlgraph's plugin manager calls.

The memory class is registered as a :class:`~rlgraph_core.plugins.LazyObject`, and the logger
is imported inside its hook, so listing plugins and validating configs stay cheap and a
problem in one class cannot break the import of this module.
"""

from rlgraph_core.plugins import LazyObject, hookimpl


@hookimpl
def rlgraph_memories():
    """Register the FIFO replay memory; configs select it with ``agent.memory.type: fifo_replay``."""
    from rlgraph_example_components.settings import FifoReplaySettings

    return {"fifo_replay": (LazyObject("rlgraph_example_components.fifo_replay:FifoReplay"), FifoReplaySettings)}


@hookimpl
def rlgraph_loggers():
    """Register the CSV logger; configs enable it with ``train.loggers: [..., csv]``."""
    from rlgraph_example_components.csv_logger import CsvLogger

    return {"csv": CsvLogger}


@hookimpl
def rlgraph_components():
    """Register the observation clipper; configs use it with ``agent.preprocessor: {type: clip_obs, bound: 5}``."""
    from rlgraph_example_components.clip_obs import ClipObservation

    return {"clip_obs": ClipObservation}
