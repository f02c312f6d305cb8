"""rlgraph-example-components: a third-party rlgraph plugin package.

It registers, through the ``rlgraph`` entry-point group, a replay memory named
``fifo_replay`` (:class:`FifoReplay`) and a metric logger named ``csv`` (:class:`CsvLogger`).
"""

from rlgraph_example_components.csv_logger import CsvLogger
from rlgraph_example_components.fifo_replay import FifoReplay

__all__ = ["CsvLogger", "FifoReplay"]
__version__ = "0.1.0"
