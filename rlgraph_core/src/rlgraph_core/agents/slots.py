"""Swappable component slots: build the component a config names (network, exploration, preprocessor).

An algorithm with a slot builds whatever component the slot's settings (see
:mod:`rlgraph_core.components.settings`) name. Names resolve through the resolver the assembly
hands the agent (every registered component, third-party ones included) or, without one,
through the core's own slot components below. The slot contracts (see docs/plugins.md):

* **network** (``network``, SAC's ``actor_network`` / ``critic_network``):
  ``cls.from_settings(settings, *, name, rng)`` → a component whose API method ``call(x)`` maps
  rank-1 float features ``[B, n]`` to ``[B, m]``; the algorithm adds its heads on top.
* **exploration** (DQN's ``exploration``): ``cls.from_settings(settings, *, name, num_actions)`` →
  an :class:`~rlgraph_core.components.exploration.Exploration`.
* **preprocessor**: ``cls.from_space(space, *, name, **settings)`` → a component whose API method
  ``call(x)`` maps a batch of the slot's input space to a batch of the same space.
"""

from __future__ import annotations

from typing import Callable

from rlgraph_core.components.actor_critic import RunningObsNormalizer
from rlgraph_core.components.cnn import CNN
from rlgraph_core.components.dict_encoder import DictEncoder
from rlgraph_core.components.exploration import EpsilonGreedy, Exploration
from rlgraph_core.components.network import MLP, NetworkMaker
from rlgraph_core.components.preprocessors import BoxNormalizer
from rlgraph_core.components.settings import ComponentSettings, from_slot_settings
from rlgraph_core.errors import ConfigError
from rlgraph_core.graph import Component
from rlgraph_core.spaces import Space

#: Slot components of rlgraph-core, by registry name (also registered as components).
BUILTIN_SLOT_COMPONENTS: dict[str, type] = {
    "box_normalize": BoxNormalizer,
    "running_mean_std": RunningObsNormalizer,
    "mlp": MLP,
    "cnn": CNN,
    "dict_encoder": DictEncoder,
    "epsilon_greedy": EpsilonGreedy,
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
    spec: ComponentSettings | None,
    space: Space,
    resolve: ComponentResolver | None,
    *,
    field: str,
    name: str,
    defaults: dict | None = None,
) -> Component | None:
    """Build the preprocessor-style component ``spec`` names for input ``space`` (None for an empty slot).

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


def network_maker(settings: ComponentSettings, resolve: ComponentResolver | None, *, field: str) -> NetworkMaker:
    """The :class:`NetworkMaker` of a network slot's ``settings`` (the component its type names)."""
    cls = (resolve or builtin_resolver)(settings.type, f"{field}.type")
    return NetworkMaker(cls, settings, field)


def make_exploration(
    settings: ComponentSettings, resolve: ComponentResolver | None, *, field: str, num_actions: int
) -> Exploration:
    """The exploration component an exploration slot's ``settings`` name, for ``num_actions`` actions."""
    cls = (resolve or builtin_resolver)(settings.type, f"{field}.type")
    return from_slot_settings(
        cls,
        settings,
        field=field,
        slot="an exploration slot",
        signature="settings, *, name, num_actions",
        fits=lambda built: isinstance(built, Exploration),
        wanted="an rlgraph_core.components.exploration.Exploration (explore(q_values, noise, value), draw_noise, "
        "noise_shape, value)",
        name=settings.type,
        num_actions=num_actions,
    )
