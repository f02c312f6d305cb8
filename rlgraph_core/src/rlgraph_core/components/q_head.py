"""Q-value heads: a linear head, or the dueling head of Wang et al. (2016)."""

from __future__ import annotations

import numpy as np

from rlgraph_core.components.network import DenseLayer, NetworkMaker, NetworkSpec, as_network_maker
from rlgraph_core.graph import Component, api


class QValueHead(Component):
    """Maps features ``[B, F]`` to Q-values ``[B, num_actions]``.

    With ``dueling=True``: ``Q = V + A - mean(A)`` from separate value and advantage layers.
    """

    def __init__(
        self,
        num_actions: int,
        dueling: bool = False,
        initializer: str = "lecun_uniform",
        rng: np.random.Generator | None = None,
        name: str = "q_head",
    ):
        super().__init__(name)
        rng = np.random.default_rng(rng)
        self.dueling = dueling
        self.num_actions = num_actions
        if dueling:
            self.value = DenseLayer(1, "linear", initializer, rng, name="value")
            self.advantage = DenseLayer(num_actions, "linear", initializer, rng, name="advantage")
            self.add_components(self.value, self.advantage)
        else:
            self.q = DenseLayer(num_actions, "linear", initializer, rng, name="q")
            self.add_components(self.q)

    @api
    def call(self, features):
        """Q-values for each action."""
        if not self.dueling:
            return self.q.call(features)
        adv = self.advantage.call(features)
        return self.value.call(features) + adv - self.ops.reduce_mean(adv, axis=-1, keepdims=True)


class QNetwork(Component):
    """Preprocessor (optional) → network trunk → Q-value head: the whole DQN policy.

    ``spec`` is the built-in MLP's settings or a :class:`NetworkMaker` for any network component.
    """

    def __init__(
        self,
        spec: NetworkSpec | NetworkMaker,
        num_actions: int,
        dueling: bool = False,
        preprocessor: Component | None = None,
        seed: int = 0,
        name: str = "q_network",
    ):
        super().__init__(name)
        rng = np.random.default_rng(seed)
        self.preprocessor = preprocessor
        maker = as_network_maker(spec)
        self.trunk = maker(name="trunk", rng=rng)
        self.head = QValueHead(num_actions, dueling, maker.initializer, rng, name="head")
        self.add_components(*([preprocessor] if preprocessor else []), self.trunk, self.head)

    @api
    def call(self, obs):
        """Q-values ``[B, num_actions]`` for observations ``[B, obs_dim]``."""
        if self.preprocessor is not None:
            obs = self.preprocessor.call(obs)
        return self.head.call(self.trunk.call(obs))
