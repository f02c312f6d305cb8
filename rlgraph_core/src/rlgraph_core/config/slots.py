"""Component slots by registry name: validate a slot's settings against the model its plugin registered.

An agent config's slot fields (marked with :class:`~rlgraph_core.components.settings.Slot`:
``network``, ``exploration``, ``preprocessor`` ...) hold the settings of the component their
``type`` names. :func:`validate_slot_settings` resolves that type through the plugin manager's
``components`` kind, checks that the component can fill the slot (a network slot takes only
components registered with a ``NetworkSettings`` model), and validates the section with the
registered settings model, so a component from a third-party package is validated exactly like
a built-in one. Validating never imports a lazily registered component class.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from rlgraph_core.components.settings import ComponentSettings, ComponentSpec, Slot, component_entry, slot_fields
from rlgraph_core.config.errors import format_validation_error
from rlgraph_core.errors import ConfigError, PluginError

__all__ = ["check_stateful_network", "known_slot_components", "validate_agent_slots", "validate_slot_settings"]


def known_slot_components(plugin_manager, slot: Slot) -> list[str]:
    """The registered component names that can fill ``slot`` (sorted)."""
    names = []
    for name, entry in plugin_manager.names("components").items():
        _, model = component_entry(entry.obj)
        if slot.base is None or (model is not None and issubclass(model, slot.base)):
            names.append(name)
    return sorted(names)


def _a(role: str) -> str:
    return f"an {role}" if role[0] in "aeiou" else f"a {role}"


def _unknown(plugin_manager, slot: Slot, name: str, field: str) -> ConfigError:
    known = known_slot_components(plugin_manager, slot)
    close = difflib.get_close_matches(name, known, n=1)
    msg = (
        f"Unknown {slot.role} '{name}' (in field '{field}.type'). Known {slot.role}s: "
        f"{', '.join(known) or '(none installed)'}."
    )
    if close:
        msg += f" Did you mean '{close[0]}'?"
    if name in plugin_manager.names("components"):
        msg = (
            f"'{field}.type' = '{name}' is a component, but not {_a(slot.role)}: it is not registered with a "
            f"{slot.base.__name__ if slot.base else 'settings'} model. Known {slot.role}s: {', '.join(known)}."
        )
    failed = getattr(plugin_manager, "failed", [])
    if failed:
        msg += " Plugins that failed to load: " + "; ".join(f"{f.name} ({f.distribution})" for f in failed) + "."
    blocked = getattr(plugin_manager, "blocked", [])
    if blocked:
        msg += " Blocked plugins (not loaded): " + ", ".join(f"{b.name} ({b.distribution})" for b in blocked) + "."
    return ConfigError(msg + f" (Plugins may add {slot.role}s; 'rlgraph plugins' lists them.)")


def validate_slot_settings(plugin_manager, slot: Slot, raw: Any, field: str) -> ComponentSettings | None:
    """Validate one slot's settings against the settings model registered for their ``type``.

    Args:
        plugin_manager: the :class:`~rlgraph_core.plugins.PluginManager` to resolve the type with.
        slot: the slot (its role, the settings base a component must register, its default).
        raw: the config section: a registry name, a mapping ``{type: name, <settings>...}`` (a
            missing ``type`` means the slot's default component), a shorthand the slot accepts,
            settings already validated, or None (an empty slot).
        field: the config path of the section, e.g. ``agent.network``.

    Returns:
        An instance of the registered settings model (the slot's default model for the default
        type, so an algorithm keeps its own defaults), a :class:`ComponentSpec` for a component
        registered without a model, or None.

    Raises:
        ConfigError: one paragraph naming the field path and the bad value: for an unknown type
            (or one that cannot fill the slot) it lists the components that can, for a bad or
            unknown setting the constraint or the known fields.
    """
    value = slot.raw(raw)
    if value is None:
        return None
    if isinstance(value, ComponentSettings):
        given: ComponentSettings | None = value
        value = value.model_dump()
    else:
        given = None
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"'{field}' = {json.dumps(value, default=str)}: {_a(slot.role)} is a registry name or a mapping "
            f"{{type: name, <its settings>...}}; known {slot.role}s: "
            f"{', '.join(known_slot_components(plugin_manager, slot))}."
        )
    name = value.get("type")
    if not isinstance(name, str):
        raise ConfigError(
            f"'{field}.type' = {json.dumps(name, default=str)}: it must be a {slot.role} name; known "
            f"{slot.role}s: {', '.join(known_slot_components(plugin_manager, slot))}."
        )
    if name in plugin_manager.contested("components"):
        try:
            plugin_manager.get("components", name, field=f"{field}.type")
        except PluginError as exc:
            raise ConfigError(str(exc)) from None
    entry = plugin_manager.names("components").get(name)
    if entry is None:
        raise _unknown(plugin_manager, slot, name, field)
    _, model = component_entry(entry.obj)
    if slot.base is not None and (model is None or not issubclass(model, slot.base)):
        raise _unknown(plugin_manager, slot, name, field)
    if slot.default is not None and name == slot.default_type:
        model = slot.default  # the algorithm's defaults for its default component
    if model is None:
        model = ComponentSpec
    if given is not None and isinstance(given, model):
        return given
    try:
        return model.model_validate(dict(value))
    except ValidationError as exc:
        raise ConfigError(
            f"Invalid {name} {slot.role} settings: {format_validation_error(exc, field, dict(value), model)}."
        ) from None


def check_stateful_network(plugin_manager, model: type[BaseModel], settings: Any, field: str) -> None:
    """Refuse a stateful network (``lstm``, ``gru``: ``settings.stateful``) in a slot of an agent
    config ``model`` that does not declare ``recurrent_networks`` (an algorithm that cannot carry
    the state from step to step nor train on sequences).

    Raises:
        ConfigError: naming the field, the network and the algorithms that can train it.
    """
    if not getattr(settings, "stateful", False) or getattr(model, "recurrent_networks", False):
        return
    able = []
    for name, entry in plugin_manager.names("agents").items():
        obj = entry.obj
        config_model = obj[1] if isinstance(obj, tuple) and len(obj) == 2 else None
        if getattr(config_model, "recurrent_networks", False):
            able.append(name)
    algorithm = getattr(model.model_fields.get("type"), "default", None) or model.__name__
    raise ConfigError(
        f"'{field}.type' = '{settings.type}' is a recurrent network: its state must be carried from step "
        f"to step and it trains on sequences, which the algorithm '{algorithm}' does not do. Algorithms that "
        f"train recurrent networks: {', '.join(sorted(able)) or '(none installed)'}; with '{algorithm}' use a "
        f"feed-forward network (mlp, cnn, dict_encoder), e.g. over stacked frames (env.wrappers: "
        f"[{{type: frame_stack}}])."
    )


def validate_agent_slots(plugin_manager, model: type[BaseModel], agent_raw: dict, prefix: str = "agent") -> dict:
    """``agent_raw`` with each slot section of ``model`` validated by :func:`validate_slot_settings`
    (and a stateful network refused where the algorithm cannot train one: :func:`check_stateful_network`).

    Sections the raw config leaves out keep the model's defaults.
    """
    out = dict(agent_raw)
    for name, slot in slot_fields(model).items():
        if name in out:
            out[name] = validate_slot_settings(plugin_manager, slot, out[name], f"{prefix}.{name}")
            check_stateful_network(plugin_manager, model, out[name], f"{prefix}.{name}")
    return out


def validated_agent_config(plugin_manager, agent_config: BaseModel, prefix: str = "agent") -> BaseModel:
    """A validated agent config whose slot settings are (re)validated against the registry.

    Returns ``agent_config`` itself when every slot already holds its registered model.
    """
    updates = {}
    for name, slot in slot_fields(type(agent_config)).items():
        value = getattr(agent_config, name)
        checked = validate_slot_settings(plugin_manager, slot, value, f"{prefix}.{name}")
        check_stateful_network(plugin_manager, type(agent_config), checked, f"{prefix}.{name}")
        if checked is not value:
            updates[name] = checked
    return agent_config.model_copy(update=updates) if updates else agent_config
