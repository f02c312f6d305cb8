"""The JAX backend of rlgraph (registry name ``jax``), an outside plugin.

``JaxBackend`` is imported on first access, so loading this package's entry point (which the
plugin manager does to list names) does not import JAX.
"""

from rlgraph_core.lazy import lazy_exports

__all__ = ["JaxBackend"]
__version__ = "0.1.0"

__getattr__, __dir__ = lazy_exports(globals(), {"JaxBackend": "rlgraph_jax.backend"}, __all__)
