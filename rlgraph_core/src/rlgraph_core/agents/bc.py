"""Behaviour cloning: a policy fitted to a dataset's actions (discrete and continuous).

The algorithm, top to bottom (one gradient step on a batch of the dataset)::

    discrete:    logits = policy(s)                  loss = mean(-log_softmax(logits)[a])
    continuous:  pred   = tanh(policy(s))            loss = mean(sum_d (pred_d - a_d)^2)
                 (the dataset's actions are stored scaled to [-1, 1]; acting scales back)

The policy is the configured network trunk (``mlp`` by default, ``cnn`` for images ...) with a
linear (discrete) or tanh (continuous) head; the loss is
:class:`~rlgraph_core.components.offline_losses.BCLoss`. Acting is greedy: the most likely
action, or the predicted one. The replay, update, checkpoint and learner-role machinery is
:class:`~rlgraph_core.agents.off_policy.OffPolicyAgent`'s; BC learns only from a dataset
(``train.executor: offline``). In static mode a round of the offline executor's updates runs as
one fused program (:meth:`BCAgent._round_step`), as DQN's and SAC's do.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import numpy as np
from pydantic import Field, SerializeAsAny

from rlgraph_core.agents.observations import check_observation_space, to_obs_array
from rlgraph_core.agents.off_policy import OffPolicyAgent, OffPolicyConfig
from rlgraph_core.agents.support import DiscreteOrBoxActions
from rlgraph_core.agents.slots import ComponentResolver, make_slot_component, network_maker
from rlgraph_core.components.distributions import scale_action
from rlgraph_core.components.network import DenseLayer, NetworkSpec
from rlgraph_core.components.offline_losses import BCLoss
from rlgraph_core.components.q_head import QNetwork
from rlgraph_core.components.settings import ComponentSettings, NetworkSettings, Slot
from rlgraph_core.config.common import ComponentSlot, OptimizerConfig
from rlgraph_core.errors import ConfigError
from rlgraph_core.graph import Component, api, build
from rlgraph_core.spaces import FloatBox

__all__ = ["BCAgent", "BCConfig", "BCGraph", "OFFLINE_EXECUTOR"]

#: The executor that trains agents from a dataset (registered by :mod:`rlgraph_core.offline`).
OFFLINE_EXECUTOR = "offline"

#: BC's network slot: the trunk of the policy (default: ``mlp``).
NetworkSlot = Annotated[SerializeAsAny[ComponentSettings], Slot("network", NetworkSettings, NetworkSpec)]


class BCConfig(OffPolicyConfig):
    """Hyperparameters of behaviour cloning (the batch, optimizer and memory fields are
    :class:`~rlgraph_core.agents.off_policy.OffPolicyConfig`'s; its schedule fields do not apply)."""

    capabilities: ClassVar[frozenset[str]] = frozenset()

    type: Literal["bc"] = "bc"
    network: NetworkSlot = Field(
        default_factory=lambda: NetworkSpec(hidden=[256, 256]),
        description="network component of the policy (type: mlp, or a plugin's)",
    )
    preprocessor: ComponentSlot = Field(None, description="observation preprocessor component (e.g. box_normalize)")
    batch_size: int = Field(256, gt=0)
    optimizer: OptimizerConfig = Field(default_factory=lambda: OptimizerConfig(learning_rate=1e-3, max_grad_norm=10.0))

    def validate_run(self, env, train) -> None:
        """BC imitates a dataset: it runs under the offline executor only.

        Raises:
            ConfigError: naming ``train.executor`` and how to give a dataset.
        """
        if train.executor != OFFLINE_EXECUTOR:
            raise ConfigError(
                f"'train.executor' = '{train.executor}': behaviour cloning (agent.type bc) learns from a dataset, "
                f"not from its own env steps; set train.executor: {OFFLINE_EXECUTOR} and executor.dataset: PATH (a "
                f"Minari dataset, e.g. one an rlgraph run recorded with train.record_dataset), or in Python "
                f"rl.make('bc', dataset=PATH)."
            )


class BCGraph(Component):
    """The root component of BC: the policy network and :class:`BCLoss`.

    Discrete actions: the policy is a trunk with a linear head of ``num_actions`` logits (a
    :class:`~rlgraph_core.components.q_head.QNetwork` whose outputs are read as logits).
    Continuous: a trunk with a tanh head of ``action_dim`` outputs in ``[-1, 1]``.
    """

    def __init__(
        self,
        config: BCConfig,
        obs_space,
        num_outputs: int,
        discrete: bool,
        seed: int,
        components: ComponentResolver | None = None,
    ):
        super().__init__("bc")
        self.discrete = discrete
        preprocessor = make_slot_component(
            config.preprocessor, obs_space, components, field="agent.preprocessor", name="preprocessor"
        )
        maker = network_maker(config.network, components, field="agent.network")
        if discrete:
            self.policy = QNetwork(maker, num_outputs, False, preprocessor, seed, name="policy")
            self.add_components(self.policy)
        else:
            rng = np.random.default_rng(seed)
            self.preprocessor = preprocessor
            self.trunk = maker(name="trunk", rng=rng)
            self.head = DenseLayer(num_outputs, "tanh", maker.initializer, rng, name="head")
            self.add_components(*([preprocessor] if preprocessor else []), self.trunk, self.head)
        self.bc_loss = BCLoss(discrete)
        self.add_components(self.bc_loss)

    def _outputs(self, obs):
        if self.discrete:
            return self.policy.call(obs)
        if self.preprocessor is not None:
            obs = self.preprocessor.call(obs)
        return self.head.call(self.trunk.call(obs))

    @api
    def outputs(self, obs):
        """Logits ``[B, num_actions]`` (discrete) or actions in ``[-1, 1]`` ``[B, action_dim]``."""
        return self._outputs(obs)

    @api
    def greedy(self, obs):
        """The most likely action index (discrete) or the predicted action in ``[-1, 1]``."""
        out = self._outputs(obs)
        return self.ops.argmax(out, axis=-1) if self.discrete else out

    @api
    def loss(self, obs, actions, weights):
        """BC loss and per-sample loss of a batch of (observation, dataset action)."""
        return self.bc_loss.loss(self._outputs(obs), actions, weights)


class BCAgent(DiscreteOrBoxActions, OffPolicyAgent):
    """Behaviour cloning on a Discrete or a rank-1 float Box action space (finite bounds).

    Replay stores a discrete action as its index ``0 .. n-1`` and a continuous one scaled to
    ``[-1, 1]`` (as SAC does); :meth:`act` returns env actions.
    """

    supports_fused_rounds = True

    def _setup_model(self) -> None:
        config, observation_space, action_space, backend, seed, components = self._setup_arguments()
        self.num_outputs, act_b = self._setup_actions(action_space, "Behaviour cloning (agent.type bc)")
        check_observation_space(observation_space, config.network, "BC")
        super()._setup_model()
        self.graph = BCGraph(config, observation_space, self.num_outputs, self.discrete, seed, components)
        obs_b = observation_space.with_batch_rank()
        self.build_report = build(
            self.graph,
            {
                "outputs": {"obs": obs_b},
                "greedy": {"obs": obs_b},
                "loss": {"obs": obs_b, "actions": act_b, "weights": FloatBox(shape=()).with_batch_rank()},
            },
            backend,
            compile_apis=("outputs", "greedy"),
        )
        self._params = list(self.graph.variables(trainable_only=True).values())
        self.train_step = backend.train_step(
            self.graph.loss, self._params, config.optimizer.backend_spec(self.lr_schedule(0))
        )
        self._eval_loss = None

    # --- acting ----------------------------------------------------------------------------
    def policy_outputs(self, obs):
        """``{"action": ..., "logits" | "mean": ...}`` of the greedy policy (see :meth:`Agent.policy_outputs`)."""
        ops = self.backend.ops
        out = self.graph.outputs(obs)
        if self.discrete:
            action = ops.argmax(out, axis=-1)
            return {"action": action + self.action_start if self.action_start else action, "logits": out}
        low, high = ops.constant(self.low.astype(np.float32)), ops.constant(self.high.astype(np.float32))
        return {"action": (out + 1.0) * (0.5 * (high - low)) + low, "mean": out}

    def act(self, obs, explore=True):
        """Greedy env actions for a batch of observations (BC does not explore: ``explore`` is ignored)."""
        greedy = self.backend.to_numpy(
            self.graph.greedy(self.backend.to_tensor(to_obs_array(obs, self.observation_space)))
        )
        if self.discrete:
            return np.asarray(greedy, np.int64) + self.action_start
        return scale_action(np.asarray(greedy, np.float64), self.low, self.high).astype(np.float32)

    # --- learning --------------------------------------------------------------------------
    def train_steps(self):
        """The one train step, minimising the BC loss over the policy."""
        return {"policy": self.train_step}

    def _loss_inputs(self, sample):
        to_t = self.backend.to_tensor
        weights, _ = self._defaults(sample)
        return to_t(sample["obs"]), to_t(sample["actions"]), to_t(weights)

    def _gradient_step(self, sample):
        loss, per_sample = self.train_step(*self._loss_inputs(sample))
        return {"loss": loss}, per_sample

    def _sync_target(self):
        """BC has no target network."""

    # --- fused rounds (static mode: one program per round of the offline executor) -----------
    def _round_arrays(self, samples):
        """The K batches' observations, dataset actions and weights, stacked ``[K, B, ...]``."""
        return [np.stack([s[k] for s in samples]) for k in ("obs", "actions")] + [
            np.stack([self._defaults(s)[0] for s in samples])
        ]

    def _round_step(self, obs, actions, weights, due):
        """One step of the fused round: the BC update (no target, so ``due`` is unused)."""
        return self.train_step.inline(obs, actions, weights)

    def _round_result(self, outputs):
        loss, per_sample = outputs
        return {"loss": loss[-1]}, per_sample

    def _td_errors(self, batch):
        """The per-sample BC loss (what a prioritized memory would rank by)."""
        if self._eval_loss is None:
            self._eval_loss = self.backend.function(self.graph.loss)
        return self.backend.to_numpy(self._eval_loss(*self._loss_inputs(batch))[1])

    def loss_on(self, batch: dict[str, np.ndarray]) -> float:
        """The BC loss on ``batch`` (stored actions) without updating (for tests and diagnostics)."""
        if self._eval_loss is None:
            self._eval_loss = self.backend.function(self.graph.loss)
        return float(self.backend.to_numpy(self._eval_loss(*self._loss_inputs(batch))[0]))

    # --- weights ---------------------------------------------------------------------------
    def variables(self):
        """The policy's variables (and preprocessor constants), by scope path."""
        return dict(self.graph.variables())
