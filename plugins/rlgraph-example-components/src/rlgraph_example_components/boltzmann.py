"""An exploration for DQN's ``exploration`` slot: Boltzmann (softmax) exploration.

Actions are sampled from ``softmax(Q(s, .) / T)``: better actions are tried more often than worse
ones, instead of epsilon-greedy's uniform random actions. Sampling is Gumbel-max,
``argmax(Q / T - log(-log u))`` with ``u ~ U(0, 1)`` drawn by the agent's seeded numpy generator,
so the same seed explores identically on every backend.
"""

from __future__ import annotations

import numpy as np

from rlgraph_core.components.exploration import Exploration
from rlgraph_core.graph import api
from rlgraph_example_components.settings import BoltzmannSettings

__all__ = ["Boltzmann"]


class Boltzmann(Exploration):
    """Sample ``a ~ softmax(q_values / temperature)`` (Gumbel-max with uniform noise ``[B, n]``).

    Args:
        num_actions: the number of discrete actions.
        temperature: a float or a schedule (> 0); a high temperature explores almost uniformly,
            a low one acts almost greedily.
        name: component name.
    """

    parameter = "temperature"

    def __init__(self, num_actions: int, temperature=1.0, name: str = "boltzmann"):
        super().__init__(num_actions, temperature, name)

    @classmethod
    def from_settings(cls, settings: BoltzmannSettings, *, name: str = "boltzmann", num_actions: int) -> "Boltzmann":
        """The exploration-slot constructor: rlgraph calls it with the validated settings."""
        return cls(num_actions, settings.temperature, name=name)

    @property
    def noise_shape(self) -> tuple[int, ...]:
        """One uniform draw per action."""
        return (self.num_actions,)

    def draw_noise(self, rng: np.random.Generator, batch_size: int) -> np.ndarray:
        """Uniform noise in (0, 1) ``[B, n]`` (0 is replaced by the smallest float32, so log is finite)."""
        u = rng.random((batch_size, self.num_actions), dtype=np.float32)
        return np.maximum(u, np.finfo(np.float32).tiny)

    @api
    def explore(self, q_values, noise, value):
        """``argmax(q_values / temperature - log(-log(noise)))``."""
        ops = self.ops
        return ops.argmax(q_values / value - ops.log(-ops.log(noise)), axis=-1)
