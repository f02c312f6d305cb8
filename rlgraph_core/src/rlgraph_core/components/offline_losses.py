"""Losses of learning from a fixed dataset: behaviour cloning, the CQL regularisers and IQL's
expectile value loss and advantage-weighted policy extraction.

All are plain components written against the backend-neutral ``ops``, so every backend (and
both modes) gets them; the agents in :mod:`rlgraph_core.agents.bc`, :mod:`rlgraph_core.agents.cql`,
:mod:`rlgraph_core.agents.cql_sac` and :mod:`rlgraph_core.agents.iql` compose them with the usual
networks.
"""

from __future__ import annotations

import math

from rlgraph_core.graph import Component, api

__all__ = [
    "AdvantageWeightedLoss",
    "BCLoss",
    "CQLRegularizer",
    "ContinuousCQLRegularizer",
    "ExpectileLoss",
    "logsumexp",
]


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


class ExpectileLoss(Component):
    """Expectile regression of a state value onto action values (IQL's value loss, Kostrikov et al. 2021).

    The math (B = batch, tau = ``expectile``)::

        u          = Q(s, a) - V(s)                                  # Q: no gradient
        per_sample = |tau - 1(u < 0)| * u^2
                   = tau * relu(u)^2 + (1 - tau) * relu(-u)^2        # (as computed: no comparison op)
        loss       = mean(w * per_sample)

    With ``tau = 0.5`` it is half the squared error and V(s) fits the mean of Q over the data's
    actions; with ``tau -> 1`` V(s) approaches the largest Q(s, a) among the actions the data
    took at s, an in-sample maximum that never evaluates an action outside the dataset.

    Returns ``(loss, u)`` (the advantage estimate ``u``, without gradient).

    Args:
        expectile: tau in (0, 1) (IQL: 0.7 on locomotion, 0.9 on mazes).
    """

    def __init__(self, expectile: float = 0.7, name: str = "expectile_loss"):
        super().__init__(name)
        if not 0.0 < float(expectile) < 1.0:
            raise ValueError(f"expectile must lie in (0, 1), got {expectile!r}")
        self.expectile = float(expectile)

    @api
    def loss(self, q_values, values, weights):
        """Scalar loss and ``u = Q - V`` per sample, for ``q_values`` and ``values`` ``[B]``."""
        ops = self.ops
        u = ops.stop_gradient(q_values) - values
        above, below = ops.activation("relu", u), ops.activation("relu", -u)
        per_sample = self.expectile * ops.square(above) + (1.0 - self.expectile) * ops.square(below)
        return ops.reduce_mean(weights * per_sample), ops.stop_gradient(u)


class AdvantageWeightedLoss(Component):
    """Advantage-weighted regression of a policy onto the dataset's actions (IQL's policy
    extraction; Peng et al. 2019, Nair et al. 2020).

    The math (B = batch, beta = ``temperature``)::

        a_w        = min(exp(beta * A(s, a)), max_weight)            # no gradient
        per_sample = -a_w * log pi(a_data | s)
        loss       = mean(w * per_sample)

    Behaviour cloning weighted by how much better than V(s) the data's action was: with
    ``beta = 0`` it is BC, with large beta it clones only the best actions. The clip keeps a few
    large advantages from dominating a batch; it is applied to the exponent
    (``exp(min(beta A, log max_weight))``, the same value) so no weight overflows.

    Returns ``(loss, a_w)`` (the weights, without gradient).

    Args:
        temperature: beta >= 0 (IQL and d3rlpy: 3).
        max_weight: the clip of the weights (IQL and d3rlpy: 100).
    """

    def __init__(self, temperature: float = 3.0, max_weight: float = 100.0, name: str = "advantage_weighted_loss"):
        super().__init__(name)
        if not float(temperature) >= 0.0:
            raise ValueError(f"temperature must be >= 0, got {temperature!r}")
        if not float(max_weight) > 0.0:
            raise ValueError(f"max_weight must be positive, got {max_weight!r}")
        self.temperature = float(temperature)
        self.log_max_weight = math.log(float(max_weight))

    @api
    def loss(self, log_probs, advantages, weights):
        """Scalar loss and the clipped exponential weights, for ``log_probs`` (of the data's
        actions) and ``advantages`` ``[B]``."""
        ops = self.ops
        exponent = ops.minimum(self.temperature * ops.stop_gradient(advantages), self.log_max_weight)
        adv_weights = ops.stop_gradient(ops.exp(exponent))
        return -ops.reduce_mean(weights * adv_weights * log_probs), adv_weights
