"""Implicit Q-learning (Kostrikov et al. 2021) for bounded continuous and for discrete actions.

IQL never evaluates an action the dataset did not take: the state value is an *expectile* of the
(target) critics over the data's actions, the critics regress onto ``r + gamma V(s')``, and the
policy is extracted by advantage-weighted regression onto the data's actions. One gradient step,
top to bottom (three backend train steps, each over its own variables, in the order of the
paper's implementation; then the Polyak target critic)::

    q_t       = min(Q1_targ(s, a), Q2_targ(s, a))                       # no gradient
    value     : ExpectileLoss(q_t, V(s))             over V              (components/offline_losses.py)
    actor     : AdvantageWeightedLoss(log pi(a | s), q_t - V(s))  over pi  (V after its step)
    critic    : mean(w * ((Q1(s, a) - y)^2 + (Q2(s, a) - y)^2)),  y = r + discount * (1 - terminal) * V(s')
    if update number is a multiple of target_update_interval: Q_targ <- (1 - tau) Q_targ + tau Q

Continuous actions (a bounded Box): the policy is a Gaussian whose mean is ``tanh`` of a linear
head on the actor's trunk and whose log-std is one learned vector clipped to ``[-5, 2]`` (as
d3rlpy's and CORL's IQL), so the log-likelihood of any data action in [-1, 1] is finite; acting
greedily takes the mean. The critics are a :class:`~rlgraph_core.components.twin_q.TwinQNetwork`
pair on ``concat[s, a]``; replay stores actions scaled to the unit box (as SAC and BC do) and
:meth:`IQLAgent.act` maps the policy's back onto the env's bounds.

Discrete actions (``Discrete(n)``): the policy is a categorical over ``n`` logits (greedy: the
most likely action), each critic a Q-network with one output per action read at the data's
action (:class:`DiscreteTwinQ`); the losses are the same components.

V is its own network (``critic_network``'s shape) with one output. Observations are float
vectors. Offline the batches come from a dataset (``train.executor: offline``); online
(fine-tuning) an exploring agent samples its policy.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from rlgraph_core.agents.observations import check_observation_space, to_obs_array
from rlgraph_core.agents.off_policy import OffPolicyAgent, transition_spaces
from rlgraph_core.agents.sac import ActorCriticReplayConfig, ActorTargetApi
from rlgraph_core.agents.support import DiscreteOrBoxActions
from rlgraph_core.agents.slots import ComponentResolver, network_maker
from rlgraph_core.components.distributions import Categorical, DiagGaussian, scale_action
from rlgraph_core.components.network import DenseLayer, NetworkMaker
from rlgraph_core.components.offline_losses import AdvantageWeightedLoss, ExpectileLoss
from rlgraph_core.components.q_head import QNetwork
from rlgraph_core.components.target_sync import TargetSync
from rlgraph_core.components.twin_q import TwinQNetwork
from rlgraph_core.graph import Component, api, build
from rlgraph_core.memories.obs import batch_len
from rlgraph_core.spaces import FloatBox

__all__ = ["CategoricalPolicy", "DiscreteTwinQ", "IQLAgent", "IQLConfig", "IQLGraph", "TanhMeanGaussianPolicy"]

#: clip range of the policy's log-std (d3rlpy's IQL: [-5, 2])
LOG_STD_BOUNDS = (-5.0, 2.0)


class IQLConfig(ActorCriticReplayConfig):
    """Hyperparameters of IQL (defaults as the paper's locomotion settings and d3rlpy's IQL:
    expectile 0.7, temperature 3, weights clipped at 100, Adam 3e-4, batch 256, Polyak 0.005)."""

    type: Literal["iql"] = "iql"
    expectile: float = Field(
        0.7, gt=0, lt=1, description="tau of the value's expectile regression (0.5: mean, -> 1: in-data max)"
    )
    temperature: float = Field(
        3.0, ge=0, description="beta of the advantage weights exp(beta * (Q - V)) (0: behaviour cloning)"
    )
    max_weight: float = Field(100.0, gt=0, description="clip of the advantage weights")


class TanhMeanGaussianPolicy(Component):
    """``N(tanh(head(trunk(s))), exp(log_std)^2)``: a diagonal Gaussian whose mean lies in (-1, 1)
    and whose log-std is one learned, state-independent vector clipped to ``log_std_bounds``.

    Unlike SAC's squashed Gaussian, the density of a data action at the box's edge is finite, which
    is what a log-likelihood of the dataset's actions (AWR) needs.
    """

    def __init__(
        self,
        maker: NetworkMaker,
        action_dim: int,
        seed: int = 0,
        log_std_bounds: tuple[float, float] = LOG_STD_BOUNDS,
        name: str = "actor",
    ):
        super().__init__(name)
        rng = np.random.default_rng(seed)
        self.action_dim = int(action_dim)
        self.log_std_bounds = (float(log_std_bounds[0]), float(log_std_bounds[1]))
        self.trunk = maker(name="trunk", rng=rng)
        self.mean = DenseLayer(self.action_dim, "tanh", maker.initializer, rng, name="mean")
        self.add_components(self.trunk, self.mean)

    def create_variables(self, input_spaces):
        self.log_std = self.make_variable("log_std", np.zeros(self.action_dim, np.float32))

    def _params(self, obs):
        mean = self.mean.call(self.trunk.call(obs))
        return mean, self.ops.clip(self.log_std, *self.log_std_bounds) + 0.0 * mean

    @api
    def log_prob(self, obs, actions):
        """``log pi(actions | obs)`` ``[B]`` for unit-box ``actions`` ``[B, d]``."""
        return DiagGaussian(self.ops).log_prob(*self._params(obs), actions)

    @api
    def sample_actions(self, obs, noise):
        """``clip(mean + std * noise, -1, 1)`` for standard-normal ``noise`` ``[B, d]``."""
        mean, log_std = self._params(obs)
        return self.ops.clip(mean + self.ops.exp(log_std) * noise, -1.0, 1.0)

    @api
    def deterministic(self, obs):
        """The mean, in (-1, 1)."""
        return self.mean.call(self.trunk.call(obs))


class CategoricalPolicy(Component):
    """A categorical policy over ``num_actions`` logits of a network trunk (IQL's discrete actor),
    with the API of :class:`TanhMeanGaussianPolicy`."""

    def __init__(self, maker: NetworkMaker, num_actions: int, seed: int = 0, name: str = "actor"):
        super().__init__(name)
        self.logits = QNetwork(maker, num_actions, seed=seed, name="logits")
        self.add_components(self.logits)

    @api
    def log_prob(self, obs, actions):
        """``log softmax(logits)[a]`` ``[B]`` for action indices ``[B]``."""
        return Categorical(self.ops).log_prob(self.logits.call(obs), actions)

    @api
    def sample_actions(self, obs, noise):
        """A sample (Gumbel-max) for uniform ``noise`` ``[B, num_actions]``."""
        return Categorical(self.ops).sample(self.logits.call(obs), noise)

    @api
    def deterministic(self, obs):
        """The most likely action."""
        return self.ops.argmax(self.logits.call(obs), axis=-1)


class DiscreteTwinQ(Component):
    """Two Q-networks with one output per action, read at given actions: ``call(obs, actions)`` is
    ``(Q1(s)[a], Q2(s)[a])``, the interface of :class:`~rlgraph_core.components.twin_q.TwinQNetwork`
    (both draw their initial weights from one generator seeded with ``seed``)."""

    def __init__(self, maker: NetworkMaker, num_actions: int, seed: int = 0, name: str = "twin_q"):
        super().__init__(name)
        self.q1 = QNetwork(maker, num_actions, seed=seed, name="q1")
        self.q2 = QNetwork(maker, num_actions, seed=seed + 1000, name="q2")
        self.add_components(self.q1, self.q2)

    @api
    def call(self, obs, actions):
        """``(Q1(s, a), Q2(s, a))``, each ``[B]``, for action indices ``[B]``."""
        return self.ops.gather_last(self.q1.call(obs), actions), self.ops.gather_last(self.q2.call(obs), actions)


class IQLGraph(ActorTargetApi, Component):
    """The root component of IQL: policy, V, online and target twin critics, the expectile and
    advantage-weighted losses and the Polyak target sync (module docstring)."""

    def __init__(
        self,
        config: IQLConfig,
        num_actions: int,
        discrete: bool,
        seed: int,
        components: ComponentResolver | None = None,
    ):
        super().__init__("iql")
        actor_network = network_maker(config.actor_network, components, field="agent.actor_network")
        critic_network = network_maker(config.critic_network, components, field="agent.critic_network")
        # Same seed for the online and the target critic: they start identical.
        if discrete:
            self.actor: Component = CategoricalPolicy(actor_network, num_actions, seed)
            self.critic: Component = DiscreteTwinQ(critic_network, num_actions, seed + 1, name="critic")
            self.critic_target = DiscreteTwinQ(critic_network, num_actions, seed + 1, name="critic_target")
        else:
            self.actor = TanhMeanGaussianPolicy(actor_network, num_actions, seed)
            self.critic = TwinQNetwork(critic_network, seed + 1, name="critic")
            self.critic_target = TwinQNetwork(critic_network, seed + 1, name="critic_target")
        self.critic_target.freeze()
        self.value = QNetwork(critic_network, 1, seed=seed + 2, name="value")
        self.expectile = ExpectileLoss(config.expectile)
        self.awr = AdvantageWeightedLoss(config.temperature, config.max_weight)
        self.target_sync = TargetSync(self.critic, self.critic_target, config.tau)
        self.add_components(
            self.actor, self.critic, self.critic_target, self.value, self.expectile, self.awr, self.target_sync
        )

    def _v(self, obs):
        return self.ops.squeeze(self.value.call(obs), -1)

    def _q_target(self, obs, actions):
        q1, q2 = self.critic_target.call(obs, actions)
        return self.ops.stop_gradient(self.ops.minimum(q1, q2))

    @api
    def value_loss(self, obs, actions, weights):
        """``(loss, Q_targ - V)``: the expectile regression of V(s) onto the target critics."""
        return self.expectile.loss(self._q_target(obs, actions), self._v(obs), weights)

    @api
    def actor_loss(self, obs, actions, weights):
        """``(loss, advantage weights)``: advantage-weighted log-likelihood of the data's actions."""
        advantages = self._q_target(obs, actions) - self.ops.stop_gradient(self._v(obs))
        return self.awr.loss(self.actor.log_prob(obs, actions), advantages, weights)

    @api
    def critic_loss(self, obs, actions, rewards, next_obs, terminals, discounts, weights):
        """``(loss, |TD|)``: both critics regress onto ``r + discount * (1 - terminal) * V(s')``."""
        ops = self.ops
        not_done = 1.0 - ops.cast(terminals, "float32")
        y = ops.stop_gradient(rewards + discounts * not_done * self._v(next_obs))
        q1, q2 = self.critic.call(obs, actions)
        td1, td2 = q1 - y, q2 - y
        loss = ops.reduce_mean(weights * (ops.square(td1) + ops.square(td2)))
        return loss, ops.stop_gradient(0.5 * (ops.abs(td1) + ops.abs(td2)))


class IQLAgent(DiscreteOrBoxActions, OffPolicyAgent):
    """Implicit Q-learning on a rank-1 float Box action space with finite bounds or a Discrete one
    (module docstring).

    Args: as every agent (``config`` an :class:`IQLConfig`; float-vector observations).
    """

    supports_fused_rounds = True

    def _setup_model(self) -> None:
        config, observation_space, action_space, backend, seed, components = self._setup_arguments()
        self.num_actions, act_b = self._setup_actions(action_space, "IQL (agent.type iql)")
        check_observation_space(observation_space, config.actor_network, "IQL", "agent.actor_network")
        check_observation_space(observation_space, config.critic_network, "IQL", "agent.critic_network")
        super()._setup_model()
        if self.discrete:
            noise_b = FloatBox(0.0, 1.0, shape=(self.num_actions,)).with_batch_rank()
        else:
            self.action_dim = self.num_actions
            noise_b = FloatBox(shape=(self.action_dim,)).with_batch_rank()
        self.graph = IQLGraph(config, self.num_actions, self.discrete, seed, components)

        obs_b = observation_space.with_batch_rank()
        float_b = FloatBox(shape=()).with_batch_rank()
        pair = {"obs": obs_b, "actions": act_b, "weights": float_b}
        self.build_report = build(
            self.graph,
            {
                "act": {"obs": obs_b, "noise": noise_b},
                "greedy": {"obs": obs_b},
                "value_loss": pair,
                "actor_loss": pair,
                "critic_loss": transition_spaces(obs_b, act_b),
                "sync_target": {},
            },
            backend,
            compile_apis=("act", "greedy"),
        )
        opt = config.optimizer.backend_spec(self.lr_schedule(0))
        graph = self.graph

        def trainable(component):
            return list(component.variables(trainable_only=True).values())

        self.value_step = backend.train_step(graph.value_loss, trainable(graph.value), opt)
        self.actor_step = backend.train_step(graph.actor_loss, trainable(graph.actor), opt)
        self.critic_step = backend.train_step(graph.critic_loss, trainable(graph.critic), opt)
        self._eval_critic = None

    def train_steps(self) -> dict:
        """The value, actor and critic train steps (in the order a gradient step runs them)."""
        return {"value": self.value_step, "actor": self.actor_step, "critic": self.critic_step}

    # --- acting ----------------------------------------------------------------------------
    def policy_outputs(self, obs):
        """``action`` (as ``act(obs, explore=False)``) and ``mean`` (unit box) or ``logits`` (see
        :meth:`Agent.policy_outputs`)."""
        ops = self.backend.ops
        actor = self.graph.actor
        if self.discrete:
            logits = actor.logits.call(obs)
            action = ops.argmax(logits, axis=-1)
            return {"action": action + self.action_start if self.action_start else action, "logits": logits}
        mean = actor.deterministic(obs)
        low, high = ops.constant(self.low.astype(np.float32)), ops.constant(self.high.astype(np.float32))
        return {"action": (mean + 1.0) * (0.5 * (high - low)) + low, "mean": mean}

    def act(self, obs, explore=True):
        """Env actions for a batch of observations: greedy (the mean, the most likely action) if not
        exploring, else a sample of the policy (uniformly random before ``learning_starts`` env
        steps, as SAC, for online runs)."""
        obs = to_obs_array(obs, self.observation_space)
        n = batch_len(obs)
        if explore and self.timesteps < self.config.learning_starts:
            if self.discrete:
                return self.rng.integers(0, self.num_actions, n) + self.action_start
            unit = self.rng.uniform(-1.0, 1.0, (n, self.action_dim))
        else:
            obs_t = self.backend.to_tensor(obs)
            if explore:
                if self.discrete:
                    noise = self.rng.uniform(1e-6, 1.0, (n, self.num_actions)).astype(np.float32)
                else:
                    noise = self.rng.standard_normal((n, self.action_dim), dtype=np.float32)
                unit = self.backend.to_numpy(self.graph.act(obs_t, self.backend.to_tensor(noise)))
            else:
                unit = self.backend.to_numpy(self.graph.greedy(obs_t))
        if self.discrete:
            return np.asarray(unit, np.int64) + self.action_start
        return scale_action(unit, self.low, self.high).astype(np.float32)

    # --- learning --------------------------------------------------------------------------
    def _gradient_step(self, sample):
        """One value, one actor and one critic update on ``sample`` (module docstring)."""
        obs, actions, rewards, next_obs, terminals, discounts, weights = self._transition_tensors(sample)
        value_loss, _ = self.value_step(obs, actions, weights)
        actor_loss, adv_weights = self.actor_step(obs, actions, weights)
        critic_loss, td = self.critic_step(obs, actions, rewards, next_obs, terminals, discounts, weights)
        out = {"value_loss": value_loss, "actor_loss": actor_loss, "critic_loss": critic_loss}
        return {**out, "adv_weights": adv_weights}, td

    def _round_arrays(self, samples):
        """The K batches' loss inputs stacked ``[K, B, ...]`` (IQL draws no noise)."""
        return self._stacked_transitions(samples)

    def _round_step(self, obs, actions, rewards, next_obs, terminals, discounts, weights, due):
        """One step of the fused round: value, actor, critic, then the target sync where ``due``."""
        value_loss, _ = self.value_step.inline(obs, actions, weights)
        actor_loss, adv_weights = self.actor_step.inline(obs, actions, weights)
        critic_loss, td = self.critic_step.inline(obs, actions, rewards, next_obs, terminals, discounts, weights)
        self.graph.target_sync.sync_if(due)
        return value_loss, actor_loss, critic_loss, adv_weights, td

    def _round_result(self, outputs):
        value_loss, actor_loss, critic_loss, adv_weights, td = outputs
        last = {"value_loss": value_loss[-1], "actor_loss": actor_loss[-1], "critic_loss": critic_loss[-1]}
        return {**last, "adv_weights": adv_weights[-1]}, td

    def _metric_floats(self, last):
        to_np = self.backend.to_numpy
        out = {k: float(to_np(v)) for k, v in last.items() if k != "adv_weights"}
        out["adv_weight_mean"] = float(np.mean(to_np(last["adv_weights"])))
        return out

    def _td_errors(self, batch):
        """|TD| of the critics under the current weights (initial priorities on an actor)."""
        if self._eval_critic is None:
            self._eval_critic = self.backend.function(self.graph.critic_loss)
        return self.backend.to_numpy(self._eval_critic(*self._transition_tensors(batch))[1])

    def _sync_target(self):
        self.graph.sync_target()

    # --- weights ---------------------------------------------------------------------------
    def variables(self):
        """Actor, V, critic and target critic, keyed by scope path."""
        return dict(self.graph.variables())
