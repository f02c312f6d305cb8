"""Losses of learning from a fixed dataset: behaviour cloning and the CQL regularisers.

Both are plain components written against the backend-neutral ``ops``, so every backend (and
both modes) gets them; the agents in :mod:`rlgraph_core.agents.bc` and
:mod:`rlgraph_core.agents.cql` compose them with the usual networks.
"""

from __future__ import annotations

import math

from rlgraph_core.graph import Component, api

__all__ = ["BCLoss", "CQLRegularizer", "ContinuousCQLRegularizer", "logsumexp"]


def logsumexp(ops, x, axis: int = -1):
    """``log(sum(exp(x), axis))``, stable: the row maximum is taken out first (and held constant:
    the value does not depend on it, so neither does the gradient, which stays ``softmax(x)``).

    Written from the neutral ops rather than added to the ops contract, so every backend has it
    without a new op to implement."""
    m = ops.stop_gradient(ops.reduce_max(x, axis=axis, keepdims=True))
    return ops.log(ops.reduce_sum(ops.exp(x - m), axis=axis)) + ops.squeeze(m, axis)


class BCLoss(Component):
    """Behaviour cloning: imitate the dataset's actions.

    The math (B = batch, A = actions, D = action dimensions)::

        discrete:    per_sample = -log_softmax(logits)[a]              # cross-entropy, [B]
        continuous:  per_sample = sum_d (pred_d - a_d)^2               # [B]; pred, a in [-1, 1]
        loss = mean(w * per_sample)                                    # w: importance weights

    Returns ``(loss, per_sample)`` (the per-sample loss, without gradient, in the place where the
    Q-learning losses return ``|TD|``).

    Args:
        discrete: a Discrete action space (logits and action indices) or a Box one (actions).
    """

    def __init__(self, discrete: bool, name: str = "bc_loss"):
        super().__init__(name)
        self.discrete = bool(discrete)

    @api
    def loss(self, outputs, actions, weights):
        """Scalar loss and per-sample loss of the policy's ``outputs`` (logits or actions)."""
        ops = self.ops
        if self.discrete:
            per_sample = -ops.gather_last(ops.log_softmax(outputs, axis=-1), actions)
        else:
            per_sample = ops.reduce_sum(ops.square(outputs - actions), axis=-1)
        return ops.reduce_mean(weights * per_sample), ops.stop_gradient(per_sample)


class CQLRegularizer(Component):
    """The conservative Q-learning regulariser for discrete actions (Kumar et al. 2020, CQL(H)).

    The math (B = batch, A = actions)::

        per_sample = logsumexp_a Q(s, a) - Q(s, a_data)                 # [B], >= 0 up to log A
        loss       = mean(w * per_sample)

    Minimising it pushes down the Q-values of every action (softly, the largest most) and pushes
    up the one the data took, so actions the dataset never shows cannot look better than those it
    does. The agent adds ``alpha * loss`` to its TD loss.

    Returns ``(loss, per_sample)`` (per-sample without gradient).
    """

    def __init__(self, name: str = "cql_regularizer"):
        super().__init__(name)

    @api
    def loss(self, q_values, actions, weights):
        """Scalar regulariser and its per-sample values."""
        ops = self.ops
        per_sample = logsumexp(ops, q_values) - ops.gather_last(q_values, actions)
        return ops.reduce_mean(weights * per_sample), ops.stop_gradient(per_sample)


class ContinuousCQLRegularizer(Component):
    """The conservative Q-learning regulariser for continuous actions (Kumar et al. 2020, CQL(H)
    with importance sampling, appendix F; as d3rlpy's and CORL's CQL).

    ``logsumexp_a Q(s, a)`` over a continuous action box has no closed form; it is estimated from
    M uniform actions and 2M actions of the current policy (M at ``s``, M at ``s'``), each
    weighted by the inverse of the density it was drawn from (B = batch, d = action dimensions)::

        log_uniform = -d * log(2)                                     # density of U([-1, 1]^d)
        scores      = concat[q_random - log_uniform, q_policy - log_probs]     # [B, 3M]
        per_sample  = logsumexp(scores) - q_data                                # [B]
        loss        = mean(w * per_sample)

    As in the discrete case, minimising it pushes down the Q-values of actions the data did not
    take (the sampled ones, softly the largest most) and pushes up the data's. The log-probabilities
    carry no gradient (the critic's loss does not train the policy).

    Args:
        action_dim: d, the number of action dimensions (sets the uniform density).

    Returns ``(loss, per_sample)`` (per-sample without gradient).
    """

    def __init__(self, action_dim: int, name: str = "continuous_cql_regularizer"):
        super().__init__(name)
        self.log_uniform = -float(action_dim) * math.log(2.0)

    @api
    def loss(self, q_data, q_random, q_policy, log_probs, weights):
        """Scalar regulariser and its per-sample values: ``q_data`` ``[B]`` = Q(s, a_data),
        ``q_random`` ``[B, M]`` at uniform actions, ``q_policy`` and ``log_probs`` ``[B, 2M]`` at
        the policy's actions and their log-densities."""
        ops = self.ops
        scores = ops.concat([q_random - self.log_uniform, q_policy - ops.stop_gradient(log_probs)], axis=-1)
        per_sample = logsumexp(ops, scores) - q_data
        return ops.reduce_mean(weights * per_sample), ops.stop_gradient(per_sample)
