"""Dense layers and MLP networks built from a backend-neutral spec.

:class:`MLP` is the built-in component of the network slots (registered as ``mlp`` with its
settings model :class:`NetworkSpec`); any component registered with a
:class:`~rlgraph_core.components.settings.NetworkSettings` model can take its place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Self

import numpy as np
from pydantic import BaseModel, Field, field_validator

from rlgraph_core.components.initializers import initial_bias, initialize
from rlgraph_core.components.settings import ComponentSettings, NetworkSettings, from_slot_settings
from rlgraph_core.errors import ConfigError
from rlgraph_core.graph import Component, api
from rlgraph_core.spaces import FloatBox, SpaceError

ACTIVATIONS = ("relu", "tanh", "sigmoid", "elu", "softplus", "leaky_relu", "linear")


def check_activation(name: str) -> str:
    """``name`` if it is one of :data:`ACTIVATIONS`, else a ValueError naming them (a settings
    model's ``activation`` validator: ``mlp``, ``dict_encoder``, ``cnn`` and plugins' networks)."""
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation '{name}'; use one of {', '.join(ACTIVATIONS)}")
    return name


class DenseLayersChecks(BaseModel):
    """The checks of a settings model with dense layers (``hidden`` sizes and an ``activation``):
    ``mlp``'s and ``dict_encoder``'s. It adds no field; a model lists it among its bases."""

    @field_validator("hidden", check_fields=False)
    @classmethod
    def _positive(cls, v):
        if any(h <= 0 for h in v):
            raise ValueError(f"hidden sizes must be positive integers, got {v}")
        return v

    @field_validator("activation", check_fields=False)
    @classmethod
    def _activation(cls, v):
        return check_activation(v)


class NetworkSpec(NetworkSettings, DenseLayersChecks):
    """Settings of the built-in network ``mlp``: hidden sizes, activation and initializer.

    ``{type: mlp, hidden: [64, 64], activation: relu, initializer: lecun_uniform}``; the network
    slots of the agents default to it (each algorithm with its own defaults, e.g. PPO's tanh).
    """

    type: Literal["mlp"] = "mlp"
    hidden: list[int] = Field(default_factory=lambda: [64, 64], description="hidden layer sizes")
    activation: str = Field("relu", description=f"one of {', '.join(ACTIVATIONS)}")


#: The settings model registered with ``mlp`` (another name for :class:`NetworkSpec`).
MLPSettings = NetworkSpec


class ActivatedLayer(Component):
    """Base of a layer ``activation(affine(x))`` whose weights ``W`` and ``b`` the ``initializer``
    draws from ``rng`` (a fresh generator when None) in ``create_variables``."""

    def __init__(self, activation: str, initializer: str, rng: np.random.Generator | None, name: str):
        super().__init__(name)
        self.activation = activation
        self.initializer = initializer
        self.rng = np.random.default_rng(rng)
        self.w = self.b = None

    def _activate(self, y):
        """``activation(y)`` (``linear``: ``y`` itself)."""
        return y if self.activation == "linear" else self.ops.activation(self.activation, y)


class DenseLayer(ActivatedLayer):
    """``activation(x @ W + b)`` with ``W`` of shape ``[in, units]``.

    Args:
        units: output size.
        activation: activation name (see :data:`ACTIVATIONS`).
        initializer: weight initializer name; biases start at zero (``torch_linear``: uniform,
            as PyTorch's ``nn.Linear``, see :func:`~rlgraph_core.components.initializers.initial_bias`).
        rng: numpy generator used for the initial weights.
        gain: optional gain for the orthogonal initializer.
    """

    def __init__(
        self,
        units: int,
        activation: str = "linear",
        initializer: str = "lecun_uniform",
        rng: np.random.Generator | None = None,
        gain: float | None = None,
        name: str = "dense",
    ):
        super().__init__(activation, initializer, rng, name)
        self.units = units
        self.gain = gain

    def check_input_spaces(self, method, spaces):
        x = spaces["x"]
        if not isinstance(x, FloatBox) or len(x.shape) != 1:
            raise SpaceError(f"expected a float box of rank 1 (features), e.g. FloatBox(shape=(n,)), got {x!r}.")
        if self.w is not None and x.shape[0] != self.w_in:
            raise SpaceError(f"expected FloatBox(shape=({self.w_in},)) as built, got {x!r}.")

    def create_variables(self, input_spaces):
        self.w_in = int(input_spaces["x"].shape[0])
        self.w = self.make_variable("W", initialize(self.initializer, self.rng, self.w_in, self.units, self.gain))
        self.b = self.make_variable("b", initial_bias(self.initializer, self.rng, self.w_in, self.units))

    @api
    def call(self, x):
        """Apply the layer to a batch ``x`` of shape ``[B, in]``."""
        return self._activate(self.ops.dense(x, self.w, self.b))


class SlotNetwork(Component):
    """Base of a network component constructed as ``cls(settings, rng=None, name=...)``: it gets the
    network-slot constructor ``from_settings(settings, *, name, rng)`` (docs/plugins.md) from here."""

    @classmethod
    def from_settings(cls, settings: Any, *, name: str | None = None, rng: np.random.Generator | None = None) -> Self:
        """The network-slot constructor: the component ``settings`` describe, drawing its initial
        weights from ``rng``, called ``name`` (None: the constructor's default name)."""
        return cls(settings, rng) if name is None else cls(settings, rng, name=name)


class MLP(SlotNetwork):
    """A stack of :class:`DenseLayer` s described by a :class:`NetworkSpec`."""

    def __init__(self, spec: NetworkSpec, rng: np.random.Generator | None = None, name: str = "mlp"):
        super().__init__(name)
        rng = np.random.default_rng(rng)
        self.layers = [
            DenseLayer(h, spec.activation, spec.initializer, rng, name=f"dense_{i}") for i, h in enumerate(spec.hidden)
        ]
        self.add_components(*self.layers)
        self.spec = spec

    @property
    def output_size(self) -> int | None:
        """Size of the last hidden layer (None for an empty spec: the input passes through)."""
        return self.spec.hidden[-1] if self.spec.hidden else None

    @api
    def call(self, x):
        """Apply every layer in order."""
        for layer in self.layers:
            x = layer.call(x)
        return x


@dataclass(frozen=True)
class NetworkMaker:
    """Makes the network a network slot names, as often as an algorithm needs one.

    ``maker(name=..., rng=...)`` calls ``network_class.from_settings(settings, name=name, rng=rng)``:
    a component with an API method ``call(x)`` mapping a batch of rank-1 float features
    ``[B, n]`` to features ``[B, m]`` (its input size is known at build time). Containers
    (Q-networks, actor-critics, SAC's actor and critics) put their output heads on it, initialised
    with :attr:`initializer`.

    Attributes:
        network_class: the registered network component class.
        settings: its validated settings.
        field: the config path of the slot (for messages), e.g. ``agent.network``.
    """

    network_class: Any
    settings: ComponentSettings
    field: str = "network"

    @property
    def initializer(self) -> str:
        """Initializer of the layers put on top of the network (the settings' ``initializer``)."""
        return str(getattr(self.settings, "initializer", "lecun_uniform"))

    def __call__(self, *, name: str, rng: np.random.Generator) -> Component:
        """A new network component named ``name`` whose initial weights come from ``rng``."""
        return from_slot_settings(
            self.network_class,
            self.settings,
            field=self.field,
            slot="a network slot",
            signature="settings, *, name, rng",
            fits=lambda built: isinstance(built, Component) and "call" in type(built).api_methods(),
            wanted="a Component with an API method call(x) (see docs/plugins.md, network slots)",
            name=name,
            rng=rng,
        )


def as_network_maker(network: "NetworkSpec | NetworkMaker") -> NetworkMaker:
    """``network`` as a :class:`NetworkMaker`: settings of the built-in ``mlp`` make an :class:`MLP`."""
    if isinstance(network, NetworkMaker):
        return network
    if isinstance(network, NetworkSpec):
        return NetworkMaker(MLP, network)
    raise ConfigError(
        f"A network of type '{getattr(network, 'type', network)}' must be resolved to its component first "
        f"(rlgraph_core.agents.slots.network_maker, with the resolver rlgraph_core.assemble passes agents); "
        f"only the built-in 'mlp' settings (NetworkSpec) can be used directly."
    )
