"""Entry-point module: the hook implementations rlgraph's plugin manager calls.

Imports of the implementing classes happen inside the hooks, so listing plugins stays cheap
and a problem in one class cannot break the import of this module.
"""

from rlgraph_core.plugins import hookimpl


@hookimpl
def rlgraph_components():
    """Register the FIFO replay memory; configs select it with ``agent.memory.type: fifo_replay``."""
    from rlgraph_example_components.fifo_replay import FifoReplay

    return {"fifo_replay": FifoReplay}


@hookimpl
def rlgraph_loggers():
    """Register the CSV logger; configs enable it with ``train.loggers: [..., csv]``."""
    from rlgraph_example_components.csv_logger import CsvLogger

    return {"csv": CsvLogger}
