"""Advantage Actor-Critic (A2C: the synchronous variant of Mnih et al. 2016's A3C).

The whole algorithm, top to bottom::

    repeat:
        collect n_steps steps of N envs with pi                 (act / observe)
        V(s_{t+1}) from the true next observation; 0 after termination
        A, R = GAE(r, V, V_next, terminated, truncated)         (gae_lambda = 1: n-step returns)
        one optimizer step on A2CLoss over the whole rollout    (components/pg_losses.py)
        update the observation normaliser (optional)

Defaults follow Stable-Baselines3: RMSprop (alpha 0.99, eps 1e-5), lr 7e-4, n_steps 5,
gae_lambda 1, no advantage normalisation, gradient-norm clip 0.5.

One step per rollout is already one compiled program in static mode, so A2C has no update round
to fuse (PPO's ``fuse_rounds`` has no counterpart here).
"""

from __future__ import annotations

from typing import ClassVar, Literal, Optional

from pydantic import Field

from rlgraph_core.agents.on_policy import (
    OnPolicyAgent,
    OnPolicyConfig,
    OnPolicyGraph,
    OnPolicyOptimizerConfig,
)
from rlgraph_core.components.pg_losses import A2CLoss
from rlgraph_core.config.common import ScheduleOrFloat
from rlgraph_core.graph import api


class A2COptimizerConfig(OnPolicyOptimizerConfig):
    """RMSprop with the A2C defaults of Stable-Baselines3 (eps 1e-5 from the on-policy
    defaults, smoothing alpha 0.99 from :class:`~rlgraph_core.config.common.OptimizerConfig`)."""

    type: Literal["adam", "rmsprop", "sgd"] = "rmsprop"
    learning_rate: ScheduleOrFloat = Field(7e-4, description="float or a schedule over env steps")
    max_grad_norm: Optional[float] = Field(0.5, gt=0, description="global gradient-norm clip; null disables")


class A2CConfig(OnPolicyConfig):
    """Hyperparameters of A2C (defaults follow Stable-Baselines3)."""

    #: A stateful network (``network: {type: lstm | gru}``) makes the assembly build
    #: :class:`~rlgraph_core.agents.recurrent_a2c.RecurrentA2CAgent`, which learns on sequences.
    recurrent_networks: ClassVar[bool] = True

    type: Literal["a2c"] = "a2c"
    n_steps: int = Field(5, gt=0, description="env steps per env in each rollout")
    gae_lambda: float = Field(1.0, ge=0, le=1, description="1 = plain n-step returns")
    normalize_advantage: bool = Field(False, description="normalise advantages over each rollout")
    optimizer: A2COptimizerConfig = Field(default_factory=A2COptimizerConfig)


class A2CGraph(OnPolicyGraph):
    """The A2C root component: actor-critic, GAE and :class:`A2CLoss`."""

    @api
    def loss(self, obs, actions, advantages, returns):
        """A2C loss of a rollout (see :class:`~rlgraph_core.components.pg_losses.A2CLoss`)."""
        log_probs, entropy, values = self.policy.evaluate(obs, actions)
        return self.pg_loss.loss(log_probs, entropy, values, advantages, returns)


class A2CAgent(OnPolicyAgent):
    """A2C: one gradient step per rollout on the policy-gradient, value and entropy terms."""

    graph_class = A2CGraph
    algorithm = "a2c"

    def _make_loss(self, config):
        return A2CLoss(config.vf_coef, config.ent_coef, config.normalize_advantage)

    def _loss_spaces(self, obs_b, action_b, float_b):
        return {"obs": obs_b, "actions": action_b, "advantages": float_b, "returns": float_b}

    def _learn(self, rollout):
        """One step over the whole postprocessed rollout (module docstring)."""
        to_t, to_np = self.backend.to_tensor, self.backend.to_numpy
        advantages, returns = rollout["advantages"], rollout["returns"]
        out = self.train_step(
            to_t(self._flat(rollout["obs"])),
            to_t(self._flat(rollout["actions"])),
            to_t(self._flat(advantages)),
            to_t(self._flat(returns)),
        )
        self.updates += 1
        names = ("loss", "pg_loss", "vf_loss", "entropy")
        return {name: float(to_np(x)) for name, x in zip(names, out)}
