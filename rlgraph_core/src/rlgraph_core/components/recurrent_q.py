"""A recurrent Q-network: an LSTM/GRU core under DQN's Q-value head (the network of R2D2).

The math, for a sequence of observations ``s`` ``[T, B, obs_dim]`` (time major), the state at its
start and the episode-start mask ``reset`` ``[T, B]``::

    y, state = core(s, state, reset)      # encoder MLP, then the LSTM/GRU cell (components/recurrent.py)
    y        = mlp(y)                     # optional (settings.head)
    Q(s_t)   = head(y[t])                 # linear, or dueling V + A - mean(A)

The state is the core's (``{h, c}`` for an LSTM, ``{h}`` for a GRU, each ``[B, units]``); Q-values
are flattened to ``[T * B, num_actions]`` in time-major order.
"""

from __future__ import annotations

import numpy as np

from rlgraph_core.components.network import MLP
from rlgraph_core.components.q_head import QValueHead
from rlgraph_core.components.recurrent import RecurrentCore, RecurrentSettings
from rlgraph_core.graph import Component, api
from rlgraph_core.spaces import Dict


class RecurrentQNetwork(Component):
    """Q-values over sequences with explicit state (module docstring).

    Args:
        settings: the core's settings (``lstm`` / ``gru``, units, encoder, head).
        num_actions: outputs of the Q head.
        dueling: the dueling head of Wang et al. (2016) instead of a linear one.
        seed: seeds the initial weights (drawn in numpy, equal on every backend).
        name: component name.
    """

    def __init__(
        self, settings: RecurrentSettings, num_actions: int, dueling: bool = False, seed: int = 0, name: str = "q"
    ):
        super().__init__(name)
        rng = np.random.default_rng(seed)
        self.units = settings.units
        self.core = RecurrentCore(settings, rng, name="core")
        self.mlp = MLP(settings.head, rng, name="mlp") if settings.head.hidden else None
        self.head = QValueHead(num_actions, dueling, settings.initializer, rng, name="head")
        self.add_components(self.core, *([self.mlp] if self.mlp is not None else []), self.head)

    @property
    def state_space(self) -> Dict:
        """The state per env between steps (the core's)."""
        return self.core.state_space

    def initial_state(self, batch: int) -> dict[str, np.ndarray]:
        """Zeros of :attr:`state_space` for ``batch`` envs (the state at an episode start)."""
        return self.core.initial_state(batch)

    @api
    def call(self, obs, state, reset):
        """``(Q-values [T * B, num_actions], state after the sequence)``."""
        y, out = self.core.call(obs, state, reset)
        y = self.ops.reshape(y, [-1, self.units])
        if self.mlp is not None:
            y = self.mlp.call(y)
        return self.head.call(y), out
