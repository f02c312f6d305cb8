"""Datasets of transitions in the Minari format: read into replay memories, and recorded by runs.

* :class:`DatasetSource` opens a Minari dataset (a folder, or a dataset id in the local Minari
  root; nothing is ever downloaded), checks it and its spaces, and streams its episodes into a
  replay memory as transitions; the offline executor (:mod:`rlgraph_core.offline`) learns from it.
* :class:`DatasetWriter` records the episodes a run collects (``train.record_dataset: PATH``) as
  a Minari dataset that :class:`DatasetSource`, Minari itself and other libraries read.

Both need Minari (``pip install "rlgraph-core[offline]"``); it is imported only when a dataset is
opened or written.
"""

from rlgraph_core.datasets.recording import DatasetWriter
from rlgraph_core.datasets.source import DatasetSource, FilledMemory

__all__ = ["DatasetSource", "DatasetWriter", "FilledMemory"]
