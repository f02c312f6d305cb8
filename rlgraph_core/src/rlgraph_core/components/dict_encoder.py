"""The network-slot component ``dict_encoder``: a Dict observation -> one rank-1 feature vector.

Each key of the observation is routed by its space: images (boxes of rank 2 or 3) to a ``cnn``,
vectors (boxes of rank 0 or 1, cast to float) to an ``mlp``, a ``Discrete`` to its one-hot
encoding. The features are concatenated in key order (a Dict's keys are sorted) and, optionally,
passed through dense layers. Every image key gets its own CNN and every vector key its own MLP,
each with the settings of ``image`` / ``vector``::

    network: {type: dict_encoder, image: {preset: impala}, vector: {hidden: [64]}, hidden: [256]}

The sub-networks are made when the observation space is known (at build time), named after their
keys (``image_<key>``, ``vector_<key>``), so weights and checkpoints keep the same names on every
backend.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from rlgraph_core.components.cnn import CNN, CNNSettings
from rlgraph_core.components.network import ACTIVATIONS, MLP, DenseLayer, DenseLayersChecks, NetworkSpec, SlotNetwork
from rlgraph_core.components.settings import NetworkSettings
from rlgraph_core.graph import Component, api
from rlgraph_core.spaces import BoolBox, Dict, Discrete, FloatBox, IntBox, Space, SpaceError

__all__ = ["DictEncoder", "DictEncoderSettings", "route"]


class DictEncoderSettings(NetworkSettings, DenseLayersChecks):
    """Settings of ``dict_encoder``: the encoder of image keys, of vector keys, and the layers after."""

    type: Literal["dict_encoder"] = "dict_encoder"
    image: CNNSettings = Field(default_factory=CNNSettings, description="the cnn of every image key")
    vector: NetworkSpec = Field(
        default_factory=lambda: NetworkSpec(hidden=[64]), description="the mlp of every vector key"
    )
    hidden: list[int] = Field(default_factory=list, description="dense layers after the concatenation")
    activation: str = Field("relu", description=f"activation of those layers: one of {', '.join(ACTIVATIONS)}")


def route(space: Space) -> str | None:
    """How ``dict_encoder`` encodes a key of ``space``: ``image``, ``vector``, ``discrete`` or None
    (no encoder: a nested container, a text space ...)."""
    if isinstance(space, Discrete):
        return "discrete"
    if isinstance(space, (FloatBox, IntBox, BoolBox)):
        if len(space.shape) in (2, 3) and not isinstance(space, BoolBox):
            return "image"
        if len(space.shape) <= 1:
            return "vector"
    return None


class DictEncoder(SlotNetwork):
    """Encodes a Dict observation key by key and concatenates the features (see the module docstring).

    Args:
        settings: validated :class:`DictEncoderSettings`.
        rng: numpy generator of the initial weights (drawn key by key, in key order).
        name: component name.
    """

    def __init__(
        self, settings: DictEncoderSettings, rng: np.random.Generator | None = None, name: str = "dict_encoder"
    ):
        super().__init__(name)
        self.settings = settings
        self.rng = np.random.default_rng(rng)
        #: (key, route, encoder component or None, one-hot depth and start) per key, in key order
        self.routes: list[tuple[str, str, Component | None, tuple[int, int]]] = []
        self.dense: list[DenseLayer] = []

    def check_input_spaces(self, method, spaces):
        x = spaces["x"]
        if not isinstance(x, Dict):
            raise SpaceError(
                f"the 'dict_encoder' network takes a Dict observation, got {x!r}; use 'mlp' for vectors "
                f"or 'cnn' for images."
            )
        bad = {k: v for k, v in x.items() if route(v) is None}
        if bad:
            key, space = next(iter(bad.items()))
            raise SpaceError(
                f"the 'dict_encoder' network encodes images (boxes of rank 2-3), vectors (boxes of rank 0-1) "
                f"and Discrete keys; key '{key}' is {space!r}. Drop that key with an observation wrapper "
                f"(e.g. gymnasium.wrappers.FilterObservation) or flatten it."
            )

    def _adopt(self, *children: Component) -> None:
        """Attach sub-components made during the build (they join the running build)."""
        self.add_components(*children)
        for child in children:
            for comp in child.walk():
                comp.backend, comp.ops, comp._tracer = self.backend, self.ops, self._tracer

    def create_variables(self, input_spaces):
        s = self.settings
        for key, space in input_spaces["x"].items():
            kind = route(space)
            encoder: Component | None = None
            depth = (0, 0)
            if kind == "image":
                encoder = CNN(s.image, self.rng, name=f"image_{key}")
            elif kind == "vector" and s.vector.hidden:
                encoder = MLP(s.vector, self.rng, name=f"vector_{key}")
            elif kind == "discrete":
                depth = (int(space.n), int(space.start))
            if encoder is not None:
                self._adopt(encoder)
            self.routes.append((key, kind, encoder, depth))
        self.dense = [
            DenseLayer(h, s.activation, s.initializer, self.rng, name=f"dense_{i}") for i, h in enumerate(s.hidden)
        ]
        if self.dense:
            self._adopt(*self.dense)

    @api
    def call(self, x):
        """Features ``[B, n]`` of a Dict observation ``x`` (a dict of batched tensors)."""
        ops = self.ops
        features = []
        for key, kind, encoder, (n, start) in self.routes:
            value = x[key]
            if kind == "discrete":
                # Clipped where the space starts above 0: the build's zero batch lies below ``start``.
                features.append(ops.one_hot(ops.clip(value - start, 0, n - 1) if start else value, n))
                continue
            if kind == "vector":
                value = ops.cast(value, "float32")
                if len(value.shape) == 1:
                    value = ops.expand_dims(value, -1)
            features.append(value if encoder is None else encoder.call(value))
        out = features[0] if len(features) == 1 else ops.concat(features, axis=-1)
        for layer in self.dense:
            out = layer.call(out)
        return out
