"""Epsilon-greedy exploration."""

from __future__ import annotations

from rlgraph_core.graph import Component, api


class EpsilonGreedy(Component):
    """Choose a uniformly random action with probability epsilon, else the greedy one.

    The random draws come in as inputs (made by the agent's seeded numpy generator), so the same
    seed explores identically on every backend.
    """

    def __init__(self, name: str = "epsilon_greedy"):
        super().__init__(name)

    @api
    def explore(self, greedy_actions, random_actions, draws, epsilon):
        """``random_actions`` where ``draws < epsilon`` else ``greedy_actions``."""
        return self.ops.where(draws < epsilon, random_actions, greedy_actions)
