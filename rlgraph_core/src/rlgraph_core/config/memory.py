"""Memories by registry name: validate ``agent.memory`` settings and build the memory they name.

Both go through the plugin manager's ``memories`` kind (the ``rlgraph_memories`` hook), so a
memory from a third-party package is validated and built exactly like the built-in ones.
Validating never imports a lazily registered memory class; only :func:`make_memory` does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from rlgraph_core.config.errors import format_validation_error
from rlgraph_core.errors import ConfigError, PluginError
from rlgraph_core.memories.protocol import Memory
from rlgraph_core.memories.settings import MemorySettings
from rlgraph_core.plugins import get_plugin_manager

__all__ = ["DEFAULT_MEMORY_TYPE", "make_memory", "validate_memory_settings"]

#: The memory ``type`` a settings mapping without one gets.
DEFAULT_MEMORY_TYPE = "replay"


def _manager(plugin_manager):
    if plugin_manager is not None:
        return plugin_manager

    return get_plugin_manager()


def validate_memory_settings(
    plugin_manager, raw: Mapping[str, Any] | MemorySettings, field: str = "agent.memory"
) -> MemorySettings:
    """Validate a memory's settings against the settings model registered for its ``type``.

    Args:
        plugin_manager: the :class:`~rlgraph_core.plugins.PluginManager` to resolve the type
            with (None: the process-wide one).
        raw: a mapping such as ``{"type": "prioritized_replay", "capacity": 50000}`` (a missing
            ``type`` means ``"replay"``), or settings to validate again.
        field: the config path of ``raw``, used in error messages.

    Returns:
        An instance of the registered settings model (a :class:`MemorySettings`).

    Raises:
        ConfigError: one paragraph naming the field path and the bad value: for an unknown or
            contested type it lists the known memories, for a bad or unknown field the
            constraint or the known fields.
    """
    pm = _manager(plugin_manager)
    if isinstance(raw, MemorySettings):
        raw = raw.model_dump()
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"'{field}' = {json.dumps(raw, default=str)}: a memory is a mapping of settings, "
            f"e.g. {{type: replay, capacity: 100000}}."
        )
    raw = dict(raw)
    name = raw.setdefault("type", DEFAULT_MEMORY_TYPE)
    if not isinstance(name, str):
        raise ConfigError(
            f"'{field}.type' = {json.dumps(name, default=str)}: it must be a memory name; known "
            f"memories: {', '.join(sorted(pm.names('memories'))) or '(none installed)'}."
        )
    try:
        _, model = pm.get("memories", name, field=f"{field}.type")
    except PluginError as exc:
        msg = str(exc)
        if name in pm.claimants("components"):
            msg += f" '{name}' is a component, not a replay memory."
        raise ConfigError(msg + " (Plugins may add memories; 'rlgraph plugins' lists them.)") from None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(
            f"Invalid {name} memory settings: {format_validation_error(exc, field, raw, model)}."
        ) from None


def make_memory(
    plugin_manager, settings: MemorySettings | Mapping[str, Any], seed: int | None = 0, field: str = "agent.memory"
) -> Memory:
    """Build the memory that ``settings`` name, through the plugin manager's ``memories`` kind.

    The class registered for ``settings.type`` is called as
    ``memory_class(**settings.model_dump(exclude={"type"}), seed=seed)`` (a lazily registered
    class is imported now). Settings that are a mapping, or a model other than the registered
    one, are validated first with :func:`validate_memory_settings`.

    Raises:
        ConfigError: bad settings, or the memory refused its arguments with a ValueError.
        PluginError: the type is contested, the class failed to import or to accept the
            constructor contract, or the object built does not follow :class:`Memory`.
    """
    pm = _manager(plugin_manager)
    name = settings.type if isinstance(settings, MemorySettings) else None
    if name is not None:
        try:
            memory_class, model = pm.get("memories", name, field=f"{field}.type")
        except PluginError as exc:
            raise ConfigError(str(exc)) from None
        if type(settings) is not model:
            settings = validate_memory_settings(pm, settings, field)
    else:
        settings = validate_memory_settings(pm, settings, field)
        memory_class, _ = pm.get("memories", settings.type)
    entry = pm.names("memories")[settings.type]
    origin = f"the '{settings.type}' memory of distribution '{entry.distribution}'"
    kwargs = settings.model_dump(exclude={"type"})
    try:
        memory = memory_class(**kwargs, seed=seed)
    except (PluginError, ConfigError):
        raise
    except TypeError as exc:
        raise PluginError(
            f"{origin} does not take its settings as keyword arguments "
            f"({', '.join(kwargs)}, seed): {exc}. A memory class must accept "
            f"memory_class(**settings.model_dump(exclude={{'type'}}), seed=seed)."
        ) from exc
    except ValueError as exc:
        raise ConfigError(f"'{field}': {origin} refused its settings {kwargs}: {exc}") from None
    missing = [
        m
        for m in ("prioritized", "__len__", "insert", "sample", "state_dict", "load_state_dict")
        if not hasattr(memory, m)
    ]
    if getattr(memory, "prioritized", False) and not callable(getattr(memory, "update_priorities", None)):
        missing.append("update_priorities (it says prioritized = True)")
    if missing:
        raise PluginError(
            f"{origin} built a {type(memory).__name__}, which lacks {', '.join(missing)} of the "
            f"memory protocol (rlgraph_core.memories.protocol.Memory)."
        )
    return memory
