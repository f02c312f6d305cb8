"""The JAX backend of rlgraph (registry name ``jax``), an outside plugin.

``JaxBackend`` is imported on first access, so loading this package's entry point (which the
plugin manager does to list names) does not import JAX.
"""

__all__ = ["JaxBackend"]
__version__ = "0.1.0"


def __getattr__(name):
    if name == "JaxBackend":
        from rlgraph_jax.backend import JaxBackend  # deferred: importing the package must not import JAX

        return JaxBackend
    raise AttributeError(f"module 'rlgraph_jax' has no attribute {name!r}")
