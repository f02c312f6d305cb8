"""State-action value networks for continuous actions, and the twin pair used by SAC and TD3.

A continuous-action critic cannot output one value per action as DQN's head does; it takes the
action as an input instead: ``Q(s, a) = head(trunk(concat[s, a]))``. Observations that are not
float vectors (uint8 images, Dicts) first go through an *encoder* (any network-slot component
mapping the observation space to rank-1 features, e.g. ``cnn`` or ``dict_encoder``), and the
action is concatenated to its features: ``Q(s, a) = head(trunk(concat[encoder(s), a]))``, as in
Stable-Baselines3's ``ContinuousCritic`` (one encoder shared by the twin pair's two heads). SAC and TD3 keep two such
networks with independent initial weights and use the smaller of their two estimates in the
bootstrap target (clipped double-Q, Fujimoto et al. 2018), which counters the overestimation a
single learned critic suffers from.
"""

from __future__ import annotations

import numpy as np

from rlgraph_core.components.network import DenseLayer, NetworkMaker, NetworkSpec, as_network_maker
from rlgraph_core.graph import Component, api
from rlgraph_core.spaces import FloatBox, SpaceError


def _check_rank1_float(name: str, space) -> None:
    """Raise SpaceError unless ``space`` is a float box of rank 1 (a batch of vectors)."""
    if not isinstance(space, FloatBox) or len(space.shape) != 1:
        raise SpaceError(f"expected '{name}' to be a float box of rank 1, e.g. FloatBox(shape=(n,)), got {space!r}.")


class ContinuousQNetwork(Component):
    """``Q(s, a)``: a network trunk on the concatenated ``[obs, action]`` and a linear output.

    Args:
        spec: the trunk: the built-in MLP's settings or a :class:`NetworkMaker`.
        rng: numpy generator for the initial weights (draws happen at build time, in layer order).
        name: component name.
    """

    def __init__(self, spec: NetworkSpec | NetworkMaker, rng: np.random.Generator | None = None, name: str = "q"):
        super().__init__(name)
        rng = np.random.default_rng(rng)
        maker = as_network_maker(spec)
        self.trunk = maker(name="trunk", rng=rng)
        self.out = DenseLayer(1, "linear", maker.initializer, rng, name="out")
        self.add_components(self.trunk, self.out)

    def check_input_spaces(self, method, spaces):
        _check_rank1_float("obs", spaces["obs"])
        _check_rank1_float("actions", spaces["actions"])

    @api
    def call(self, obs, actions):
        """Q-values ``[B]`` for observations ``[B, obs_dim]`` and actions ``[B, action_dim]``."""
        x = self.ops.concat([obs, actions], axis=-1)
        return self.ops.squeeze(self.out.call(self.trunk.call(x)), -1)


class TwinQNetwork(Component):
    """Two independent :class:`ContinuousQNetwork` s, ``q1`` and ``q2``, on the same input.

    Both draw their initial weights from one generator seeded with ``seed``, one after the other,
    so they start different from each other; two TwinQNetworks made with the same seed and spec
    start identical (an online critic and its target copy).

    Args:
        spec: each Q-network's trunk: the built-in MLP's settings or a :class:`NetworkMaker`.
        seed: seed of the weight initialisation.
        name: component name.
        encoder: optional network maker of an observation encoder shared by ``q1`` and ``q2``
            (needed for observations that are not float vectors); the action is concatenated to
            its features.
    """

    def __init__(
        self,
        spec: NetworkSpec | NetworkMaker,
        seed: int = 0,
        name: str = "twin_q",
        encoder: NetworkMaker | None = None,
    ):
        super().__init__(name)
        rng = np.random.default_rng(seed)
        # The encoder draws its weights first, then q1 and q2 (without one: as always).
        self.encoder = encoder(name="encoder", rng=rng) if encoder is not None else None
        self.q1 = ContinuousQNetwork(spec, rng, name="q1")
        self.q2 = ContinuousQNetwork(spec, rng, name="q2")
        self.add_components(*([self.encoder] if self.encoder is not None else []), self.q1, self.q2)

    @api
    def call(self, obs, actions):
        """``(Q1(s, a), Q2(s, a))``, each ``[B]``; ``obs`` goes through the encoder first when there is one."""
        features = self.encoder.call(obs) if self.encoder is not None else obs
        return self.q1.call(features, actions), self.q2.call(features, actions)
