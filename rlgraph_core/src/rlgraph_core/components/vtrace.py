"""V-trace off-policy value targets and policy-gradient advantages (Espeholt et al. 2018, IMPALA).

An actor collects a rollout with its *behaviour* policy ``mu`` (an older copy of the weights);
the learner's current *target* policy ``pi`` learns from it. V-trace corrects for the lag with
truncated importance weights: ``rho_bar`` bounds the weight of each step's TD error (it decides
*which* value function the targets converge to), ``c_bar`` bounds the traces that carry later
errors back in time (it decides how *fast*).

Inputs are time-major rollouts of vector environments, ``[T, N]``, as for
:class:`~rlgraph_core.components.gae.GAE`, and episode ends are handled the same way:

* ``terminated``: the episode really ended: nothing is bootstrapped, ``V(x_{t+1}) = 0``;
* ``truncated``: the episode was cut (time limit): bootstrapped from ``V(final observation)``.

Either kind stops the recursion from carrying the next episode's targets back into this one.
``next_values[t] = V(x_{t+1})`` is the value of the true next observation of the same episode (the
final observation at an episode end, the observation after the last step for ``t = T - 1``);
entries at terminated steps are ignored.
"""

from __future__ import annotations

from rlgraph_core.components.gae import check_discounting, check_time_major_inputs
from rlgraph_core.graph import Component, api


class VTrace(Component):
    """V-trace targets ``vs`` and policy-gradient advantages of a ``[T, N]`` rollout.

    The math, top to bottom (all ``[T, N]``; products elementwise; ``V(x_{t+1})`` is
    ``next_values``)::

        not_terminal_t = 1 - terminated_t
        not_done_t     = (1 - terminated_t) * (1 - truncated_t)
        ratio_t        = pi(a_t|x_t) / mu(a_t|x_t) = exp(log pi - log mu)
        rho_t          = min(rho_bar, ratio_t)
        c_t            = lambda * min(c_bar, ratio_t)
        delta_t        = rho_t * (r_t + gamma * not_terminal_t * V(x_{t+1}) - V(x_t))
        vs_t - V(x_t)  = delta_t + gamma * c_t * not_done_t * (vs_{t+1} - V(x_{t+1}))
                         # backwards from vs_T - V(x_T) = 0 (bootstrap at the rollout's end)
        vs_{t+1}       = V(x_{t+1}) + not_done_t * (vs_{t+1} - V(x_{t+1}))
                         # = V(x_{t+1}) where the episode was cut or the rollout ends
        pg_adv_t       = rho_pg_t * (r_t + gamma * not_terminal_t * vs_{t+1} - V(x_t))
                         # rho_pg_t = min(rho_bar_pg, ratio_t)

    On-policy (``pi == mu``) with ``c_bar, rho_bar >= 1``, ``vs`` are the TD(lambda) returns of
    GAE(lambda); at ``lambda = 1`` they are the n-step bootstrapped returns and ``pg_adv`` the
    GAE(1) advantages. Both outputs carry no gradient (they are targets).

    Args:
        gamma: discount factor.
        rho_bar: truncation of the importance weights in the TD errors (paper: 1).
        c_bar: truncation of the trace coefficients (paper: 1); ``c_bar <= rho_bar`` is assumed
            by the paper's analysis but not enforced.
        rho_bar_pg: truncation of the policy-gradient weights (None: ``rho_bar``).
        vtrace_lambda: the ``lambda`` in ``c_t``, in [0, 1] (paper: 1).
        name: component name.
    """

    def __init__(
        self,
        gamma: float = 0.99,
        rho_bar: float = 1.0,
        c_bar: float = 1.0,
        rho_bar_pg: float | None = None,
        vtrace_lambda: float = 1.0,
        name: str = "vtrace",
    ):
        super().__init__(name)
        check_discounting("V-trace", gamma, vtrace_lambda)
        for label, value in (("rho_bar", rho_bar), ("c_bar", c_bar), ("rho_bar_pg", rho_bar_pg)):
            if value is not None and not value > 0.0:
                raise ValueError(f"V-trace {label} must be positive, got {value}.")
        self.gamma = float(gamma)
        self.rho_bar = float(rho_bar)
        self.c_bar = float(c_bar)
        self.rho_bar_pg = float(rho_bar if rho_bar_pg is None else rho_bar_pg)
        self.vtrace_lambda = float(vtrace_lambda)

    def check_input_spaces(self, method, spaces):
        """Every input is time-major ``[T, N]`` (float, or bool for the episode-end flags), same N."""
        check_time_major_inputs(spaces)

    @api
    def targets(self, behaviour_log_probs, target_log_probs, rewards, values, next_values, terminated, truncated):
        """``(vs, pg_advantages)``, both ``[T, N]`` and without gradient (see the class docstring)."""
        ops = self.ops
        sg = ops.stop_gradient
        target_log_probs, values, next_values = sg(target_log_probs), sg(values), sg(next_values)
        not_terminal = 1.0 - ops.cast(terminated, "float32")
        not_done = not_terminal * (1.0 - ops.cast(truncated, "float32"))
        ratio = ops.exp(target_log_probs - behaviour_log_probs)
        rho = ops.clip(ratio, 0.0, self.rho_bar)  # ratio >= 0: min(rho_bar, ratio)
        c = self.vtrace_lambda * ops.clip(ratio, 0.0, self.c_bar)
        deltas = rho * (rewards + self.gamma * not_terminal * next_values - values)

        # vs_t - V(x_t), backwards in time; ``carry`` holds vs_{t+1} - V(x_{t+1}).
        carry = ops.zeros_like(deltas[0])
        backwards = []
        for t in reversed(range(int(deltas.shape[0]))):
            carry = deltas[t] + self.gamma * c[t] * not_done[t] * carry
            backwards.append(carry)
        vs_minus_v = ops.stack(backwards[::-1], axis=0)
        vs = values + vs_minus_v

        # vs_{t+1}: the next step's target where the episode goes on inside the rollout, else V(x_{t+1}).
        following = ops.concat([vs_minus_v[1:], ops.zeros_like(vs_minus_v[:1])], axis=0)
        vs_next = next_values + not_done * following
        rho_pg = ops.clip(ratio, 0.0, self.rho_bar_pg)
        pg_advantages = rho_pg * (rewards + self.gamma * not_terminal * vs_next - values)
        return sg(vs), sg(pg_advantages)
