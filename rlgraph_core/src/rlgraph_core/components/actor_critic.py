"""Actor-critic policies for on-policy algorithms (PPO, A2C), and a running observation normaliser.

:class:`ActorCritic` is ``obs -> [preprocessor] -> trunk(s) -> (action distribution, state value)``
with either one shared MLP trunk or two separate ones (the Stable-Baselines3 default for PPO/A2C:
separate 64-64 tanh trunks, orthogonal initialisation, policy output gain 0.01, value gain 1).

Randomness comes in as noise inputs made by the agent's seeded numpy generator (see
:mod:`rlgraph_core.components.distributions`), so every API method is a pure function of its
inputs and the variables.
"""

from __future__ import annotations

import numpy as np

from rlgraph_core.components.distributions import DistributionHead
from rlgraph_core.components.masks import MaskLayout, masked_logits, split_observation
from rlgraph_core.components.network import DenseLayer, NetworkMaker, NetworkSpec, as_network_maker
from rlgraph_core.graph import Component, api
from rlgraph_core.spaces import FloatBox, SpaceError


def actor_critic_heads(
    action_space, initializer: str, rng: np.random.Generator, log_std_init: float
) -> tuple[DistributionHead, DenseLayer]:
    """The two heads of an actor-critic, drawn from ``rng`` in this order: the action distribution
    (``distribution``: categorical or an unsquashed diagonal Gaussian) and the linear state value
    (``value_head``, one unit, gain 1)."""
    distribution = DistributionHead(
        action_space,
        squashed=False,
        initializer=initializer,
        rng=rng,
        log_std_init=log_std_init,
        name="distribution",
    )
    return distribution, DenseLayer(1, "linear", initializer, rng, gain=1.0, name="value_head")


class ActorCritic(Component):
    """A stochastic policy and a state-value function over the same observations.

    The math, for a batch of observations ``s`` ``[B, obs_dim]``::

        x        = preprocessor(s)                     # optional (normalisation)
        h_pi     = trunk_pi(x);  h_v = trunk_v(x)      # or one shared trunk: h_pi = h_v
        pi(.|s)  = distribution(h_pi)                  # categorical / diagonal Gaussian
        V(s)     = w_v . h_v + b_v                     # [B]

    Args:
        network: each trunk: the built-in MLP's settings (hidden sizes, activation,
            initializer) or a :class:`NetworkMaker` for any network component.
        action_space: ``Discrete(n)`` (categorical) or a rank-1 ``FloatBox`` (diagonal
            Gaussian with a state-independent learned log-std).
        shared_trunk: one trunk feeding both heads (True) or one trunk per head (False).
        preprocessor: optional component applied to observations first (``call(x)``).
        seed: seeds the initial weights (drawn in numpy, equal on every backend).
        log_std_init: initial log standard deviation of a Gaussian policy.
        name: component name.
        mask: where observations hold a legal-action mask (:func:`~rlgraph_core.components.masks.mask_layout`):
            the trunks see the observation without it and the categorical head takes it; None:
            no mask (the observation goes to the trunks whole).
    """

    def __init__(
        self,
        network: NetworkSpec | NetworkMaker,
        action_space,
        shared_trunk: bool = False,
        preprocessor: Component | None = None,
        seed: int = 0,
        log_std_init: float = 0.0,
        name: str = "actor_critic",
        mask: MaskLayout | None = None,
    ):
        super().__init__(name)
        rng = np.random.default_rng(seed)
        self.mask_layout = mask
        self.shared_trunk = shared_trunk
        self.preprocessor = preprocessor
        maker = as_network_maker(network)
        if shared_trunk:
            self.pi_trunk = self.vf_trunk = maker(name="trunk", rng=rng)
            trunks = [self.pi_trunk]
        else:
            self.pi_trunk = maker(name="pi_trunk", rng=rng)
            self.vf_trunk = maker(name="vf_trunk", rng=rng)
            trunks = [self.pi_trunk, self.vf_trunk]
        self.distribution, self.value_head = actor_critic_heads(action_space, maker.initializer, rng, log_std_init)
        self.add_components(
            *([preprocessor] if preprocessor is not None else []), *trunks, self.distribution, self.value_head
        )

    def _features(self, obs):
        """``(policy features, value features, legal-action mask or None)`` of a batch of observations."""
        obs, mask = split_observation(obs, self.mask_layout)
        x = self.preprocessor.call(obs) if self.preprocessor is not None else obs
        h_pi = self.pi_trunk.call(x)
        h_v = h_pi if self.shared_trunk else self.vf_trunk.call(x)
        return h_pi, h_v, mask

    @staticmethod
    def _masked(mask) -> tuple:
        return () if mask is None else (mask,)

    def _value(self, h_v):
        return self.ops.squeeze(self.value_head.call(h_v), -1)

    @api
    def act(self, obs, noise):
        """``(actions, log pi(actions|obs), V(obs))`` with actions sampled using ``noise``.

        ``noise`` is uniform ``[B, n]`` in (0, 1) for a categorical policy (Gumbel-max) and
        standard normal ``[B, d]`` for a Gaussian one.
        """
        h_pi, h_v, mask = self._features(obs)
        actions, log_probs = self.distribution.sample(h_pi, noise, *self._masked(mask))
        return actions, log_probs, self._value(h_v)

    @api
    def deterministic(self, obs):
        """The most likely action (argmax logits, or the Gaussian mean)."""
        h_pi, _, mask = self._features(obs)
        return self.distribution.deterministic(h_pi, *self._masked(mask))

    def policy_outputs(self, obs) -> dict:
        """``{"logits" | "mean": the distribution's first parameter, "value": V(obs)}`` (a plain
        method for export, not an API: built components call it after the build). Masked logits
        are the legal-action logits, :data:`~rlgraph_core.components.masks.ILLEGAL_LOGIT` elsewhere
        (a discrete ``logits`` is ``[B, n]``; MultiDiscrete's ``[B, len(nvec) * max(nvec)]``, unmasked)."""
        h_pi, h_v, mask = self._features(obs)
        first = self.distribution.params(h_pi)[0]
        if mask is not None and not self.distribution.multi:
            first = masked_logits(self.ops, first, mask)
        return {"logits" if self.distribution.discrete else "mean": first, "value": self._value(h_v)}

    @api
    def value(self, obs):
        """``V(obs)`` ``[B]``."""
        _, h_v, _ = self._features(obs)
        return self._value(h_v)

    @api
    def evaluate(self, obs, actions):
        """``(log pi(actions|obs), entropy of pi(.|obs), V(obs))``: what the losses need."""
        h_pi, h_v, mask = self._features(obs)
        log_probs, entropy = self.distribution.log_prob_entropy(h_pi, actions, *self._masked(mask))
        return log_probs, entropy, self._value(h_v)


class RunningObsNormalizer(Component):
    """Normalise observations by running statistics: ``clip((x - mean) / sqrt(var + eps), -c, c)``.

    The statistics are non-trainable variables (so they travel with the weights into checkpoints
    and to other workers). :meth:`update` folds a batch into them with the parallel-variance
    formula of Chan et al.::

        n_b = batch size;  mean_b, var_b = batch mean and (population) variance
        delta = mean_b - mean;  n' = n + n_b
        mean' = mean + delta * n_b / n'
        var'  = (var * n + var_b * n_b + delta^2 * n * n_b / n') / n'

    Args:
        shape: observation shape (rank 1).
        clip: bound on the normalised values.
        epsilon: added to the variance; also the initial count (as in Stable-Baselines3).
        name: component name.
    """

    def __init__(self, shape: tuple[int, ...], clip: float = 10.0, epsilon: float = 1e-8, name: str = "obs_normalizer"):
        super().__init__(name)
        self.shape = tuple(int(s) for s in shape)
        self.clip = float(clip)
        self.epsilon = float(epsilon)

    @classmethod
    def from_space(
        cls, space, *, name: str = "obs_normalizer", clip: float = 10.0, epsilon: float = 1e-8
    ) -> "RunningObsNormalizer":
        """A normaliser for observations of ``space`` (the component-slot constructor)."""
        return cls(space.shape, clip=clip, epsilon=epsilon, name=name)

    def check_input_spaces(self, method, spaces):
        """Both API methods take observations of the configured shape."""
        x = spaces["x"]
        if not isinstance(x, FloatBox) or tuple(x.shape) != self.shape:
            raise SpaceError(f"expected FloatBox(shape={self.shape}), got {x!r}.")

    def create_variables(self, input_spaces):
        """Mean 0, variance 1 and count epsilon (non-trainable)."""
        self.mean = self.make_variable("mean", np.zeros(self.shape, np.float32), trainable=False)
        self.var = self.make_variable("var", np.ones(self.shape, np.float32), trainable=False)
        self.count = self.make_variable("count", np.asarray(self.epsilon, np.float32), trainable=False)

    def reset(self) -> None:
        """Back to the initial statistics (mean 0, variance 1, count epsilon)."""
        self.backend.assign_numpy(self.mean, np.zeros(self.shape, np.float32))
        self.backend.assign_numpy(self.var, np.ones(self.shape, np.float32))
        self.backend.assign_numpy(self.count, np.asarray(self.epsilon, np.float32))

    @api
    def call(self, x):
        """Normalised ``x`` (statistics held constant, no gradient through them)."""
        ops = self.ops
        return ops.clip((x - self.mean) / ops.sqrt(self.var + self.epsilon), -self.clip, self.clip)

    @api
    def update(self, x):
        """Fold the batch ``x`` ``[B, *shape]`` into the statistics (in place); returns the new mean."""
        ops = self.ops
        n_b = ops.reduce_sum(ops.zeros_like(x) + 1.0, axis=0)  # the batch size (per dim), even when
        batch_mean = ops.reduce_mean(x, axis=0)  # the batch dim is unknown when traced
        batch_var = ops.reduce_mean(ops.square(x - batch_mean), axis=0)
        total = self.count + n_b
        delta = batch_mean - self.mean
        new_mean = self.mean + delta * (n_b / total)
        new_var = (self.var * self.count + batch_var * n_b + ops.square(delta) * (self.count * n_b / total)) / total
        ops.assign(self.mean, new_mean)
        ops.assign(self.var, new_var)
        ops.assign(self.count, ops.reduce_mean(total))
        return new_mean
