"""The TensorFlow backend of rlgraph (registry name ``tf``).

``TFBackend`` is imported on first access, so loading this package's entry point (which the
plugin manager does to list names) does not import TensorFlow.
"""

__all__ = ["TFBackend"]
__version__ = "0.1.0"


def __getattr__(name):
    """Import :class:`rlgraph_tf.backend.TFBackend` on first access."""
    if name == "TFBackend":
        from rlgraph_tf.backend import TFBackend  # deferred: importing the package must not import TensorFlow

        return TFBackend
    raise AttributeError(f"module 'rlgraph_tf' has no attribute {name!r}")
