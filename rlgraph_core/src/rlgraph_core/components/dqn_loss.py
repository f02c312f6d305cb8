"""The DQN loss: (double) Q-learning targets with n-step discounts and importance weights."""

from __future__ import annotations

from rlgraph_core.components.masks import masked_logits
from rlgraph_core.errors import ConfigError
from rlgraph_core.graph import Component, api


class DQNLoss(Component):
    """TD loss of DQN.

    The math, top to bottom (B = batch, A = actions)::

        q        = Q(s)[a]                                      # [B]
        a*       = argmax_a Q_online(s')  if double_q  else argmax_a Q_target(s')
                   (over the legal actions of s' where a next_mask is given)
        v_next   = Q_target(s')[a*]                             # [B]
        target   = r + discount * (1 - terminal) * v_next       # no gradient; discount = gamma^n
        td       = q - target
        loss     = mean(w * huber(td))  or  mean(w * td^2)      # w: PER importance weights

    Returns ``(loss, |td|)``; ``|td|`` feeds prioritized replay.
    """

    LOSSES = ("huber", "mse")

    def __init__(
        self, loss_type: str = "huber", double_q: bool = True, huber_delta: float = 1.0, name: str = "dqn_loss"
    ):
        super().__init__(name)
        if loss_type not in self.LOSSES:
            raise ConfigError(f"Unknown DQN loss_type '{loss_type}'; use one of {', '.join(self.LOSSES)}.")
        self.loss_type = loss_type
        self.double_q = double_q
        self.huber_delta = huber_delta

    @api
    def loss(
        self, q_values, actions, rewards, terminals, discounts, q_next_target, q_next_online, weights, next_mask=None
    ):
        """Scalar loss and per-sample absolute TD errors.

        ``next_mask`` (optional, ``[B, A]``): the legal actions of ``s'``; the target bootstraps
        from the best legal one. ``v_next`` is read from the unmasked ``Q_target``, so a final
        observation whose mask is all false (a finished board game) still gives a finite value
        (and a terminal one is not bootstrapped anyway).
        """
        ops = self.ops
        q = ops.gather_last(q_values, actions)
        selector = masked_logits(ops, q_next_online if self.double_q else q_next_target, next_mask)
        next_actions = ops.argmax(selector, axis=-1)
        v_next = ops.gather_last(q_next_target, next_actions)
        not_done = 1.0 - ops.cast(terminals, "float32")
        target = ops.stop_gradient(rewards + discounts * not_done * v_next)
        td = q - target
        per_sample = ops.huber(td, self.huber_delta) if self.loss_type == "huber" else ops.square(td)
        return ops.reduce_mean(weights * per_sample), ops.stop_gradient(ops.abs(td))
