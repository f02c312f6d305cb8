"""Conservative Q-learning for continuous actions: SAC plus the CQL regulariser (Kumar et al. 2020).

The critic's loss of one gradient step, top to bottom (B = batch, M = ``cql_samples``, d = action
dimensions; everything else, the actor and temperature steps included, is SAC's)::

    sac, |TD|, q1, q2 = SACLoss.critic_loss(batch, a' ~ pi(s'))       (components/sac_loss.py)
    a_rand            ~ U([-1, 1]^d)                 M per state       (numpy, self.rng)
    a_pi,  logp_pi    ~ pi(. | s)                    M per state       (reparameterised, no gradient)
    a_pi', logp_pi'   ~ pi(. | s')                   M per state
    for each critic Qi:
        cql_i = ContinuousCQLRegularizer(Qi(s, a), Qi(s, a_rand), Qi(s, [a_pi, a_pi']), [logp_pi, logp_pi'])
    loss = sac + cql_alpha * (cql_1 + cql_2)                           (components/offline_losses.py)

The importance-sampled logsumexp is CQL(H) as the paper's appendix F writes it (and as d3rlpy and
CORL implement it). The regulariser keeps the critics' values of actions the dataset never took
below those of the actions it did, so the actor, which climbs the critics, stays near the data
where the data are all there is. Offline, batches come from a dataset (``train.executor:
offline``); online the agent is SAC with a conservative critic (fine-tuning).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from rlgraph_core.agents.sac import SACAgent, SACConfig, SACGraph
from rlgraph_core.components.offline_losses import ContinuousCQLRegularizer
from rlgraph_core.graph import api
from rlgraph_core.errors import ConfigError
from rlgraph_core.spaces import Discrete, FloatBox

__all__ = ["CQLSACAgent", "CQLSACConfig", "CQLSACGraph"]


class CQLSACConfig(SACConfig):
    """SAC's hyperparameters plus ``cql_alpha`` and ``cql_samples`` (defaults as d3rlpy's CQL:
    conservative weight 5, 10 sampled actions of each kind)."""

    type: Literal["cql_sac"] = "cql_sac"  # type: ignore[assignment]
    cql_alpha: float = Field(5.0, ge=0, description="weight of the CQL regulariser on each critic (0: plain SAC)")
    cql_samples: int = Field(
        10, gt=0, description="M: uniform actions, and policy actions at s and at s', sampled per state"
    )


class CQLSACGraph(SACGraph):
    """:class:`~rlgraph_core.agents.sac.SACGraph` whose critic loss adds ``cql_alpha`` times the
    :class:`~rlgraph_core.components.offline_losses.ContinuousCQLRegularizer` of each critic."""

    def __init__(self, config: CQLSACConfig, action_space: FloatBox, seed: int, components=None):
        super().__init__(config, action_space, seed, components)
        self.cql_alpha = float(config.cql_alpha)
        self.samples = int(config.cql_samples)
        self.action_dim = int(action_space.shape[0])
        self.cql = ContinuousCQLRegularizer(self.action_dim)
        self.add_components(self.cql)

    def _repeat(self, x):
        """``[B, ...]`` -> ``[M * B, ...]``: M copies, sample-major (row ``i * B + b``)."""
        return self.ops.concat([x] * self.samples, axis=0)

    def _rows(self, x):
        """``[B, M, d]`` -> ``[M * B, d]`` in the row order of :meth:`_repeat`."""
        return self.ops.reshape(self.ops.transpose(x, [1, 0, 2]), [-1, self.action_dim])

    def _per_state(self, x, k: int):
        """``[k * M * B]`` -> ``[B, k * M]`` (each state's sampled values in a row)."""
        return self.ops.transpose(self.ops.reshape(x, [k * self.samples, -1]), [1, 0])

    @api
    def critic_loss(
        self,
        obs,
        actions,
        rewards,
        next_obs,
        terminals,
        discounts,
        weights,
        next_noise,
        random_actions,
        policy_noise,
        next_policy_noise,
    ):
        """``(loss, |TD|, cql)``: SAC's critic loss plus the regulariser (module docstring);
        ``random_actions`` ``[B, M, d]`` uniform in [-1, 1], the two noises ``[B, M, d]`` standard normal."""
        ops = self.ops
        loss, td, q1, q2 = self._critic_terms(
            obs, actions, rewards, next_obs, terminals, discounts, weights, next_noise
        )
        obs_m = self._repeat(obs)
        pi, logp = self.actor.sample(obs_m, self._rows(policy_noise))
        next_pi, next_logp = self.actor.sample(self._repeat(next_obs), self._rows(next_policy_noise))
        random_q = self.critic.call(obs_m, self._rows(random_actions))
        policy_q = self.critic.call(ops.concat([obs_m, obs_m], axis=0), ops.stop_gradient(ops.concat([pi, next_pi], 0)))
        log_probs = self._per_state(ops.concat([logp, next_logp], axis=0), 2)
        cql = 0.0
        for q_data, q_random, q_policy in zip((q1, q2), random_q, policy_q):
            part, _ = self.cql.loss(
                q_data, self._per_state(q_random, 1), self._per_state(q_policy, 2), log_probs, weights
            )
            cql = cql + part
        return loss + self.cql_alpha * cql, td, 0.5 * cql


class CQLSACAgent(SACAgent):
    """Continuous CQL: :class:`~rlgraph_core.agents.sac.SACAgent` with :class:`CQLSACGraph` as its
    root; each critic step also draws the M uniform actions and the policy noise of the regulariser."""

    graph_class = CQLSACGraph
    critic_extra_metrics = ("cql",)

    def _setup_model(self) -> None:
        action_space = self.action_space
        if isinstance(action_space, Discrete):
            raise ConfigError(
                f"'agent.type' = 'cql_sac' is continuous CQL (on SAC: the regulariser estimated from sampled "
                f"actions of a bounded Box), but this environment's action space is {action_space!r}: for "
                f"discrete actions use agent.type cql (on DQN: the logsumexp over every action) or iql, e.g. "
                f"rl.make('cql', dataset=PATH)."
            )
        super()._setup_model()

    def _critic_extra_spaces(self) -> dict:
        shape = (int(self.config.cql_samples), self.action_dim)
        return {
            "random_actions": FloatBox(-1.0, 1.0, shape=shape).with_batch_rank(),
            "policy_noise": FloatBox(shape=shape).with_batch_rank(),
            "next_policy_noise": FloatBox(shape=shape).with_batch_rank(),
        }

    def _critic_extra_noise(self, n: int) -> list[np.ndarray]:
        m, d = int(self.config.cql_samples), self.action_dim
        random_actions = self.rng.uniform(-1.0, 1.0, (n, m, d)).astype(np.float32)
        noise = self.rng.standard_normal((2, n, m, d), dtype=np.float32)
        return [random_actions, noise[0], noise[1]]
