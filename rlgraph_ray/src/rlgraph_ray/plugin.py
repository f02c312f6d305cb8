"""Entry-point module: registers the Ray executors through rlgraph's hooks.

The executor classes are :class:`~rlgraph_core.plugins.LazyObject` references and the settings
models need only pydantic, so ``rlgraph plugins`` and config validation never import ray.
"""

from rlgraph_core.plugins import LazyObject, hookimpl


@hookimpl
def rlgraph_executors():
    """``ray_sync`` (on-policy agents), ``ray_apex`` (DQN family) and ``ray_impala`` (V-trace
    agents), with their settings models."""
    # deferred: loading the entry point builds no model
    from rlgraph_ray.settings import RayApexSettings, RayImpalaSettings, RaySyncSettings

    return {
        "ray_sync": (LazyObject("rlgraph_ray.sync:RaySyncExecutor"), RaySyncSettings),
        "ray_apex": (LazyObject("rlgraph_ray.apex:RayApexExecutor"), RayApexSettings),
        "ray_impala": (LazyObject("rlgraph_ray.impala:RayImpalaExecutor"), RayImpalaSettings),
    }


@hookimpl
def rlgraph_commands():
    """``rlgraph tune``: hyperparameter search on Ray Tune (imported only when run)."""
    from rlgraph_ray.tune_command import TUNE_COMMAND  # deferred: as above

    return {"tune": TUNE_COMMAND}
