"""A network for rlgraph's network slots: an MLP whose every hidden layer is layer-normalised.

``h = activation(LayerNorm(x W + b))`` per hidden layer, with
``LayerNorm(z) = (z - mean(z)) / sqrt(var(z) + eps) * gain + offset`` over the features (Ba et al.
2016; learned ``gain`` starts at 1, ``offset`` at 0). Normalised layers keep the scale of the
features steady while the value targets move, a common help for value-based and actor-critic
agents. Backend-neutral: written against ``self.ops`` only.
"""

from __future__ import annotations

import numpy as np

from rlgraph_core.components.network import DenseLayer
from rlgraph_core.graph import Component, api
from rlgraph_core.spaces import FloatBox, SpaceError
from rlgraph_example_components.settings import LayerNormMLPSettings

__all__ = ["LayerNorm", "LayerNormMLP"]


class LayerNorm(Component):
    """``(z - mean(z)) / sqrt(var(z) + eps) * gain + offset`` over the last axis of ``z`` ``[B, n]``.

    Args:
        eps: added to the (population) variance.
        name: component name.
    """

    def __init__(self, eps: float = 1e-5, name: str = "layer_norm"):
        super().__init__(name)
        self.eps = float(eps)

    def check_input_spaces(self, method, spaces):
        """Takes a batch of rank-1 float features."""
        x = spaces["x"]
        if not isinstance(x, FloatBox) or len(x.shape) != 1:
            raise SpaceError(f"expected a float box of rank 1 (features), got {x!r}.")

    def create_variables(self, input_spaces):
        """A gain of ones and an offset of zeros, one per feature."""
        n = int(input_spaces["x"].shape[0])
        self.gain = self.make_variable("gain", np.ones(n, np.float32))
        self.offset = self.make_variable("offset", np.zeros(n, np.float32))

    @api
    def call(self, x):
        """Normalised ``x``."""
        ops = self.ops
        mean = ops.reduce_mean(x, axis=-1, keepdims=True)
        var = ops.reduce_mean(ops.square(x - mean), axis=-1, keepdims=True)
        return (x - mean) / ops.sqrt(var + self.eps) * self.gain + self.offset


class LayerNormMLP(Component):
    """Hidden layers ``activation(LayerNorm(x W_i + b_i))``, sizes ``settings.hidden``.

    Registered as ``layer_norm_mlp`` with :class:`LayerNormMLPSettings`; rlgraph builds it through
    :meth:`from_settings` with the generator the algorithm draws its initial weights from.

    Args:
        settings: hidden sizes, activation, layer-norm eps and the weight initializer.
        rng: numpy generator for the initial weights.
        name: component name.
    """

    def __init__(self, settings: LayerNormMLPSettings, rng: np.random.Generator | None = None, name: str = "ln_mlp"):
        super().__init__(name)
        rng = np.random.default_rng(rng)
        self.activation = settings.activation
        self.dense = [
            DenseLayer(h, "linear", settings.initializer, rng, name=f"dense_{i}") for i, h in enumerate(settings.hidden)
        ]
        self.norms = [LayerNorm(settings.eps, name=f"norm_{i}") for i in range(len(settings.hidden))]
        self.add_components(*self.dense, *self.norms)

    @classmethod
    def from_settings(
        cls, settings: LayerNormMLPSettings, *, name: str = "ln_mlp", rng: np.random.Generator | None = None
    ) -> "LayerNormMLP":
        """The network-slot constructor: rlgraph calls it with the validated settings."""
        return cls(settings, rng, name=name)

    @api
    def call(self, x):
        """Features ``[B, hidden[-1]]`` of a batch ``x`` ``[B, n]``."""
        for dense, norm in zip(self.dense, self.norms):
            x = norm.call(dense.call(x))
            if self.activation != "linear":
                x = self.ops.activation(self.activation, x)
        return x
