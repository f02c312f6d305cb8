"""Observation preprocessors."""

from __future__ import annotations

import numpy as np

from rlgraph_core.graph import Component, api
from rlgraph_core.spaces import FloatBox, SpaceError


class BoxNormalizer(Component):
    """Scale a bounded float box linearly to [-1, 1]: ``2 (x - low) / (high - low) - 1``.

    Unbounded dimensions pass through unchanged.
    """

    def __init__(self, low, high, name: str = "normalizer"):
        super().__init__(name)
        low = np.asarray(low, np.float32)
        high = np.asarray(high, np.float32)
        bounded = np.isfinite(low) & np.isfinite(high) & (high > low)
        self.scale = np.where(bounded, 2.0 / np.where(bounded, high - low, 1.0), 1.0).astype(np.float32)
        self.shift = np.where(bounded, -low * self.scale - 1.0, 0.0).astype(np.float32)

    @classmethod
    def from_space(cls, space: FloatBox, *, name: str = "normalizer") -> "BoxNormalizer":
        """The normaliser of a bounded float box (the component-slot constructor)."""
        return cls(space.low, space.high, name=name)

    def check_input_spaces(self, method, spaces):
        x = spaces["x"]
        if not isinstance(x, FloatBox) or x.shape != self.scale.shape:
            raise SpaceError(f"expected FloatBox(shape={self.scale.shape}), got {x!r}.")

    def create_variables(self, input_spaces):
        self.scale_v = self.make_variable("scale", self.scale, trainable=False)
        self.shift_v = self.make_variable("shift", self.shift, trainable=False)

    @api
    def call(self, x):
        """Normalised ``x``."""
        return x * self.scale_v + self.shift_v
