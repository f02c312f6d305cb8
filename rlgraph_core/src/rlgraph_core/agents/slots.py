"""Swappable component slots: build the component a config names (``preprocessor: ...``).

An algorithm with a slot (DQN and the on-policy agents have ``preprocessor``) builds whatever
component the config's :class:`~rlgraph_core.config.common.ComponentSpec` names. Names resolve
through the resolver the assembly hands the agent (every registered component, third-party ones
included) or, without one, through the core's own slot components below.

A slot component class provides ``from_space(space, *, name, **settings)`` and an API method
``call(x)`` that maps a batch of the slot's input space to a batch of the same space.
"""

from __future__ import annotations

from typing import Callable

from rlgraph_core.components.actor_critic import RunningObsNormalizer
from rlgraph_core.components.preprocessors import BoxNormalizer
from rlgraph_core.config.common import ComponentSpec
from rlgraph_core.errors import ConfigError
from rlgraph_core.graph import Component
from rlgraph_core.spaces import Space

#: Slot components of rlgraph-core, by registry name (also registered as components).
BUILTIN_SLOT_COMPONENTS: dict[str, type] = {
    "box_normalize": BoxNormalizer,
    "running_mean_std": RunningObsNormalizer,
}

#: ``resolve(name, field) -> component class``; raises a ConfigError for an unknown name.
ComponentResolver = Callable[[str, str], type]


def builtin_resolver(name: str, field: str) -> type:
    """Resolve ``name`` among :data:`BUILTIN_SLOT_COMPONENTS` only."""
    if name not in BUILTIN_SLOT_COMPONENTS:
        raise ConfigError(
            f"'{field}' = '{name}' is not a component built into rlgraph-core (built in: "
            f"{', '.join(sorted(BUILTIN_SLOT_COMPONENTS))}); components from plugins are "
            f"resolved when the agent is built through rlgraph_core.assemble."
        )
    return BUILTIN_SLOT_COMPONENTS[name]


def make_slot_component(
    spec: ComponentSpec | None,
    space: Space,
    resolve: ComponentResolver | None,
    *,
    field: str,
    name: str,
    defaults: dict | None = None,
) -> Component | None:
    """Build the component ``spec`` names for input ``space`` (None for an empty slot).

    ``defaults`` are settings the algorithm supplies unless the spec sets them.
    """
    if spec is None:
        return None
    cls = (resolve or builtin_resolver)(spec.type, f"{field}.type")
    factory = getattr(cls, "from_space", None)
    if factory is None:
        raise ConfigError(
            f"'{field}.type' = '{spec.type}' names {cls.__module__}.{cls.__qualname__}, which "
            f"cannot fill a component slot: it has no from_space(space, *, name, **settings)."
        )
    settings = {**(defaults or {}), **spec.settings()}
    try:
        return factory(space, name=name, **settings)
    except TypeError as exc:
        raise ConfigError(
            f"'{field}' = {spec.model_dump()}: the settings do not fit {cls.__qualname__}.from_space ({exc})."
        ) from None
