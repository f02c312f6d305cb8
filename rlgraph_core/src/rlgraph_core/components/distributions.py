"""Action distributions written against the neutral ops: categorical, diagonal Gaussian, and
tanh-squashed Gaussian (SAC), with action scaling to a bounded box.

Randomness enters as *noise inputs* made by the agent's seeded numpy generator (uniform draws
for Gumbel-max sampling, standard normals for the reparameterisation trick). That keeps every
graph function pure, compiles cleanly in static mode, and makes the same seed act identically
on every backend.
"""

from __future__ import annotations

import math

import numpy as np

from rlgraph_core.components.network import DenseLayer
from rlgraph_core.errors import ConfigError
from rlgraph_core.graph import Component, api
from rlgraph_core.spaces import Discrete, FloatBox

LOG_2PI = math.log(2.0 * math.pi)
LOG_2 = math.log(2.0)


class Categorical:
    """Categorical over ``n`` actions, parameterised by logits ``[B, n]``."""

    def __init__(self, ops):
        self.ops = ops

    def log_prob(self, logits, actions):
        """``log softmax(logits)[a]``."""
        return self.ops.gather_last(self.ops.log_softmax(logits, axis=-1), actions)

    def entropy(self, logits):
        """``-sum p log p``."""
        logp = self.ops.log_softmax(logits, axis=-1)
        return -self.ops.reduce_sum(self.ops.exp(logp) * logp, axis=-1)

    def sample(self, logits, uniform_noise):
        """Gumbel-max: ``argmax(logits - log(-log u))`` with ``u ~ U(0, 1)`` of shape ``[B, n]``."""
        gumbel = -self.ops.log(-self.ops.log(uniform_noise))
        return self.ops.argmax(logits + gumbel, axis=-1)

    def deterministic(self, logits):
        """The mode: ``argmax logits``."""
        return self.ops.argmax(logits, axis=-1)

    def kl(self, logits_p, logits_q):
        """``KL(p || q)``."""
        lp = self.ops.log_softmax(logits_p, axis=-1)
        lq = self.ops.log_softmax(logits_q, axis=-1)
        return self.ops.reduce_sum(self.ops.exp(lp) * (lp - lq), axis=-1)


class DiagGaussian:
    """Diagonal Gaussian with mean ``[B, d]`` and log standard deviation ``[B, d]`` (or ``[d]``)."""

    def __init__(self, ops):
        self.ops = ops

    def log_prob(self, mean, log_std, actions):
        """``sum_i log N(a_i; mean_i, std_i)``."""
        z = (actions - mean) / self.ops.exp(log_std)
        return self.ops.reduce_sum(-0.5 * self.ops.square(z) - log_std - 0.5 * LOG_2PI, axis=-1)

    def entropy(self, mean, log_std):
        """``sum_i (log std_i + 0.5 log(2 pi e))`` (broadcast to the batch of ``mean``)."""
        per_dim = log_std + 0.5 * (LOG_2PI + 1.0) + 0.0 * mean
        return self.ops.reduce_sum(per_dim, axis=-1)

    def sample(self, mean, log_std, normal_noise):
        """Reparameterised sample ``mean + std * eps``."""
        return mean + self.ops.exp(log_std) * normal_noise

    def deterministic(self, mean, log_std):
        """The mean."""
        return mean


class SquashedGaussian:
    """``tanh(u)`` with ``u ~ N(mean, std)``: actions in (-1, 1) for bounded boxes (SAC).

    ``log p(a) = log N(u) - sum_i log(1 - tanh(u_i)^2)``, using the stable identity
    ``log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))``.
    """

    def __init__(self, ops):
        self.ops = ops
        self.gaussian = DiagGaussian(ops)

    def sample_and_log_prob(self, mean, log_std, normal_noise):
        """Reparameterised squashed sample in (-1, 1) and its log-probability."""
        u = self.gaussian.sample(mean, log_std, normal_noise)
        return self.ops.activation("tanh", u), self.log_prob_from_pre_squash(mean, log_std, u)

    def sample(self, mean, log_std, normal_noise):
        """The reparameterised squashed sample alone (what acting needs: no log-probability)."""
        return self.ops.activation("tanh", self.gaussian.sample(mean, log_std, normal_noise))

    def log_prob_from_pre_squash(self, mean, log_std, u):
        """Log-probability of ``tanh(u)`` given the pre-squash value ``u``."""
        correction = 2.0 * (LOG_2 - u - self.ops.activation("softplus", -2.0 * u))
        return self.gaussian.log_prob(mean, log_std, u) - self.ops.reduce_sum(correction, axis=-1)

    def deterministic(self, mean, log_std):
        """``tanh(mean)``."""
        return self.ops.activation("tanh", mean)

    def log_prob(self, mean, log_std, actions, clip: float = 1.0 - 1e-6):
        """Log-probability of squashed ``actions`` in (-1, 1) (``u = atanh(a)``, clipped)."""
        a = self.ops.clip(actions, -clip, clip)
        u = 0.5 * self.ops.log((1.0 + a) / (1.0 - a))
        return self.log_prob_from_pre_squash(mean, log_std, u)

    def entropy(self, mean, log_std):
        """No closed form exists; the entropy of the underlying Gaussian is returned (an upper
        bound, since tanh contracts volume). SAC estimates entropy from samples instead."""
        return self.gaussian.entropy(mean, log_std)


class DistributionHead(Component):
    """Maps features ``[B, F]`` to an action distribution chosen from the action space.

    * ``Discrete(n)`` → :class:`Categorical` (a dense layer of ``n`` logits);
    * ``FloatBox(shape=(d,))`` → :class:`DiagGaussian` with a state-independent learned
      log-std (PPO/A2C), or with ``squashed=True`` → :class:`SquashedGaussian` whose log-std is a
      second dense output clipped to ``[log_std_min, log_std_max]`` (SAC).

    API methods return *unscaled* actions: in ``[start, start + n)`` minus ``start`` for discrete
    spaces and, for squashed boxes, in (-1, 1) — use :func:`scale_action` to map to the env box.
    """

    def __init__(
        self,
        action_space,
        squashed: bool = False,
        initializer: str = "orthogonal",
        rng: np.random.Generator | None = None,
        log_std_init: float = 0.0,
        log_std_bounds: tuple[float, float] = (-20.0, 2.0),
        name: str = "distribution",
    ):
        super().__init__(name)
        rng = rng if rng is not None else np.random.default_rng()
        self.discrete = isinstance(action_space, Discrete)
        self.squashed = squashed
        self.log_std_init = log_std_init
        self.log_std_min, self.log_std_max = log_std_bounds
        if self.discrete:
            self.logits = DenseLayer(int(action_space.n), "linear", initializer, rng, gain=0.01, name="logits")
            self.add_components(self.logits)
        elif isinstance(action_space, FloatBox) and len(action_space.shape) == 1:
            dim = int(action_space.shape[0])
            self.action_dim = dim
            self.mean = DenseLayer(dim, "linear", initializer, rng, gain=0.01, name="mean")
            self.add_components(self.mean)
            if squashed:
                self.log_std_layer = DenseLayer(dim, "linear", initializer, rng, gain=0.01, name="log_std")
                self.add_components(self.log_std_layer)
        else:
            raise ConfigError(
                f"No action distribution for action space {action_space!r}; supported are "
                f"Discrete(n) and rank-1 FloatBox."
            )

    def create_variables(self, input_spaces):
        if not self.discrete and not self.squashed:
            self.log_std = self.make_variable("log_std", np.full(self.action_dim, self.log_std_init, np.float32))

    def _params(self, features):
        if self.discrete:
            return (self.logits.call(features),)
        mean = self.mean.call(features)
        if self.squashed:
            log_std = self.ops.clip(self.log_std_layer.call(features), self.log_std_min, self.log_std_max)
        else:
            log_std = self.log_std + 0.0 * mean
        return mean, log_std

    def _dist(self):
        if self.discrete:
            return Categorical(self.ops)
        return SquashedGaussian(self.ops) if self.squashed else DiagGaussian(self.ops)

    @api
    def sample(self, features, noise):
        """``(actions, log_probs)``; noise is uniform ``[B, n]`` (discrete) or normal ``[B, d]``."""
        params = self._params(features)
        dist = self._dist()
        if self.squashed:
            return dist.sample_and_log_prob(*params, noise)
        actions = dist.sample(*params, noise)
        return actions, dist.log_prob(*params, actions)

    @api
    def sample_actions(self, features, noise):
        """The actions of :meth:`sample` without their log-probabilities.

        For acting: an eager backend would otherwise compute a log-probability per step only to
        drop it (a compiled function prunes it, so both modes act the same).
        """
        return self._dist().sample(*self._params(features), noise)

    def params(self, features):
        """The distribution's parameters: ``(logits,)`` or ``(mean, log_std)`` (a plain method, not an API)."""
        return self._params(features)

    @api
    def deterministic(self, features):
        """The distribution's mode (discrete), mean (Gaussian) or tanh(mean) (squashed)."""
        return self._dist().deterministic(*self._params(features))

    @api
    def log_prob_entropy(self, features, actions):
        """``(log p(actions), entropy)`` (for squashed Gaussians see :meth:`SquashedGaussian.entropy`)."""
        params = self._params(features)
        dist = self._dist()
        return dist.log_prob(*params, actions), dist.entropy(*params)


def scale_action(unit_action: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Map actions in [-1, 1] linearly onto the box ``[low, high]``."""
    return low + 0.5 * (np.asarray(unit_action) + 1.0) * (high - low)


def unscale_action(action: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Inverse of :func:`scale_action`."""
    return 2.0 * (np.asarray(action) - low) / (high - low) - 1.0
