"""rlgraph-horovod: the ``horovod`` data-parallel executor for either rlgraph backend.

Importing this package imports neither horovod nor a backend; the executor module does, when
a run actually starts. Install Horovod itself with ``python -m rlgraph_horovod.install``.
"""

__version__ = "0.1.0"
