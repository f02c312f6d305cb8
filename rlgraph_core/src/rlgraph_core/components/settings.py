"""Settings of swappable components, and the :class:`Slot` marker of a config field that holds them.

An algorithm has *slots* for the components a user would swap: DQN's ``network``,
``exploration`` and ``preprocessor``, PPO's ``network``, SAC's ``actor_network`` and
``critic_network``. A slot field of an agent config holds the settings of the component its
``type`` names::

    network: {type: mlp, hidden: [64, 64]}            # the built-in MLP
    network: {type: layer_norm_mlp, hidden: [64]}     # a component from a plugin
    exploration: {type: boltzmann, temperature: 0.5}

A component that fills a slot with settings is registered with its settings model, a subclass of
the slot's settings base (:class:`NetworkSettings`, :class:`ExplorationSettings`), which
validates its section of the config (unknown fields and bad values fail before anything runs).
A component registered without a model (a preprocessor such as ``box_normalize``) gets its
settings unvalidated, as a :class:`ComponentSpec`.

This module needs only pydantic: validating a config never imports a framework.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Optional

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler, field_validator, model_validator
from pydantic_core import core_schema

from rlgraph_core.components.initializers import INITIALIZERS
from rlgraph_core.errors import ConfigError
from rlgraph_core.registration import entry_problem

__all__ = [
    "ComponentSettings",
    "ComponentSpec",
    "ExplorationSettings",
    "NetworkSettings",
    "Slot",
    "component_entry",
    "component_entry_problem",
    "from_slot_settings",
    "slot_fields",
]


class ComponentSettings(BaseModel):
    """Base of every swappable component's settings: the registry ``type`` and its own fields.

    Subclasses add the component's settings as fields; unknown fields are errors and NaN or
    infinity are refused.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    type: str = Field(description="registry name of the component")

    def settings(self) -> dict[str, Any]:
        """The settings beyond ``type`` as keyword arguments (nested models stay models)."""
        out = {name: getattr(self, name) for name in type(self).model_fields if name != "type"}
        out.update(self.model_extra or {})
        return out


class ComponentSpec(ComponentSettings):
    """A component chosen by registry name whose settings no registered model checks (yet).

    ``{type: name, <its settings>...}``; the settings are passed to the component's
    ``from_space`` constructor, which checks them. A config section naming a component that
    registered a settings model is validated against that model instead (by
    ``rlgraph_core.config.slots``), so this form is what remains for components without one.
    """

    model_config = ConfigDict(extra="allow", validate_assignment=True, allow_inf_nan=False)

    @model_validator(mode="after")
    def _finite_settings(self) -> "ComponentSpec":
        """Settings are untyped here (the component checks them), but NaN and infinity never fit."""
        for key, value in (self.model_extra or {}).items():
            if _has_non_finite(value):
                raise ValueError(f"setting {key!r} = {value!r} of component '{self.type}' must be finite (no NaN/inf)")
        return self


def _has_non_finite(value: Any) -> bool:
    """Whether a (nested) setting holds a NaN or infinite float."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_non_finite(v) for v in value)
    return False


class NetworkSettings(ComponentSettings):
    """Base of the settings of a network (the trunk an algorithm puts its heads on).

    ``initializer`` is also the initializer of the algorithm's output layers on top of the
    network (Q-values, policy and value heads), so that every network settings model has one.
    """

    #: True for a network whose output depends on a state carried from step to step (``lstm``,
    #: ``gru``): only algorithms whose config sets ``recurrent_networks`` may use it.
    stateful: ClassVar[bool] = False

    initializer: str = Field("lecun_uniform", description=f"one of {', '.join(sorted(INITIALIZERS))}")

    @field_validator("initializer")
    @classmethod
    def _initializer(cls, v: str) -> str:
        if v not in INITIALIZERS:
            raise ValueError(f"unknown initializer '{v}'; use one of {', '.join(sorted(INITIALIZERS))}")
        return v


class ExplorationSettings(ComponentSettings):
    """Base of the settings of an exploration component (how a value-based agent picks actions)."""


@dataclass(frozen=True)
class Slot:
    """Marks an agent-config field as a component slot (``Annotated[..., Slot(...)]``).

    Args:
        role: what the slot holds, in messages (``network``, ``exploration``, ``preprocessor``).
        base: the settings base a component must register to fill the slot (None: any component,
            with or without a settings model).
        default: the settings model of the slot's default component: a section without ``type``
            (or with the default's type) is validated with it, so an algorithm keeps its own
            defaults (PPO's tanh trunks, SAC's 256-unit ones).
        shorthand: turns an older or shorter form into a settings mapping (DQN: a float or a
            schedule is epsilon-greedy's epsilon); it returns its input when it does not apply.

    A plain string is shorthand for ``{type: name}``; ``none`` (or null) empties a slot whose
    field allows None.
    """

    role: str
    base: Optional[type[ComponentSettings]] = None
    default: Optional[type[ComponentSettings]] = None
    shorthand: Optional[Callable[[Any], Any]] = None

    @property
    def default_type(self) -> Optional[str]:
        """The registry name of the default component (None for a slot without one)."""
        if self.default is None:
            return None
        return self.default.model_fields["type"].default

    def raw(self, value: Any) -> Any:
        """``value`` with the shorthands expanded: None, a settings model, or a mapping with a ``type``."""
        if self.shorthand is not None:
            value = self.shorthand(value)
        if value is None or value == "none":
            return None
        if isinstance(value, str):
            return {"type": value}
        if isinstance(value, dict) and "type" not in value and self.default_type is not None:
            return {**value, "type": self.default_type}
        return value

    def coerce(self, value: Any) -> Any:
        """Model-free validation: the default's model for the default type, else a :class:`ComponentSpec`.

        Settings of other types are checked against their registered model when the config is
        validated with a plugin manager (``rlgraph_core.config.slots``).
        """
        value = self.raw(value)
        if not isinstance(value, dict):
            return value
        if self.default is not None and value.get("type") == self.default_type:
            return self.default.model_validate(value)
        return ComponentSpec.model_validate(value)

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_before_validator_function(self.coerce, handler(source))


def slot_fields(model: type[BaseModel]) -> dict[str, Slot]:
    """The component-slot fields of a config model: ``{field name: Slot}``."""
    out = {}
    for name, info in model.model_fields.items():
        slot = next((m for m in info.metadata if isinstance(m, Slot)), None)
        if slot is not None:
            out[name] = slot
    return out


def component_entry(obj: Any) -> tuple[Any, Optional[type[ComponentSettings]]]:
    """``(component class or LazyObject, settings model or None)`` of one ``rlgraph_components`` entry."""
    if isinstance(obj, tuple):
        return obj[0], obj[1]
    return obj, None


def component_entry_problem(obj: Any) -> Optional[str]:
    """Why an ``rlgraph_components`` entry does not fit the registration format (None: it fits)."""
    return entry_problem(obj, kind="component", base=ComponentSettings)


def from_slot_settings(
    cls: Any,
    settings: ComponentSettings,
    *,
    field: str,
    slot: str,
    signature: str,
    fits: Callable[[Any], bool],
    wanted: str,
    **kwargs: Any,
) -> Any:
    """``cls.from_settings(settings, **kwargs)``: the component a slot's settings name.

    Args:
        cls: the class the settings' ``type`` names.
        settings: the slot's validated settings.
        field: the slot's config path (``agent.network``), for messages.
        slot: the kind of slot with its article (``"a network slot"``), for messages.
        signature: ``from_settings``' parameters as the slot calls it, for messages.
        fits: whether what ``from_settings`` built can fill the slot.
        wanted: what it must be instead, for the message when it cannot.
        kwargs: the keyword arguments ``from_settings`` gets besides the settings.

    Raises:
        ConfigError: ``cls`` has no ``from_settings``, the call raised a ``TypeError``, or what
            it built does not fit; one paragraph naming the field, its type and the class.
    """
    factory = getattr(cls, "from_settings", None)
    what = f"'{field}.type' = '{settings.type}' ({getattr(cls, '__qualname__', cls)!s})"
    if factory is None:
        kind = slot.split(" ", 1)[1]
        raise ConfigError(
            f"{what} cannot fill {slot}: it has no from_settings({signature}) constructor (see docs/plugins.md, "
            f"{kind}s)."
        )
    try:
        built = factory(settings, **kwargs)
    except TypeError as exc:
        raise ConfigError(f"{what}: from_settings({signature}) failed: {exc}") from None
    if not fits(built):
        raise ConfigError(f"{what}: from_settings built {type(built).__name__}, which is not {wanted}.")
    return built
