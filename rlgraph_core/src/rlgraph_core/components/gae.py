"""Generalized advantage estimation (Schulman et al. 2016) and bootstrapped discounted returns.

Inputs are time-major rollouts from vector environments, ``[T, N]`` (T steps of N envs).
Episode ends are handled per env and per step, keeping the two kinds apart:

* ``terminated``: the episode really ended (a terminal state): nothing is bootstrapped,
  ``V(s_{t+1}) = 0``;
* ``truncated``: the episode was cut (time limit): the return continues past the cut, so it
  is bootstrapped from ``V(final observation)``.

Either kind stops the recursion from carrying the *next* episode's advantages back into this
one. The caller passes ``next_values[t] = V(true s_{t+1})``: the value of the next observation of
the same episode (the final observation where an episode ended, the observation after the
rollout's last step for ``t = T - 1``); entries at terminated steps are ignored.
"""

from __future__ import annotations

from rlgraph_core.graph import Component, api
from rlgraph_core.spaces import BoolBox, FloatBox, SpaceError


def check_discounting(estimator: str, gamma: float, lam: float) -> None:
    """A ValueError unless ``gamma`` is in (0, 1] and the trace parameter ``lam`` in [0, 1]."""
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"{estimator} gamma must be in (0, 1], got {gamma}.")
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"{estimator} lambda must be in [0, 1], got {lam}.")


def check_time_major_inputs(spaces) -> None:
    """The input check of the return estimators (GAE, V-trace): every input is time-major
    ``[T, N]``, a FloatBox (a BoolBox for ``terminated``/``truncated``), all with the same N."""
    shapes = set()
    for name, space in spaces.items():
        want = BoolBox if name in ("terminated", "truncated") else FloatBox
        if not isinstance(space, want) or len(space.shape) != 1:
            raise SpaceError(
                f"'{name}' must be a time-major [T, N] {want.__name__} (batch rank = time, shape (N,)), got {space!r}."
            )
        shapes.add(tuple(space.shape))
    if len(shapes) > 1:
        raise SpaceError(f"every input must have the same number of envs N; got shapes {sorted(shapes)}.")


class GAE(Component):
    """Advantages and returns of a ``[T, N]`` rollout.

    The math, top to bottom (all ``[T, N]``; products elementwise)::

        not_terminal_t = 1 - terminated_t
        not_done_t     = (1 - terminated_t) * (1 - truncated_t)
        delta_t        = r_t + gamma * not_terminal_t * V(s_{t+1}) - V(s_t)
        A_{T-1}        = delta_{T-1}
        A_t            = delta_t + gamma * lambda * not_done_t * A_{t+1}
        returns_t      = A_t + V(s_t)              # the value-function targets (TD(lambda))

    ``lambda = 1`` gives Monte-Carlo advantages (bootstrapped only at truncation and at the
    rollout's end); ``lambda = 0`` gives one-step TD errors. :meth:`discounted_returns` gives the
    plain bootstrapped discounted return, which equals ``returns`` at ``lambda = 1``.

    Args:
        gamma: discount factor.
        gae_lambda: the GAE ``lambda`` in [0, 1].
        name: component name.
    """

    def __init__(self, gamma: float = 0.99, gae_lambda: float = 0.95, name: str = "gae"):
        super().__init__(name)
        check_discounting("GAE", gamma, gae_lambda)
        self.gamma = float(gamma)
        self.gae_lambda = float(gae_lambda)

    def check_input_spaces(self, method, spaces):
        """Every input is time-major ``[T, N]`` (float, or bool for the episode-end flags), same N."""
        check_time_major_inputs(spaces)

    @api
    def advantages(self, rewards, values, next_values, terminated, truncated):
        """``(advantages, returns)``, both ``[T, N]`` and without gradient."""
        ops = self.ops
        not_terminal = 1.0 - ops.cast(terminated, "float32")
        not_done = not_terminal * (1.0 - ops.cast(truncated, "float32"))
        deltas = rewards + self.gamma * not_terminal * next_values - values
        # gamma * lambda * not_done for every step at once (the same products, one op per rollout
        # instead of one per step: the loop below is most of this method's ops)
        decay = (self.gamma * self.gae_lambda) * not_done
        carry = ops.zeros_like(deltas[0])
        backwards = []
        for t in reversed(range(int(deltas.shape[0]))):
            carry = deltas[t] + decay[t] * carry
            backwards.append(carry)
        advantages = ops.stack(backwards[::-1], axis=0)
        returns = advantages + values
        return ops.stop_gradient(advantages), ops.stop_gradient(returns)

    @api
    def discounted_returns(self, rewards, next_values, terminated, truncated):
        """Bootstrapped discounted returns ``[T, N]``.

        ``G_t = r_t + gamma * (1 - terminated_t) * (G_{t+1} if the episode goes on at t+1 within
        the rollout, else V(s_{t+1}))``: bootstrapped at truncation and at the rollout's end.
        """
        ops = self.ops
        not_terminal = 1.0 - ops.cast(terminated, "float32")
        not_done = not_terminal * (1.0 - ops.cast(truncated, "float32"))
        horizon = int(rewards.shape[0])
        carry = next_values[horizon - 1]
        backwards = []
        for t in reversed(range(horizon)):
            following = not_done[t] * carry + (1.0 - not_done[t]) * next_values[t]
            carry = rewards[t] + self.gamma * not_terminal[t] * following
            backwards.append(carry)
        return ops.stop_gradient(ops.stack(backwards[::-1], axis=0))
