"""An observation preprocessor for the ``preprocessor`` slot of DQN, PPO and A2C: clip to a box.

Backend-neutral: its one graph function is written against ``self.ops``, so it runs on every
rlgraph backend, eager or static, without importing a framework.
"""

from __future__ import annotations

from rlgraph_core.graph import Component, api
from rlgraph_core.spaces import FloatBox, SpaceError

__all__ = ["ClipObservation"]


class ClipObservation(Component):
    """``clip(x, -bound, bound)`` elementwise: keeps rare extreme observations from dominating.

    Args:
        shape: observation shape.
        bound: positive clip bound.
        name: component name.
    """

    def __init__(self, shape: tuple[int, ...], bound: float = 5.0, name: str = "clip_obs"):
        super().__init__(name)
        if not bound > 0:
            raise ValueError(f"bound must be positive, got {bound!r}.")
        self.shape = tuple(int(s) for s in shape)
        self.bound = float(bound)

    @classmethod
    def from_space(cls, space: FloatBox, *, name: str = "clip_obs", bound: float = 5.0) -> "ClipObservation":
        """The component-slot constructor: rlgraph calls it with the slot's input space."""
        return cls(space.shape, bound=bound, name=name)

    def check_input_spaces(self, method, spaces):
        """Takes float observations of the configured shape."""
        x = spaces["x"]
        if not isinstance(x, FloatBox) or tuple(x.shape) != self.shape:
            raise SpaceError(f"expected FloatBox(shape={self.shape}), got {x!r}.")

    @api
    def call(self, x):
        """Clipped ``x``."""
        return self.ops.clip(x, -self.bound, self.bound)
