"""Entry-point module: registers the ``jax`` backend through rlgraph's hooks."""

from rlgraph_core.plugins import LazyObject, hookimpl


@hookimpl
def rlgraph_backends():
    """Register the JAX backend under the name ``jax`` (JAX is imported on first use), with its
    ``backend:`` settings model."""
    from rlgraph_jax.settings import JaxSettings  # deferred: loading the entry point builds no model

    return {"jax": (LazyObject("rlgraph_jax.backend:JaxBackend"), JaxSettings)}


@hookimpl
def rlgraph_executors():
    """``compiled``: PPO on a gymnax env, env steps + acting + learning as one ``jax.jit`` program
    (JAX is imported only when it runs; the settings model needs only pydantic)."""
    from rlgraph_jax.compiled.settings import CompiledSettings  # deferred: as above

    return {"compiled": (LazyObject("rlgraph_jax.compiled.executor:CompiledExecutor"), CompiledSettings)}
