"""The TensorFlow backend of rlgraph (registry name ``tf``).

``TFBackend`` is imported on first access, so loading this package's entry point (which the
plugin manager does to list names) does not import TensorFlow.
"""

from rlgraph_core.lazy import lazy_exports

__all__ = ["TFBackend"]
__version__ = "0.1.0"

__getattr__, __dir__ = lazy_exports(globals(), {"TFBackend": "rlgraph_tf.backend"}, __all__)
