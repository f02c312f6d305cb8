"""Entry-point module: registers the ``jax`` backend through rlgraph's hooks."""

from rlgraph_core.plugins import LazyObject, hookimpl


@hookimpl
def rlgraph_backends():
    """Register the JAX backend under the name ``jax`` (JAX is imported on first use)."""
    return {"jax": LazyObject("rlgraph_jax.backend:JaxBackend")}
