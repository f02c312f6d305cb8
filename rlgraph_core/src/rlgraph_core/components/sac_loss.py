"""The three losses of Soft Actor-Critic (Haarnoja et al. 2018), with the entropy temperature."""

from __future__ import annotations

import math

import numpy as np

from rlgraph_core.errors import ConfigError
from rlgraph_core.graph import Component, api


class SACLoss(Component):
    """Critic, actor and temperature losses of SAC; owns the temperature variable ``log_alpha``.

    The math, top to bottom (B = batch; ``pi`` is the tanh-squashed Gaussian policy, so its
    log-probabilities already include the ``- sum log(1 - tanh(u)^2)`` correction)::

        alpha    = exp(log_alpha)                       # entropy temperature, a constant in 1. and 2.

        # 1. critic (both Q-networks), one update over their variables
        a', logp' ~ pi(. | s')                          # fresh next actions from the current policy
        v_next   = min(Q1_targ(s', a'), Q2_targ(s', a')) - alpha * logp'     # soft state value
        y        = r + discount * (1 - terminated) * v_next                 # no gradient
        critic   = mean(w * 0.5 * ((Q1(s, a) - y)^2 + (Q2(s, a) - y)^2))     # w: PER weights (or 1)

        # 2. actor (policy variables only), reparameterised: a~ = tanh(mean + std * eps)
        actor    = mean(alpha * logp(a~ | s) - min(Q1(s, a~), Q2(s, a~)))

        # 3. temperature (log_alpha only), when learned: keeps the policy's entropy near the target
        temp     = -mean(log_alpha * (logp(a~ | s) + target_entropy))        # logp: no gradient

    ``discount`` is ``gamma`` for one-step transitions (``gamma^n`` for n-step ones), and
    ``terminated`` means a true end of the episode: a truncated episode still bootstraps. The
    temperature is learned as ``log_alpha`` so alpha stays positive; ``target_entropy`` is
    ``-action_dim`` by default (Haarnoja et al. 2018b). With a fixed temperature ``log_alpha`` is
    a non-trainable variable and loss 3 is never minimised.

    Args:
        action_dim: size of the action vector (sets the default target entropy).
        ent_coef: ``"auto"`` to learn the temperature, or a fixed positive alpha.
        init_ent_coef: starting alpha when learned.
        target_entropy: ``"auto"`` (= ``-action_dim``) or a float.
        name: component name.
    """

    def __init__(
        self,
        action_dim: int,
        ent_coef: float | str = "auto",
        init_ent_coef: float = 1.0,
        target_entropy: float | str = "auto",
        name: str = "sac_loss",
    ):
        super().__init__(name)
        if ent_coef != "auto" and not (isinstance(ent_coef, (int, float)) and ent_coef > 0):
            raise ConfigError(f"SAC ent_coef must be 'auto' or a positive float, got {ent_coef!r}.")
        if not init_ent_coef > 0:
            raise ConfigError(f"SAC init_ent_coef must be positive, got {init_ent_coef!r}.")
        if target_entropy != "auto" and not isinstance(target_entropy, (int, float)):
            raise ConfigError(f"SAC target_entropy must be 'auto' or a float, got {target_entropy!r}.")
        self.learn_alpha = ent_coef == "auto"
        self.initial_alpha = float(init_ent_coef if self.learn_alpha else ent_coef)
        self.target_entropy = float(-action_dim if target_entropy == "auto" else target_entropy)

    def create_variables(self, input_spaces):
        self.log_alpha = self.make_variable(
            "log_alpha", np.asarray(math.log(self.initial_alpha), np.float32), trainable=self.learn_alpha
        )

    def _alpha(self):
        """``exp(log_alpha)`` as a constant (no gradient into the temperature)."""
        return self.ops.stop_gradient(self.ops.exp(self.log_alpha))

    @api
    def critic_loss(
        self, q1, q2, rewards, terminals, discounts, next_q1_target, next_q2_target, next_log_probs, weights
    ):
        """Loss 1: ``(loss, |TD|)``; ``|TD|`` is the mean over both critics (for prioritized replay).

        Args (all ``[B]``): ``q1, q2`` = ``Q1(s, a), Q2(s, a)``; ``next_q*_target`` = target
        critics at ``(s', a')``; ``next_log_probs`` = ``log pi(a' | s')``; ``terminals`` bool;
        ``discounts`` = ``gamma^n``; ``weights`` = importance weights.
        """
        ops = self.ops
        v_next = ops.minimum(next_q1_target, next_q2_target) - self._alpha() * next_log_probs
        not_done = 1.0 - ops.cast(terminals, "float32")
        y = ops.stop_gradient(rewards + discounts * not_done * v_next)
        td1, td2 = q1 - y, q2 - y
        loss = ops.reduce_mean(weights * 0.5 * (ops.square(td1) + ops.square(td2)))
        return loss, ops.stop_gradient(0.5 * (ops.abs(td1) + ops.abs(td2)))

    @api
    def actor_loss(self, log_probs, q1_pi, q2_pi):
        """Loss 2: ``(loss, log_probs)``; the log-probabilities (no gradient) feed loss 3.

        Args (all ``[B]``): ``log_probs`` = ``log pi(a~ | s)`` of reparameterised actions,
        ``q*_pi`` = ``Q*(s, a~)``.
        """
        ops = self.ops
        loss = ops.reduce_mean(self._alpha() * log_probs - ops.minimum(q1_pi, q2_pi))
        return loss, ops.stop_gradient(log_probs)

    @api
    def temperature_loss(self, log_probs):
        """Loss 3: ``(loss, alpha)`` for ``log_probs`` ``[B]`` of the current policy's actions."""
        ops = self.ops
        loss = -ops.reduce_mean(self.log_alpha * ops.stop_gradient(log_probs + self.target_entropy))
        return loss, self._alpha()

    @api
    def alpha(self):
        """The current temperature ``exp(log_alpha)`` (a scalar)."""
        return self._alpha()
