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

from rlgraph_core.components.masks import masked_logits
from rlgraph_core.components.network import DenseLayer
from rlgraph_core.errors import ConfigError
from rlgraph_core.graph import Component, api
from rlgraph_core.spaces import Discrete, FloatBox, MultiDiscrete

LOG_2PI = math.log(2.0 * math.pi)
LOG_2 = math.log(2.0)


class Categorical:
    """Categorical over ``n`` actions, parameterised by logits ``[B, n]``.

    Every method takes an optional legal-action ``mask`` ``[B, n]`` (true or non-zero where legal,
    see :mod:`rlgraph_core.components.masks`): illegal actions get the finite logit
    :data:`~rlgraph_core.components.masks.ILLEGAL_LOGIT`, so they are never sampled nor chosen,
    their probability is exactly 0, and entropy and KL sum over the legal actions only.
    """

    def __init__(self, ops):
        self.ops = ops

    def log_prob(self, logits, actions, mask=None):
        """``log softmax(logits)[a]``."""
        return self.ops.gather_last(self.ops.log_softmax(masked_logits(self.ops, logits, mask), axis=-1), actions)

    def entropy(self, logits, mask=None):
        """``-sum p log p`` (over the legal actions)."""
        logp = self.ops.log_softmax(masked_logits(self.ops, logits, mask), axis=-1)
        return -self.ops.reduce_sum(self._legal(self.ops.exp(logp) * logp, mask), axis=-1)

    def log_prob_entropy(self, logits, actions, mask=None):
        """``(log_prob, entropy)`` of :meth:`log_prob` and :meth:`entropy`, masking and normalising
        the logits once (the loss of every minibatch step asks for both)."""
        logp = self.ops.log_softmax(masked_logits(self.ops, logits, mask), axis=-1)
        entropy = -self.ops.reduce_sum(self._legal(self.ops.exp(logp) * logp, mask), axis=-1)
        return self.ops.gather_last(logp, actions), entropy

    def sample(self, logits, uniform_noise, mask=None):
        """Gumbel-max: ``argmax(logits - log(-log u))`` with ``u ~ U(0, 1)`` of shape ``[B, n]``."""
        return self._gumbel_max(masked_logits(self.ops, logits, mask), uniform_noise)

    def sample_and_log_prob(self, logits, uniform_noise, mask=None):
        """``(sample, log_prob(sample))`` of :meth:`sample` and :meth:`log_prob`, masking the logits
        once (acting asks for both at every env step)."""
        masked = masked_logits(self.ops, logits, mask)
        actions = self._gumbel_max(masked, uniform_noise)
        return actions, self.ops.gather_last(self.ops.log_softmax(masked, axis=-1), actions)

    def _gumbel_max(self, masked, uniform_noise):
        # ``masked - log(-log u)`` is ``masked + gumbel`` bit for bit (x + (-y) == x - y), one op fewer.
        return self.ops.argmax(masked - self.ops.log(-self.ops.log(uniform_noise)), axis=-1)

    def deterministic(self, logits, mask=None):
        """The mode: ``argmax logits`` (over the legal actions)."""
        return self.ops.argmax(masked_logits(self.ops, logits, mask), axis=-1)

    def kl(self, logits_p, logits_q, mask=None):
        """``KL(p || q)`` (both restricted to the legal actions)."""
        lp = self.ops.log_softmax(masked_logits(self.ops, logits_p, mask), axis=-1)
        lq = self.ops.log_softmax(masked_logits(self.ops, logits_q, mask), axis=-1)
        return self.ops.reduce_sum(self._legal(self.ops.exp(lp) * (lp - lq), mask), axis=-1)

    def _legal(self, terms, mask):
        """``terms`` where the action is legal, 0 elsewhere (an illegal term is already 0: this
        keeps it exactly so, whatever the logits)."""
        if mask is None:
            return terms
        return self.ops.where(self.ops.cast(mask, "bool"), terms, 0.0)


class MultiCategorical:
    """Independent categoricals over the sub-actions of ``MultiDiscrete(nvec)``.

    The logits are one row ``[B, k * m]`` (``k = len(nvec)``, ``m = max(nvec)``), read as
    ``[B, k, m]``; the slots past ``nvec[i]`` of sub-action ``i`` are never legal. A legal-action
    mask is sb3-contrib's layout: the flags of every sub-action concatenated, ``[B, sum(nvec)]``.
    Log-probabilities and entropies are sums over the sub-actions.
    """

    def __init__(self, ops, nvec, backend):
        self.ops = ops
        self.nvec = tuple(int(n) for n in nvec)
        self.k, self.m = len(self.nvec), max(self.nvec)
        self.categorical = Categorical(ops)
        # Constants: which padded slots exist, and the matrix scattering a [sum(nvec)] mask onto
        # the padded [k * m] layout (there is no scatter op in the neutral ops; a matmul is one).
        slots = np.zeros((self.k, self.m), np.float32)
        scatter = np.zeros((sum(self.nvec), self.k * self.m), np.float32)
        row = 0
        for i, n in enumerate(self.nvec):
            slots[i, :n] = 1.0
            for j in range(n):
                scatter[row, i * self.m + j] = 1.0
                row += 1
        self.ragged = bool((slots == 0).any())
        self._slots = backend.to_tensor(slots)
        self._scatter = backend.to_tensor(scatter)
        self._no_bias = backend.to_tensor(np.zeros(self.k * self.m, np.float32))

    def _split(self, logits, mask):
        """``(logits [B, k, m], mask [B, k, m] or None)``: the padded slots are masked out."""
        ops = self.ops
        logits = ops.reshape(logits, [-1, self.k, self.m])
        if mask is None:
            return logits, (logits * 0.0 + self._slots) if self.ragged else None
        padded = ops.dense(ops.cast(mask, "float32"), self._scatter, self._no_bias)
        return logits, ops.reshape(padded, [-1, self.k, self.m])

    def log_prob(self, logits, actions, mask=None):
        """``sum_i log pi_i(a_i)`` for actions ``[B, k]``."""
        logits, mask = self._split(logits, mask)
        return self._sum_log_probs(self.ops.log_softmax(masked_logits(self.ops, logits, mask), axis=-1), actions)

    def entropy(self, logits, mask=None):
        """``sum_i H(pi_i)`` (each over its legal values)."""
        logits, mask = self._split(logits, mask)
        return self.ops.reduce_sum(self.categorical.entropy(logits, mask), axis=-1)

    def sample(self, logits, uniform_noise, mask=None):
        """Gumbel-max per sub-action; ``uniform_noise`` is ``[B, k * m]``."""
        logits, mask = self._split(logits, mask)
        noise = self.ops.reshape(uniform_noise, [-1, self.k, self.m])
        return self.categorical.sample(logits, noise, mask)

    def sample_and_log_prob(self, logits, uniform_noise, mask=None):
        """``(sample, log_prob(sample))``, splitting and masking the logits once."""
        logits, mask = self._split(logits, mask)
        noise = self.ops.reshape(uniform_noise, [-1, self.k, self.m])
        masked = masked_logits(self.ops, logits, mask)
        actions = self.categorical._gumbel_max(masked, noise)
        return actions, self._sum_log_probs(self.ops.log_softmax(masked, axis=-1), actions)

    def log_prob_entropy(self, logits, actions, mask=None):
        """``(log_prob, entropy)``, splitting and masking the logits once."""
        logits, mask = self._split(logits, mask)
        logp = self.ops.log_softmax(masked_logits(self.ops, logits, mask), axis=-1)
        per_sub = -self.ops.reduce_sum(self.categorical._legal(self.ops.exp(logp) * logp, mask), axis=-1)
        return self._sum_log_probs(logp, actions), self.ops.reduce_sum(per_sub, axis=-1)

    def _sum_log_probs(self, logp, actions):
        """``sum_i logp[:, i, a_i]`` of the normalised log-probabilities ``[B, k, m]``."""
        return self.ops.reduce_sum(self.ops.reduce_sum(self.ops.one_hot(actions, self.m) * logp, axis=-1), axis=-1)

    def deterministic(self, logits, mask=None):
        """The mode of every sub-action, ``[B, k]``."""
        logits, mask = self._split(logits, mask)
        return self.categorical.deterministic(logits, mask)


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
    * ``MultiDiscrete(nvec)`` → :class:`MultiCategorical` (a dense layer of
      ``len(nvec) * max(nvec)`` logits);
    * ``FloatBox(shape=(d,))`` → :class:`DiagGaussian` with a state-independent learned
      log-std (PPO/A2C), or with ``squashed=True`` → :class:`SquashedGaussian` whose log-std is a
      second dense output clipped to ``[log_std_min, log_std_max]`` (SAC).

    The categorical API methods take an optional legal-action ``mask`` last
    (:mod:`rlgraph_core.components.masks`); an unmasked agent never passes one.

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
        rng = np.random.default_rng(rng)
        self.multi = isinstance(action_space, MultiDiscrete) and len(action_space.shape) == 1
        self.discrete = isinstance(action_space, Discrete) or self.multi
        self.squashed = squashed
        self.log_std_init = log_std_init
        self.log_std_min, self.log_std_max = log_std_bounds
        if self.multi:
            self.nvec = tuple(int(n) for n in np.asarray(action_space.nvec))
            size = len(self.nvec) * max(self.nvec)
            self.logits = DenseLayer(size, "linear", initializer, rng, gain=0.01, name="logits")
            self.add_components(self.logits)
        elif self.discrete:
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
                f"Discrete(n), MultiDiscrete(nvec) and rank-1 FloatBox."
            )

    def create_variables(self, input_spaces):
        if self.multi:  # its constants need the backend, known from now on
            self._multi = MultiCategorical(self.ops, self.nvec, self.backend)
        elif not self.discrete and not self.squashed:
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
        if self.multi:
            return self._multi
        if self.discrete:
            return Categorical(self.ops)
        return SquashedGaussian(self.ops) if self.squashed else DiagGaussian(self.ops)

    @staticmethod
    def _masked(mask):
        """The mask as a trailing argument of a categorical's method (none when unmasked)."""
        return () if mask is None else (mask,)

    @api
    def sample(self, features, noise, mask=None):
        """``(actions, log_probs)``; noise is uniform ``[B, n]`` (discrete) or normal ``[B, d]``."""
        params = self._params(features)
        dist = self._dist()
        if self.squashed or self.discrete:  # one pass over the (masked) logits for both
            return dist.sample_and_log_prob(*params, noise, *self._masked(mask))
        actions = dist.sample(*params, noise)
        return actions, dist.log_prob(*params, actions)

    @api
    def sample_actions(self, features, noise, mask=None):
        """The actions of :meth:`sample` without their log-probabilities.

        For acting: an eager backend would otherwise compute a log-probability per step only to
        drop it (a compiled function prunes it, so both modes act the same).
        """
        return self._dist().sample(*self._params(features), noise, *self._masked(mask))

    def params(self, features):
        """The distribution's parameters: ``(logits,)`` or ``(mean, log_std)`` (a plain method, not an API)."""
        return self._params(features)

    @api
    def deterministic(self, features, mask=None):
        """The distribution's mode (discrete), mean (Gaussian) or tanh(mean) (squashed)."""
        return self._dist().deterministic(*self._params(features), *self._masked(mask))

    @api
    def log_prob_entropy(self, features, actions, mask=None):
        """``(log p(actions), entropy)`` (for squashed Gaussians see :meth:`SquashedGaussian.entropy`)."""
        params = self._params(features)
        dist = self._dist()
        masked = self._masked(mask)
        if self.discrete:  # one pass over the (masked) logits for both
            return dist.log_prob_entropy(*params, actions, *masked)
        return dist.log_prob(*params, actions), dist.entropy(*params)


def scale_action(unit_action: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Map actions in [-1, 1] linearly onto the box ``[low, high]``."""
    return low + 0.5 * (np.asarray(unit_action) + 1.0) * (high - low)


def unscale_action(action: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Inverse of :func:`scale_action`."""
    return 2.0 * (np.asarray(action) - low) / (high - low) - 1.0
