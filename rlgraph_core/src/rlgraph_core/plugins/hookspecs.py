"""Hook specifications of the ``rlgraph`` plugin project.

Registration hooks each return a mapping ``{registry_name: object}``; the plugin manager
collects them per kind and refuses duplicate names. Lifecycle hooks are called by executors.
Built-in parts register through these same hooks (see :mod:`rlgraph_core.builtins`).
"""

import pluggy

PROJECT = "rlgraph"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def rlgraph_backends():
    """Return ``{name: factory}``; ``factory(mode=..., device=..., seed=...)`` makes a Backend."""


@hookspec
def rlgraph_executors():
    """Return ``{name: executor_class}`` for executors that run training jobs."""


@hookspec
def rlgraph_components():
    """Return ``{name: class}`` for components and memories that configs may name by ``type``."""


@hookspec
def rlgraph_agents():
    """Return ``{name: (agent_class, config_model)}`` for agents configs may name by ``type``."""


@hookspec
def rlgraph_loggers():
    """Return ``{name: logger_class}`` for metric loggers configs may list under ``loggers``."""


@hookspec
def rlgraph_on_train_start(run_info):
    """Called once when a training run starts; ``run_info`` is a dict (config, out_dir, ...)."""


@hookspec
def rlgraph_on_iteration(metrics):
    """Called after every reporting iteration with the metrics dict of that iteration."""


@hookspec
def rlgraph_on_train_end(summary):
    """Called once when a training run ends with the final summary dict."""
