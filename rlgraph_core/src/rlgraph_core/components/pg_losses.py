"""Policy-gradient losses: A2C (Mnih et al. 2016) and IMPALA's V-trace actor-critic loss
(Espeholt et al. 2018), and the advantage normalisation they share with PPO. PPO's clipped
surrogate (:class:`~rlgraph_core.agents.ppo.PPOLoss`) stands beside the rest of PPO in
:mod:`rlgraph_core.agents.ppo`, so that the algorithm reads top to bottom in one file.

Each takes what the actor-critic computes for a minibatch (log-probabilities, entropies and
values of the *current* parameters) plus the rollout's targets, and return the scalar loss
first, followed by diagnostics (all without gradient except the loss).
"""

from __future__ import annotations

from rlgraph_core.graph import Component, api


def normalize_advantages(ops, advantages, eps: float = 1e-8):
    """``(A - mean(A)) / (std(A) + eps)`` over the batch (population standard deviation)."""
    centred = advantages - ops.reduce_mean(advantages)
    return centred / (ops.sqrt(ops.reduce_mean(ops.square(centred))) + eps)


class PolicyGradientLoss(Component):
    """What the A2C and IMPALA losses share: ``pg_loss - mean(A * log pi(a|s))`` on advantages that
    carry no gradient (normalised over the batch with ``normalize_advantage``), plus ``vf_coef`` times
    the algorithm's value loss, minus ``ent_coef`` times the mean entropy."""

    def __init__(self, vf_coef: float, ent_coef: float, normalize_advantage: bool, name: str):
        super().__init__(name)
        self.vf_coef = float(vf_coef)
        self.ent_coef = float(ent_coef)
        self.normalize_advantage = normalize_advantage

    def _combine(self, log_probs, entropy, advantages, vf_loss):
        """``(loss, pg_loss, vf_loss, entropy)``, all but the loss without gradient."""
        ops = self.ops
        sg = ops.stop_gradient
        advantages = sg(advantages)
        if self.normalize_advantage:
            advantages = normalize_advantages(ops, advantages)
        pg_loss = -ops.reduce_mean(advantages * log_probs)
        entropy_mean = ops.reduce_mean(entropy)
        loss = pg_loss + self.vf_coef * vf_loss - self.ent_coef * entropy_mean
        return loss, sg(pg_loss), sg(vf_loss), sg(entropy_mean)


class A2CLoss(PolicyGradientLoss):
    """Advantage actor-critic loss (synchronous A3C).

    The math, top to bottom (B = batch; every mean is over B)::

        A        = normalize(A)  if normalize_advantage
        pg_loss  = -mean(A * log pi(a|s))
        vf_loss  = mean((V - R)^2)
        entropy  = mean(H(pi(.|s)))
        loss     = pg_loss + vf_coef * vf_loss - ent_coef * entropy

    Args:
        vf_coef: weight of the value loss.
        ent_coef: weight of the entropy bonus.
        normalize_advantage: normalise advantages over the batch.
        name: component name.

    Returns (from :meth:`loss`): ``(loss, pg_loss, vf_loss, entropy)``.
    """

    def __init__(
        self, vf_coef: float = 0.5, ent_coef: float = 0.0, normalize_advantage: bool = False, name: str = "a2c_loss"
    ):
        super().__init__(vf_coef, ent_coef, normalize_advantage, name)

    @api
    def loss(self, log_probs, entropy, values, advantages, returns):
        """The A2C loss and its diagnostics (see the class docstring)."""
        vf_loss = self.ops.reduce_mean(self.ops.square(values - returns))
        return self._combine(log_probs, entropy, advantages, vf_loss)


class ImpalaLoss(PolicyGradientLoss):
    """IMPALA's actor-critic loss on V-trace targets (Espeholt et al. 2018, section 4.2).

    The math, top to bottom (B = batch; every mean is over B; ``vs`` and ``pg_adv`` come from
    :class:`~rlgraph_core.components.vtrace.VTrace` and carry no gradient)::

        A        = normalize(pg_adv)  if normalize_advantage    # off in the paper
        pg_loss  = -mean(A * log pi(a|s))                       # A = rho_pg * (r + gamma vs' - V)
        vf_loss  = 0.5 * mean((vs - V(s))^2)
        entropy  = mean(H(pi(.|s)))
        loss     = pg_loss + vf_coef * vf_loss - ent_coef * entropy

    The paper sums over the batch; means make the learning rate independent of the batch size.

    Args:
        vf_coef: weight of the value (baseline) loss (paper: 0.5).
        ent_coef: weight of the entropy bonus.
        normalize_advantage: normalise the policy-gradient advantages over the batch.
        name: component name.

    Returns (from :meth:`loss`): ``(loss, pg_loss, vf_loss, entropy)``.
    """

    def __init__(
        self, vf_coef: float = 0.5, ent_coef: float = 0.01, normalize_advantage: bool = False, name: str = "impala_loss"
    ):
        super().__init__(vf_coef, ent_coef, normalize_advantage, name)

    @api
    def loss(self, log_probs, entropy, values, vs, pg_advantages):
        """The IMPALA loss and its diagnostics (see the class docstring)."""
        vf_loss = 0.5 * self.ops.reduce_mean(self.ops.square(self.ops.stop_gradient(vs) - values))
        return self._combine(log_probs, entropy, pg_advantages, vf_loss)
