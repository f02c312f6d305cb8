"""Conservative Q-learning for discrete actions: DQN plus the CQL regulariser (Kumar et al. 2020).

The loss of one gradient step, top to bottom::

    q            = Q(s)                                                # [B, A]
    td_loss, |TD| = DQNLoss(q, Q_target(s'), ...)                      (components/dqn_loss.py)
    cql          = mean(logsumexp_a q - q[a_data])                     (components/offline_losses.py)
    loss         = td_loss + cql_alpha * cql

Everything else (double Q, dueling, n-step, target schedule, replay, fused rounds, checkpoints)
is :class:`~rlgraph_core.agents.dqn.DQNAgent`'s. Offline, the batches come from a dataset
(``train.executor: offline``); the regulariser keeps the Q-values of actions the data never took
from overtaking those it did. Online it is DQN with a conservative term.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from rlgraph_core.agents.dqn import DQNAgent, DQNConfig, DQNGraph
from rlgraph_core.components.masks import masked_logits
from rlgraph_core.components.offline_losses import CQLRegularizer
from rlgraph_core.config.common import OptimizerConfig
from rlgraph_core.errors import ConfigError
from rlgraph_core.graph import api
from rlgraph_core.spaces import Discrete, FloatBox

__all__ = ["CQLAgent", "CQLConfig", "CQLGraph"]


class CQLConfig(DQNConfig):
    """DQN's hyperparameters plus ``cql_alpha``; the defaults suit learning from a dataset of a
    small control task (one gradient step per batch, a target copy every 100 steps)."""

    #: CQL's regulariser is written for single transitions: no recurrent network (yet).
    recurrent_networks: ClassVar[bool] = False

    type: Literal["cql"] = "cql"  # type: ignore[assignment]
    cql_alpha: float = Field(1.0, ge=0, description="weight of the CQL regulariser (0: plain DQN)")
    batch_size: int = Field(128, gt=0)
    learning_starts: int = Field(1_000, ge=0, description="env steps before the first update (online runs)")
    train_freq: int = Field(4, gt=0, description="env steps between update rounds (online runs)")
    gradient_steps: int = Field(1, gt=0, description="gradient steps per update round (online runs)")
    target_update_interval: int = Field(100, gt=0, description="gradient steps between target updates")
    loss_type: Literal["huber", "mse"] = "mse"
    optimizer: OptimizerConfig = Field(default_factory=lambda: OptimizerConfig(learning_rate=1e-3, max_grad_norm=10.0))


class CQLGraph(DQNGraph):
    """:class:`~rlgraph_core.agents.dqn.DQNGraph` whose loss adds ``cql_alpha`` times the
    :class:`~rlgraph_core.components.offline_losses.CQLRegularizer`."""

    def __init__(self, config: CQLConfig, obs_space, num_actions: int, seed: int, components=None):
        super().__init__(config, obs_space, num_actions, seed, components)
        self.cql_alpha = float(config.cql_alpha)
        self.cql = CQLRegularizer()
        self.add_components(self.cql)

    @api
    def loss(self, obs, actions, rewards, next_obs, terminals, discounts, weights):
        """Total loss, |TD| and the regulariser's value for a batch of (n-step) transitions; where the
        observation holds a legal-action mask, the logsumexp runs over the legal actions only."""
        td_loss, td, q, mask = self._td(obs, actions, rewards, next_obs, terminals, discounts, weights)
        cql, _ = self.cql.loss(masked_logits(self.ops, q, mask), actions, weights)
        return td_loss + self.cql_alpha * cql, td, cql


class CQLAgent(DQNAgent):
    """Discrete CQL: :class:`~rlgraph_core.agents.dqn.DQNAgent` with :class:`CQLGraph` as its root."""

    graph_class = CQLGraph

    def _setup_model(self) -> None:
        action_space = self.action_space
        if not isinstance(action_space, Discrete):
            short = repr(action_space)
            short = short if len(short) <= 160 else short[:157] + "..."
            continuous = isinstance(action_space, FloatBox) and len(action_space.shape) == 1
            hint = (
                "for continuous actions use agent.type cql_sac (CQL on SAC: the same regulariser, estimated "
                "from sampled actions) or iql (implicit Q-learning), e.g. rl.make('cql_sac', dataset=PATH)"
                if continuous
                else "wrap the environment so that its actions are one Discrete space or a rank-1 float Box "
                "(a gymnasium.ActionWrapper), then use cql (Discrete) or cql_sac / iql (Box)"
            )
            raise ConfigError(
                f"'agent.type' = 'cql' is discrete CQL (on DQN: one Q-value per action, the logsumexp over all "
                f"of them), but this environment's action space is {short}: {hint}."
            )
        super()._setup_model()

    def _gradient_step(self, sample):
        loss, td, cql = self.train_step(*self._loss_inputs(sample))
        return {"loss": loss, "cql": cql}, td

    def _round_step(self, obs, actions, rewards, next_obs, terminals, discounts, weights, due):
        """One step of the fused round: the CQL update, then the target sync where ``due``."""
        loss, td, cql = self.train_step.inline(obs, actions, rewards, next_obs, terminals, discounts, weights)
        self.graph.target_sync.sync_if(due)
        return loss, td, cql

    def _round_result(self, outputs):
        loss, td, cql = outputs
        return {"loss": loss[-1], "cql": cql[-1]}, td
