"""Hook specifications of the ``rlgraph`` plugin project.

Registration hooks each return a mapping ``{registry_name: object}``; the plugin manager
collects them per kind (``KINDS``). A name claimed by two plugins of one kind is kept with both
claimants and refused on use until one is blocked. A plugin implementing a function named like
a hook that is not specified here (a misspelling) is reported and skipped. Lifecycle hooks are
called by executors. ``docs/plugins.md`` has the contract of every kind.
Built-in parts register through these same hooks (see :mod:`rlgraph_core.builtins`).
"""

import pluggy

PROJECT = "rlgraph"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def rlgraph_backends():
    """Return ``{name: factory}`` or ``{name: (factory, settings_model)}`` for backends.

    ``factory(mode=..., device=..., seed=...)`` makes a Backend; with a ``settings_model`` (a
    subclass of :class:`rlgraph_core.backend.settings.BackendSettings`, which validates the run
    config's ``backend:`` section and the form of ``train.device``) it also receives
    ``settings=`` the validated instance. ``factory`` may be a
    :class:`~rlgraph_core.plugins.LazyObject`, so that listing and validating never import it.
    """


@hookspec
def rlgraph_executors():
    """Return ``{name: (executor_class, settings_model)}`` (or ``{name: executor_class}``) for executors.

    ``settings_model`` subclasses :class:`rlgraph_core.execution.settings.ExecutorSettings` and
    validates the run config's ``executor:`` section; a plain class has no settings.
    ``executor_class`` may be a :class:`~rlgraph_core.plugins.LazyObject`, so that listing and
    validating never import it (or the framework it needs).
    """


@hookspec
def rlgraph_components():
    """Return ``{name: class}`` or ``{name: (class, settings_model)}`` for components configs may name by ``type``.

    A component that fills a slot with settings (a network, an exploration) is registered with
    its settings model, a subclass of the slot's base in :mod:`rlgraph_core.components.settings`
    (``NetworkSettings``, ``ExplorationSettings``), which validates its config section; the class
    may be a :class:`~rlgraph_core.plugins.LazyObject`.
    """


@hookspec
def rlgraph_agents():
    """Return ``{name: (agent_class, config_model)}`` for agents configs may name by ``type``."""


@hookspec
def rlgraph_memories():
    """Return ``{name: (memory_class, settings_model)}`` for replay memories (``agent.memory.type``).

    ``settings_model`` subclasses :class:`rlgraph_core.memories.settings.MemorySettings`;
    ``memory_class`` (a class, or a :class:`~rlgraph_core.plugins.LazyObject` so that listing
    and validating never import it) is built as
    ``memory_class(**settings.model_dump(exclude={"type"}), seed=seed)`` and must follow
    :class:`rlgraph_core.memories.protocol.Memory`.
    """


@hookspec
def rlgraph_wrappers():
    """Return ``{name: (factory, settings_model)}`` for environment wrappers (``env.wrappers``).

    ``settings_model`` subclasses :class:`rlgraph_core.wrappers.WrapperSettings` and validates one
    entry of the config's ``env.wrappers`` list; ``factory(env, settings)`` returns the wrapped
    gymnasium env (prefer gymnasium's or the env family's own wrappers to writing one).
    """


@hookspec
def rlgraph_loggers():
    """Return ``{name: logger_class}`` for metric loggers configs may list under ``loggers``."""


@hookspec
def rlgraph_callbacks():
    """Return ``{name: callback_class}`` or ``{name: (callback_class, settings_model)}`` for callbacks
    configs may list under ``train.callbacks`` (see :mod:`rlgraph_core.callbacks`).

    The entry's other keys are the class's keyword arguments, validated by ``settings_model`` (a
    pydantic model) when given, else checked against the constructor's signature.
    """


@hookspec
def rlgraph_commands():
    """Return ``{name: command}`` for extra ``rlgraph`` subcommands (e.g. ``tune`` from rlgraph-ray).

    ``command`` has ``help`` (one line), ``add_arguments(parser)`` (an argparse sub-parser) and
    ``run(args) -> int`` (the exit code; raise :class:`~rlgraph_core.errors.RLGraphError` for a
    user mistake). The module providing it must not import heavy libraries at import time.
    """


@hookspec
def rlgraph_on_train_start(run_info):
    """Called once when a training run starts; ``run_info`` is a dict (config, out_dir, ...)."""


@hookspec
def rlgraph_on_iteration(metrics):
    """Called after every reporting iteration with the metrics dict of that iteration."""


@hookspec
def rlgraph_on_train_end(summary):
    """Called once when a training run ends with the final summary dict."""
