"""Dense layers and MLP networks built from a backend-neutral spec."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from rlgraph_core.components.initializers import INITIALIZERS, initialize
from rlgraph_core.graph import Component, api
from rlgraph_core.spaces import FloatBox, SpaceError

ACTIVATIONS = ("relu", "tanh", "sigmoid", "elu", "softplus", "leaky_relu", "linear")


class NetworkSpec(BaseModel):
    """A multilayer perceptron: hidden sizes, activation, and initializers."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    hidden: list[int] = Field(default_factory=lambda: [64, 64], description="hidden layer sizes")
    activation: str = Field("relu", description=f"one of {', '.join(ACTIVATIONS)}")
    initializer: str = Field("lecun_uniform", description=f"one of {', '.join(sorted(INITIALIZERS))}")

    @field_validator("hidden")
    @classmethod
    def _positive(cls, v):
        if any(h <= 0 for h in v):
            raise ValueError(f"hidden sizes must be positive integers, got {v}")
        return v

    @field_validator("activation")
    @classmethod
    def _activation(cls, v):
        if v not in ACTIVATIONS:
            raise ValueError(f"unknown activation '{v}'; use one of {', '.join(ACTIVATIONS)}")
        return v

    @field_validator("initializer")
    @classmethod
    def _initializer(cls, v):
        if v not in INITIALIZERS:
            raise ValueError(f"unknown initializer '{v}'; use one of {', '.join(sorted(INITIALIZERS))}")
        return v


class DenseLayer(Component):
    """``activation(x @ W + b)`` with ``W`` of shape ``[in, units]``.

    Args:
        units: output size.
        activation: activation name (see :data:`ACTIVATIONS`).
        initializer: weight initializer name; biases start at zero.
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
        super().__init__(name)
        self.units = units
        self.activation = activation
        self.initializer = initializer
        self.gain = gain
        self.rng = rng if rng is not None else np.random.default_rng()
        self.w = self.b = None

    def check_input_spaces(self, method, spaces):
        x = spaces["x"]
        if not isinstance(x, FloatBox) or len(x.shape) != 1:
            raise SpaceError(f"expected a float box of rank 1 (features), e.g. FloatBox(shape=(n,)), got {x!r}.")
        if self.w is not None and x.shape[0] != self.w_in:
            raise SpaceError(f"expected FloatBox(shape=({self.w_in},)) as built, got {x!r}.")

    def create_variables(self, input_spaces):
        self.w_in = int(input_spaces["x"].shape[0])
        self.w = self.make_variable("W", initialize(self.initializer, self.rng, self.w_in, self.units, self.gain))
        self.b = self.make_variable("b", np.zeros(self.units, np.float32))

    @api
    def call(self, x):
        """Apply the layer to a batch ``x`` of shape ``[B, in]``."""
        y = self.ops.dense(x, self.w, self.b)
        return y if self.activation == "linear" else self.ops.activation(self.activation, y)


class MLP(Component):
    """A stack of :class:`DenseLayer` s described by a :class:`NetworkSpec`."""

    def __init__(self, spec: NetworkSpec, rng: np.random.Generator | None = None, name: str = "mlp"):
        super().__init__(name)
        rng = rng if rng is not None else np.random.default_rng()
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
