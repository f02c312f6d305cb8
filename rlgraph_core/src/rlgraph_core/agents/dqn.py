"""DQN and its family: double Q, dueling heads, n-step returns, prioritized replay.

All four are switches in :class:`DQNConfig`; the algorithm is composed from backend-neutral
components (Q-network, DQN loss, epsilon-greedy, target sync) and runs on any backend.

One update round of K gradient steps, as the fused program of static mode runs it
(:meth:`DQNAgent._round_step`; the step-by-step loop does the same, one call at a time)::

    sample K batches from replay                                  (off_policy.py, up front)
    for k in 0..K-1:
        loss, |TD| = DQNLoss(Q, Q_target, batch_k)                (components/dqn_loss.py)
        one optimizer step on loss
        if update number (updates + k + 1) is a multiple of target_update_interval:
            Q_target <- (1 - tau) Q_target + tau Q
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from pydantic import Field, SerializeAsAny

from rlgraph_core.agents.off_policy import OffPolicyAgent, OffPolicyConfig, transition_spaces
from rlgraph_core.components.dqn_loss import DQNLoss
from rlgraph_core.components.exploration import EpsilonGreedySettings, check_draws_legal
from rlgraph_core.components.masks import MASK_KEY, check_legal, mask_layout, masked_logits, split_observation
from rlgraph_core.components.network import NetworkSpec
from rlgraph_core.components.q_head import QNetwork
from rlgraph_core.components.schedules import ConstantSchedule, ExponentialSchedule, LinearSchedule
from rlgraph_core.agents.observations import check_observation_space, to_obs_array
from rlgraph_core.agents.support import action_space_hint, refuse_recurrent_problem
from rlgraph_core.agents.slots import ComponentResolver, make_exploration, make_slot_component, network_maker
from rlgraph_core.components.settings import ComponentSettings, ExplorationSettings, NetworkSettings, Slot
from rlgraph_core.components.target_sync import TargetSync
from rlgraph_core.config.common import ComponentSlot, OptimizerConfig
from rlgraph_core.errors import ConfigError
from rlgraph_core.graph import Component, api, build
from rlgraph_core.memories.obs import batch_len
from rlgraph_core.spaces import Discrete, FloatBox, IntBox


SCHEDULE_TYPES = ("constant", "linear", "exponential")
SCHEDULE_MODELS = (ConstantSchedule, LinearSchedule, ExponentialSchedule)


def epsilon_shorthand(value: Any) -> Any:
    """``exploration: 0.1`` or ``exploration: {type: linear, ...}`` (a float or a schedule, the
    older form) means epsilon-greedy with that epsilon."""
    if isinstance(value, (int, float, *SCHEDULE_MODELS)) and not isinstance(value, bool):
        return {"type": "epsilon_greedy", "epsilon": value}
    if isinstance(value, dict) and value.get("type") in SCHEDULE_TYPES:
        return {"type": "epsilon_greedy", "epsilon": value}
    return value


#: DQN's network slot: the trunk of the online and the target Q-network (default: ``mlp``).
NetworkSlot = Annotated[SerializeAsAny[ComponentSettings], Slot("network", NetworkSettings, NetworkSpec)]
#: DQN's exploration slot (default: ``epsilon_greedy``; a float or a schedule is its epsilon).
ExplorationSlot = Annotated[
    SerializeAsAny[ComponentSettings],
    Slot("exploration", ExplorationSettings, EpsilonGreedySettings, shorthand=epsilon_shorthand),
]


class DQNConfig(OffPolicyConfig):
    """Hyperparameters of the DQN family (the schedule and memory fields are :class:`OffPolicyConfig`'s).

    The defaults are the default run's (``rlgraph config`` prints them; the shipped
    ``dqn_cartpole.yaml`` spells them out, and a test keeps the two equal): RL-Zoo's tuning for
    CartPole, with large update rounds (``train_freq`` 256 env steps, 128 gradient steps each),
    which keeps a CPU run fast. For harder tasks start from a shipped config (``dqn_pong``).
    """

    capabilities: ClassVar[frozenset[str]] = frozenset({"replay", "exploration"})
    #: A stateful network (``network: {type: lstm | gru}``) makes the assembly build
    #: :class:`~rlgraph_core.agents.recurrent_dqn.RecurrentDQNAgent` (R2D2-style sequence replay).
    recurrent_networks: ClassVar[bool] = True

    type: Literal["dqn"] = "dqn"
    network: NetworkSlot = Field(
        default_factory=lambda: NetworkSpec(hidden=[256, 256]),
        description="network component of the Q-networks (type: mlp, or a plugin's)",
    )
    dueling: bool = False
    double_q: bool = True
    loss_type: Literal["huber", "mse"] = "huber"
    exploration: ExplorationSlot = Field(
        default_factory=lambda: EpsilonGreedySettings(epsilon=LinearSchedule(start=1.0, end=0.04, steps=16_000)),
        description="exploration component (type: epsilon_greedy, or a plugin's); a float or a schedule "
        "is epsilon-greedy's epsilon",
    )
    preprocessor: ComponentSlot = Field(None, description="observation preprocessor component (e.g. box_normalize)")
    train_freq: int = Field(256, gt=0, description="env steps between update rounds")
    gradient_steps: int = Field(128, gt=0, description="gradient steps per update round")
    target_update_interval: int = Field(128, gt=0, description="gradient steps between target updates")
    optimizer: OptimizerConfig = Field(
        default_factory=lambda: OptimizerConfig(learning_rate=0.0023, max_grad_norm=10.0)
    )
    burn_in: int = Field(
        0,
        ge=0,
        description="recurrent network only: leading steps of each replayed sequence of network.seq_len steps "
        "that only warm up the state, without training (R2D2's burn-in); less than seq_len",
    )
    priority_eta: float = Field(
        0.9,
        ge=0,
        le=1,
        description="recurrent network with prioritized replay: a sequence's priority is "
        "eta * max |TD| + (1 - eta) * mean |TD| over its trained steps (R2D2)",
    )

    def validate_run(self, env, train) -> None:
        """A recurrent network replays sequences of ``network.seq_len`` steps: ``burn_in`` below it,
        n-step returns that fit its trained steps; ``burn_in`` needs a recurrent network.

        Raises:
            ConfigError: one paragraph naming the fields and what would fit.
        """
        net = self.network
        if not getattr(net, "stateful", False):
            if self.burn_in:
                raise ConfigError(
                    f"'agent.burn_in' = {self.burn_in} warms up a recurrent state before each replayed sequence, "
                    f"but 'agent.network.type' = '{net.type}' carries no state; set burn_in: 0, or use "
                    f"network: {{type: lstm}} (or gru) to train on sequences."
                )
            return
        seq_len = int(getattr(net, "seq_len"))
        problem = None
        if self.burn_in >= seq_len:
            problem = (
                f"'agent.burn_in' = {self.burn_in} is not shorter than 'agent.network.seq_len' = {seq_len}: the "
                f"first burn_in steps of each replayed sequence only warm up the state, so no step would be "
                f"trained on; use a burn_in below seq_len (R2D2: 40 of 80), e.g. {seq_len // 2}"
            )
        elif self.n_step > seq_len - self.burn_in:
            problem = (
                f"'agent.n_step' = {self.n_step} is longer than the {seq_len - self.burn_in} trained steps of a "
                f"replayed sequence ('agent.network.seq_len' = {seq_len} minus 'agent.burn_in' = {self.burn_in}): "
                f"n-step returns are summed inside a sequence; lower n_step or raise seq_len"
            )
        refuse_recurrent_problem(problem, self.preprocessor, net)


class DQNGraph(Component):
    """The root component of DQN: policy and target Q-networks, loss, exploration, sync.

    The network, exploration and preprocessor are the components ``config`` names, resolved
    with ``components`` (the assembly's resolver; None: rlgraph-core's own).
    """

    def __init__(
        self,
        config: DQNConfig,
        obs_space: FloatBox,
        num_actions: int,
        seed: int,
        components: ComponentResolver | None = None,
    ):
        super().__init__("dqn")
        self.num_actions = num_actions
        self.double_q = config.double_q
        # A legal-action mask in the observation goes to the heads; the networks see the rest.
        self.mask_layout = mask_layout(obs_space, Discrete(num_actions), "DQN")
        policy_space = obs_space if self.mask_layout is None else self.mask_layout.policy_space

        def preprocessor():
            return make_slot_component(
                config.preprocessor, policy_space, components, field="agent.preprocessor", name="preprocessor"
            )

        network = network_maker(config.network, components, field="agent.network")
        self.policy = QNetwork(network, num_actions, config.dueling, preprocessor(), seed, name="policy")
        self.target = QNetwork(network, num_actions, config.dueling, preprocessor(), seed, name="target").freeze()
        self.dqn_loss = DQNLoss(config.loss_type, config.double_q)
        self.exploration = make_exploration(
            config.exploration, components, field="agent.exploration", num_actions=num_actions
        )
        self.target_sync = TargetSync(self.policy, self.target, config.tau)
        self.add_components(self.policy, self.target, self.dqn_loss, self.exploration, self.target_sync)

    def _q(self, network, obs):
        """``(Q-values, legal-action mask or None)`` of ``network`` on a batch of observations."""
        obs, mask = split_observation(obs, self.mask_layout)
        return network.call(obs), mask

    @api
    def act(self, obs, noise, value):
        """Exploring actions: the exploration component's choice from the (legal) Q-values."""
        q, mask = self._q(self.policy, obs)
        return self.exploration.explore(masked_logits(self.ops, q, mask), noise, value)

    @api
    def greedy(self, obs):
        """Greedy actions (the best legal one where the observation holds a mask)."""
        q, mask = self._q(self.policy, obs)
        return self.ops.argmax(masked_logits(self.ops, q, mask), axis=-1)

    @api
    def q_values(self, obs):
        """Q-values of the online network (illegal actions at ``ILLEGAL_LOGIT`` where masked)."""
        q, mask = self._q(self.policy, obs)
        return masked_logits(self.ops, q, mask)

    def _td(self, obs, actions, rewards, next_obs, terminals, discounts, weights):
        """``(loss, |TD|, Q(s), legal-action mask of s or None)`` of a batch: what :meth:`loss`
        returns, and the Q-values a subclass adds terms from (CQL's regulariser)."""
        q, mask = self._q(self.policy, obs)
        q_next_target, next_mask = self._q(self.target, next_obs)
        q_next_online = self._q(self.policy, next_obs)[0] if self.double_q else q_next_target
        masked = () if next_mask is None else (next_mask,)
        loss, td = self.dqn_loss.loss(
            q, actions, rewards, terminals, discounts, q_next_target, q_next_online, weights, *masked
        )
        return loss, td, q, mask

    @api
    def loss(self, obs, actions, rewards, next_obs, terminals, discounts, weights):
        """DQN loss and |TD| for a batch of (n-step) transitions."""
        loss, td, _, _ = self._td(obs, actions, rewards, next_obs, terminals, discounts, weights)
        return loss, td

    @api
    def sync_target(self):
        """Synchronise the target network (hard or Polyak, as configured)."""
        return self.target_sync.sync()


class DQNAgent(OffPolicyAgent):
    """Deep Q-learning (Mnih et al. 2015) with double Q, dueling, n-step and PER switches.

    The replay memory, update schedule, target schedule, priorities and checkpoint state are
    :class:`~rlgraph_core.agents.off_policy.OffPolicyAgent`'s; this class holds the Q graph,
    acting through the configured exploration (epsilon-greedy by default) and the loss step.
    """

    supports_fused_rounds = True
    #: The root component class (a subclass may extend the loss, as CQL does).
    graph_class: type[DQNGraph] = DQNGraph

    def _setup_model(self) -> None:
        config, observation_space, action_space, backend, seed, components = self._setup_arguments()
        if not isinstance(action_space, Discrete):
            raise ConfigError(
                f"DQN supports only a single Discrete action space (n actions, like CartPole's); this "
                f"environment's is {action_space!r}. {action_space_hint(action_space)}"
            )
        #: where the observation holds a legal-action mask (None: unmasked; components/masks.py)
        self.mask = mask_layout(observation_space, action_space, "DQN")
        check_observation_space(
            observation_space if self.mask is None else self.mask.policy_space, config.network, "DQN"
        )
        super()._setup_model()
        self.num_actions = int(action_space.n)
        self.action_start = int(action_space.start)
        self.graph = self.graph_class(config, observation_space, self.num_actions, seed, components)
        self.exploration = self.graph.exploration
        if self.mask is not None:
            check_draws_legal(self.exploration)

        obs_b = observation_space.with_batch_rank()
        act_b = IntBox(0, self.num_actions - 1, shape=()).with_batch_rank()
        self.build_report = build(
            self.graph,
            {
                "act": {
                    "obs": obs_b,
                    "noise": FloatBox(shape=self.exploration.noise_shape).with_batch_rank(),
                    "value": FloatBox(shape=()),
                },
                "greedy": {"obs": obs_b},
                "q_values": {"obs": obs_b},
                "loss": transition_spaces(obs_b, act_b),
                "sync_target": {},
            },
            backend,
            compile_apis=("act", "greedy", "q_values"),
        )
        self._setup_train_step()
        #: (exploration value, its tensor) of the last network act
        self._value_cache: tuple[float, Any] = (float("nan"), None)

    def _setup_train_step(self) -> None:
        """After the build: the target network starts equal to the online one, and the train step
        minimises the graph's ``loss`` over the online network's trainable variables."""
        self.graph.sync_target()
        self._params = list(self.graph.policy.variables(trainable_only=True).values())
        self.train_step = self.backend.train_step(
            self.graph.loss, self._params, self.config.optimizer.backend_spec(self.lr_schedule(0))
        )
        self._eval_loss = None

    # --- acting ----------------------------------------------------------------------------
    def policy_outputs(self, obs):
        """``{"action": argmax Q (+ the action space's start), "q_values": Q}`` (see :meth:`Agent.policy_outputs`)."""
        q = self.graph.q_values(obs)
        action = self.backend.ops.argmax(q, axis=-1)
        return {"action": action + self.action_start if self.action_start else action, "q_values": q}

    def act(self, obs, explore=True):
        """Exploring (``explore``, e.g. epsilon-greedy) or greedy env actions for a batch of observations."""
        to_t = self.backend.to_tensor
        obs = to_obs_array(obs, self.observation_space)
        legal = None
        if self.mask is not None:
            legal = obs[MASK_KEY]
            check_legal(legal, self.timesteps)
        if not explore:
            return self.backend.to_numpy(self.graph.greedy(to_t(obs))) + self.action_start
        if legal is None:
            noise = self.exploration.draw_noise(self.rng, batch_len(obs))
        else:  # random actions among the legal ones only
            noise = self.exploration.draw_noise(self.rng, batch_len(obs), legal=legal)
        noise = np.asarray(noise, np.float32)
        value = np.float32(self.exploration.value(self.timesteps))
        chosen = self.exploration.actions_without_values(noise, float(value))
        if chosen is not None:
            # The actions do not depend on the Q-values (every env explores): skip the network.
            # The same noise is drawn either way, so a seed gives the same actions as always.
            return np.asarray(chosen, np.int64) + self.action_start
        if value != self._value_cache[0]:  # constant once the schedule has ended: convert it once
            self._value_cache = (value, to_t(value))
        actions = self.graph.act(to_t(obs), to_t(noise), self._value_cache[1])
        return self.backend.to_numpy(actions) + self.action_start

    def _stored_actions(self, actions):
        """Env actions shifted to ``[0, n)``, in the action space's dtype."""
        return (np.asarray(actions) - self.action_start).astype(self.action_space.dtype, copy=False)

    def _stored_action_space(self):
        """Action indices ``0 .. n-1`` in the action space's dtype."""
        return Discrete(self.num_actions, dtype=self.action_space.dtype)

    # --- learning --------------------------------------------------------------------------
    def train_steps(self):
        """The one train step, minimising the DQN loss over the online Q-network."""
        return {"q": self.train_step}

    def _loss_inputs(self, sample):
        return self._transition_tensors(sample)

    def _gradient_step(self, sample):
        loss, td = self.train_step(*self._loss_inputs(sample))
        return {"loss": loss}, td

    def _sync_target(self):
        self.graph.sync_target()

    # --- fused rounds (module docstring) ---------------------------------------------------
    def _round_arrays(self, samples):
        """The loss inputs of the K batches, stacked ``[K, B, ...]``."""
        return self._stacked_transitions(samples)

    def _round_step(self, obs, actions, rewards, next_obs, terminals, discounts, weights, due):
        """One step of the fused round: the DQN update, then the target sync where ``due``."""
        loss, td = self.train_step.inline(obs, actions, rewards, next_obs, terminals, discounts, weights)
        self.graph.target_sync.sync_if(due)
        return loss, td

    def _round_result(self, outputs):
        loss, td = outputs
        return {"loss": loss[-1]}, td

    def _evaluate_loss(self, sample):
        if self._eval_loss is None:
            self._eval_loss = self.backend.function(self.graph.loss)  # traced/compiled once
        return self._eval_loss(*self._loss_inputs(sample))

    def _td_errors(self, batch):
        return self.backend.to_numpy(self._evaluate_loss(batch)[1])

    def loss_on(self, batch: dict[str, np.ndarray]) -> float:
        """The loss on ``batch`` without updating (for tests and diagnostics)."""
        return float(self.backend.to_numpy(self._evaluate_loss(batch)[0]))

    def metrics(self) -> dict[str, float]:
        """Latest training metrics: the exploration parameter (epsilon ...), learning rate, updates and the last loss."""
        return {self.exploration.parameter: self.exploration.value(self.timesteps), **super().metrics()}

    # --- weights ---------------------------------------------------------------------------
    def variables(self):
        """Online and target Q-network variables (and preprocessor constants), by scope path."""
        return dict(self.graph.variables())
