"""Plugin system: pluggy hook specs, the hook-implementation marker and the plugin manager."""

from rlgraph_core.plugins.hookspecs import hookimpl, hookspec
from rlgraph_core.plugins.lazy import LazyObject
from rlgraph_core.plugins.manager import (
    KINDS,
    FailedPlugin,
    PluginInfo,
    PluginManager,
    RegisteredName,
    get_plugin_manager,
)

__all__ = [
    "LazyObject",
    "hookimpl",
    "hookspec",
    "KINDS",
    "FailedPlugin",
    "PluginInfo",
    "PluginManager",
    "RegisteredName",
    "get_plugin_manager",
]
