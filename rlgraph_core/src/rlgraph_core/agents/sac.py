"""Soft Actor-Critic (Haarnoja et al. 2018) for bounded continuous action spaces.

SAC is composed from backend-neutral components: a tanh-squashed Gaussian policy
(:class:`~rlgraph_core.components.distributions.DistributionHead` with ``squashed=True``), an
online and a target :class:`~rlgraph_core.components.twin_q.TwinQNetwork`, the
:class:`~rlgraph_core.components.sac_loss.SACLoss` (whose docstring holds the whole math) and a
Polyak :class:`~rlgraph_core.components.target_sync.TargetSync`. Each gradient step is three
backend train steps, each over its own variables: the critic (both Q-networks), the actor, and
the temperature ``log_alpha`` (when learned); then the target critic moves towards the online one.

One update round of K gradient steps, as the fused program of static mode runs it
(:meth:`SACAgent._round_step`; the step-by-step loop does the same, one call at a time)::

    sample K batches from replay (the memory's generator)        (off_policy.py, up front)
    draw K x (next-action noise, actor noise) from self.rng       (the order of _gradient_step)
    for k in 0..K-1:
        critic step on  SACLoss.critic_loss(batch_k, next noise)  -> |TD|
        actor step on   SACLoss.actor_loss(obs_k, actor noise)     -> log pi
        temperature step on SACLoss.temperature_loss(log pi)       (when alpha is learned)
        if update number (updates + k + 1) is a multiple of target_update_interval:
            critic_target <- (1 - tau) critic_target + tau critic

Observations: float vectors go straight into the actor's and the critics' MLPs (the critics on
``concat[obs, action]``). Any other observation space (uint8 images, Dicts of images and vectors)
needs ``encoder``: a network-slot component mapping the observation space to rank-1 features
(``cnn``, ``dict_encoder``, or a plugin's). The actor and each twin critic get their own copy of
it (as Stable-Baselines3's SAC, ``share_features_extractor=False``): the actor is
``head(actor_network(encoder(s)))`` and the critics ``out(critic_network(concat[encoder(s), a]))``,
one encoder shared by the two heads of a twin pair, so each encoder learns from its own loss.
Images stay uint8 in replay; the encoder casts them to float inside the graph.

Actions: the policy works in the unit box (-1, 1); :meth:`SACAgent.act` maps its actions onto the
environment's bounds, and :meth:`SACAgent.observe` maps them back, so replay stores unit actions.
All randomness (the reparameterisation noise of acting and of both losses, the uniform actions
before ``learning_starts``, replay sampling) comes from seeded numpy generators, so a seed gives
the same run on every backend up to floating-point differences.
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional, Union

import numpy as np
from pydantic import Field, SerializeAsAny, field_validator

from rlgraph_core.agents.off_policy import OffPolicyAgent, OffPolicyConfig, stack_steps, transition_spaces
from rlgraph_core.agents.observations import check_observation_space, observation_kind, to_obs_array
from rlgraph_core.agents.support import action_space_hint
from rlgraph_core.components.distributions import DistributionHead, scale_action, unscale_action
from rlgraph_core.agents.slots import ComponentResolver, network_maker
from rlgraph_core.components.network import NetworkMaker, NetworkSpec, as_network_maker
from rlgraph_core.components.settings import ComponentSettings, NetworkSettings, Slot
from rlgraph_core.components.sac_loss import SACLoss
from rlgraph_core.components.target_sync import TargetSync
from rlgraph_core.components.twin_q import TwinQNetwork
from rlgraph_core.config.common import OptimizerConfig
from rlgraph_core.memories.settings import MemorySettings, ReplaySettings
from rlgraph_core.errors import ConfigError
from rlgraph_core.graph import Component, api, build
from rlgraph_core.memories.obs import batch_len
from rlgraph_core.spaces import FloatBox

PositiveFloat = Annotated[float, Field(gt=0)]


def _sac_network() -> NetworkSpec:
    return NetworkSpec(hidden=[256, 256], activation="relu")


#: A network slot of SAC (default: ``mlp``, 256-256 relu).
SACNetworkSlot = Annotated[SerializeAsAny[ComponentSettings], Slot("network", NetworkSettings, NetworkSpec)]
#: SAC's optional observation encoder (a network component; empty by default: vector observations).
SACEncoderSlot = Annotated[Optional[SerializeAsAny[ComponentSettings]], Slot("network", NetworkSettings)]


class ActorCriticReplayConfig(OffPolicyConfig):
    """What SAC (and CQL-SAC on it) and IQL share: an actor and a critic network slot, a Polyak
    target critic stepped every gradient step, batches of 256 from a 1M replay, one update per env
    step, and Adam 3e-4 without clipping (Stable-Baselines3's SAC, d3rlpy's IQL)."""

    type: str = Field(description="the agent's registry name (each agent narrows it to its own)")
    actor_network: SACNetworkSlot = Field(
        default_factory=_sac_network, description="network component of the policy trunk (type: mlp, or a plugin's)"
    )
    critic_network: SACNetworkSlot = Field(
        default_factory=_sac_network, description="network component of each Q-network's trunk (IQL: and of V's)"
    )
    tau: float = Field(0.005, gt=0, le=1, description="Polyak factor of the target critic (1 = hard copy)")
    target_update_interval: int = Field(1, gt=0, description="gradient steps between target updates")
    batch_size: int = Field(256, gt=0)
    learning_starts: int = Field(
        100, ge=0, description="env steps of uniform random actions before learning (online runs)"
    )
    train_freq: int = Field(1, gt=0, description="env steps between update rounds (online runs)")
    gradient_steps: int = Field(1, gt=0, description="gradient steps per update round (online runs)")
    memory: SerializeAsAny[MemorySettings] = Field(default_factory=lambda: ReplaySettings(capacity=1_000_000))
    optimizer: OptimizerConfig = Field(
        default_factory=lambda: OptimizerConfig(learning_rate=3e-4, max_grad_norm=None),
        description="used by each of the agent's three train steps (SAC: critic, actor, temperature; "
        "IQL: value, actor, critic)",
    )


class SACConfig(ActorCriticReplayConfig):
    """Hyperparameters of SAC (defaults follow Stable-Baselines3 / the SAC paper)."""

    type: Literal["sac"] = "sac"
    encoder: SACEncoderSlot = Field(
        None,
        description="observation encoder in front of the actor and of each twin critic (the action is "
        "concatenated to its features): needed for images ({type: cnn, preset: nature}) and Dicts "
        "({type: dict_encoder}); empty (default) for float vectors",
    )
    ent_coef: Union[Literal["auto"], PositiveFloat] = Field(
        "auto", description="entropy temperature alpha: 'auto' learns it, a float fixes it"
    )
    init_ent_coef: PositiveFloat = Field(1.0, description="initial alpha when ent_coef is 'auto'")
    target_entropy: Union[Literal["auto"], float] = Field(
        "auto", description="entropy the learned temperature aims at; 'auto' = -action_dim"
    )
    log_std_bounds: tuple[float, float] = Field((-20.0, 2.0), description="clip range of the policy's log-std")

    @field_validator("log_std_bounds")
    @classmethod
    def _ordered_bounds(cls, v):
        if not v[0] < v[1]:
            raise ValueError(f"log_std_bounds must be (low, high) with low < high, got {v}")
        return v


class SquashedGaussianPolicy(Component):
    """The SAC actor: (encoder →) network trunk → tanh-squashed Gaussian head; actions in (-1, 1).

    ``encoder`` (optional, a network maker) maps observations that are not float vectors to
    features; it draws its initial weights before the trunk.
    """

    def __init__(
        self,
        spec: NetworkSpec | NetworkMaker,
        action_space: FloatBox,
        log_std_bounds: tuple[float, float],
        seed: int = 0,
        name: str = "actor",
        encoder: NetworkMaker | None = None,
    ):
        super().__init__(name)
        rng = np.random.default_rng(seed)
        maker = as_network_maker(spec)
        self.encoder = encoder(name="encoder", rng=rng) if encoder is not None else None
        self.trunk = maker(name="trunk", rng=rng)
        self.head = DistributionHead(
            action_space,
            squashed=True,
            initializer=maker.initializer,
            rng=rng,
            log_std_bounds=tuple(log_std_bounds),
            name="head",
        )
        self.add_components(*([self.encoder] if self.encoder is not None else []), self.trunk, self.head)

    def latent(self, obs):
        """The trunk's features of ``obs`` (through the encoder first when there is one)."""
        return self.trunk.call(self.encoder.call(obs) if self.encoder is not None else obs)

    @api
    def sample(self, obs, noise):
        """Reparameterised ``(actions [B, d], log_probs [B])`` from standard-normal ``noise [B, d]``."""
        return self.head.sample(self.latent(obs), noise)

    @api
    def sample_actions(self, obs, noise):
        """The actions of :meth:`sample` alone (acting needs no log-probabilities)."""
        return self.head.sample_actions(self.latent(obs), noise)

    @api
    def deterministic(self, obs):
        """``tanh(mean)``: the action used for evaluation."""
        return self.head.deterministic(self.latent(obs))


class ActorTargetApi:
    """The API methods SAC's and IQL's root components share: acting with ``self.actor`` (SAC: a
    squashed Gaussian, whose deterministic action is ``tanh(mean)``; IQL: a clipped Gaussian or a
    categorical) and moving the target critic ``self.target_sync`` towards the online one."""

    @api
    def act(self, obs, noise):
        """Exploring actions (continuous ones in the unit box): a sample of the actor's distribution."""
        return self.actor.sample_actions(obs, noise)

    @api
    def greedy(self, obs):
        """The actor's deterministic action (continuous ones in the unit box)."""
        return self.actor.deterministic(obs)

    @api
    def sync_target(self):
        """Move the target critic towards the online critic (Polyak with ``tau``)."""
        return self.target_sync.sync()


class SACGraph(ActorTargetApi, Component):
    """The root component of SAC: actor, online and target twin critics, losses, target sync."""

    def __init__(
        self, config: SACConfig, action_space: FloatBox, seed: int, components: ComponentResolver | None = None
    ):
        super().__init__("sac")
        action_dim = int(action_space.shape[0])
        actor_network = network_maker(config.actor_network, components, field="agent.actor_network")
        critic_network = network_maker(config.critic_network, components, field="agent.critic_network")
        encoder = (
            network_maker(config.encoder, components, field="agent.encoder") if config.encoder is not None else None
        )
        self.actor = SquashedGaussianPolicy(actor_network, action_space, config.log_std_bounds, seed, encoder=encoder)
        # Same seed for the online and the target critic: they start identical.
        self.critic = TwinQNetwork(critic_network, seed + 1, name="critic", encoder=encoder)
        self.critic_target = TwinQNetwork(critic_network, seed + 1, name="critic_target", encoder=encoder).freeze()
        self.sac_loss = SACLoss(action_dim, config.ent_coef, config.init_ent_coef, config.target_entropy)
        self.target_sync = TargetSync(self.critic, self.critic_target, config.tau)
        self.add_components(self.actor, self.critic, self.critic_target, self.sac_loss, self.target_sync)

    def _critic_terms(self, obs, actions, rewards, next_obs, terminals, discounts, weights, next_noise):
        """``(loss, |TD|, Q1(s, a), Q2(s, a))`` of loss 1 (CQL-SAC adds its regulariser to it)."""
        next_actions, next_log_probs = self.actor.sample(next_obs, next_noise)
        next_q1, next_q2 = self.critic_target.call(next_obs, self.ops.stop_gradient(next_actions))
        q1, q2 = self.critic.call(obs, actions)
        loss, td = self.sac_loss.critic_loss(
            q1, q2, rewards, terminals, discounts, next_q1, next_q2, self.ops.stop_gradient(next_log_probs), weights
        )
        return loss, td, q1, q2

    @api
    def critic_loss(self, obs, actions, rewards, next_obs, terminals, discounts, weights, next_noise):
        """Loss 1 of :class:`SACLoss` for a batch: ``(loss, |TD|)``."""
        loss, td, _, _ = self._critic_terms(obs, actions, rewards, next_obs, terminals, discounts, weights, next_noise)
        return loss, td

    @api
    def actor_loss(self, obs, noise):
        """Loss 2 of :class:`SACLoss`: ``(loss, log_probs)``."""
        actions, log_probs = self.actor.sample(obs, noise)
        q1, q2 = self.critic.call(obs, actions)
        return self.sac_loss.actor_loss(log_probs, q1, q2)

    @api
    def temperature_loss(self, log_probs):
        """Loss 3 of :class:`SACLoss`: ``(loss, alpha)``."""
        return self.sac_loss.temperature_loss(log_probs)

    @api
    def alpha(self):
        """The current entropy temperature."""
        return self.sac_loss.alpha()


#: The encoder that handles each kind of observation, as SAC's config names it.
_ENCODER_FOR = {
    "image": "agent.encoder: {type: cnn, preset: nature} (images; preset: impala for the IMPALA network)",
    "dict": "agent.encoder: {type: dict_encoder} (Dicts: images through a cnn, vectors through an mlp)",
}


def check_sac_observations(observation_space, config: SACConfig) -> None:
    """Refuse, in one paragraph, observations SAC's configured networks cannot take.

    Without an encoder the actor's and critics' networks read the observation itself, so it must
    be a float vector (the critics concatenate it with the action); with a built-in encoder the
    encoder must take the observation space (:func:`check_observation_space`). A plugin's
    encoder is not second-guessed (its own build-time checks speak for it).
    """
    if config.encoder is not None:
        check_observation_space(observation_space, config.encoder, "SAC", "agent.encoder")
        return
    kind = observation_kind(observation_space)
    if kind == "vector":
        return
    short = repr(observation_space)
    short = short if len(short) <= 160 else short[:157] + "..."
    hint = (
        f"set {_ENCODER_FOR[kind]}"
        if kind in _ENCODER_FOR
        else "wrap the env so that it gives a float vector, an image or a Dict of those "
        "(gymnasium.wrappers.FlattenObservation flattens nested spaces)"
    )
    raise ConfigError(
        f"SAC's actor and critic networks read float vector observations (the critics concatenate them "
        f"with the action), but this environment's observation space is {short} and 'agent.encoder' is "
        f"empty: {hint}; the action is then concatenated to the encoder's features."
    )


class SACAgent(OffPolicyAgent):
    """Soft Actor-Critic with twin critics, Polyak target critic and automatic temperature.

    Args:
        config: a :class:`SACConfig`.
        observation_space: a rank-1 :class:`~rlgraph_core.spaces.FloatBox`, or any space
            ``config.encoder`` maps to rank-1 features (uint8 images, Dicts).
        action_space: a rank-1 :class:`~rlgraph_core.spaces.FloatBox` with finite bounds.
        backend: the backend to build on.
        seed: seeds weights, noise, random warm-up actions and replay sampling.
        num_envs: number of vector envs feeding :meth:`observe`.
    """

    supports_fused_rounds = True
    #: the root component (CQL-SAC's adds its regulariser to the critic loss)
    graph_class: type[SACGraph] = SACGraph
    #: names of the critic loss's outputs after ``(loss, |TD|)``, reported as metrics (CQL-SAC: ``cql``)
    critic_extra_metrics: tuple[str, ...] = ()

    def _critic_extra_spaces(self) -> dict:
        """Spaces (with batch rank) of the critic loss's inputs after ``next_noise``: none for SAC."""
        return {}

    def _critic_extra_noise(self, n: int) -> list[np.ndarray]:
        """Those inputs for a batch of ``n``, drawn from ``self.rng`` after the step's own noise."""
        return []

    def _setup_model(self) -> None:
        config, observation_space, action_space, backend, seed, components = self._setup_arguments()
        if not isinstance(action_space, FloatBox) or len(action_space.shape) != 1:
            raise ConfigError(
                f"SAC supports only a rank-1 continuous (Box) action space with finite bounds; this "
                f"environment's is {action_space!r}. {action_space_hint(action_space)}"
            )
        low, high = np.asarray(action_space.low, np.float64), np.asarray(action_space.high, np.float64)
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
            raise ConfigError(
                f"SAC squashes actions into the action box, so its bounds must be finite; got "
                f"{action_space!r}. Wrap the environment with gymnasium's RescaleAction or ClipAction."
            )
        check_sac_observations(observation_space, config)
        super()._setup_model()
        self.action_dim = int(action_space.shape[0])
        self.low, self.high = low, high
        self.graph = self.graph_class(config, action_space, seed, components)

        obs_b = observation_space.with_batch_rank()
        unit_b = FloatBox(-1.0, 1.0, shape=(self.action_dim,)).with_batch_rank()
        noise_b = FloatBox(shape=(self.action_dim,)).with_batch_rank()
        float_b = FloatBox(shape=()).with_batch_rank()
        self.build_report = build(
            self.graph,
            {
                "act": {"obs": obs_b, "noise": noise_b},
                "greedy": {"obs": obs_b},
                "critic_loss": {
                    **transition_spaces(obs_b, unit_b),
                    "next_noise": noise_b,
                    **self._critic_extra_spaces(),
                },
                "actor_loss": {"obs": obs_b, "noise": noise_b},
                "temperature_loss": {"log_probs": float_b},
                "alpha": {},
                "sync_target": {},
            },
            backend,
            compile_apis=("act", "greedy"),
        )

        opt = config.optimizer.backend_spec(self.lr_schedule(0))
        graph = self.graph
        self.critic_step = backend.train_step(
            graph.critic_loss, list(graph.critic.variables(trainable_only=True).values()), opt
        )
        self.actor_step = backend.train_step(
            graph.actor_loss, list(graph.actor.variables(trainable_only=True).values()), opt
        )
        self.temperature_step = None
        if graph.sac_loss.learn_alpha:
            self.temperature_step = backend.train_step(
                graph.temperature_loss, list(graph.sac_loss.variables(trainable_only=True).values()), opt
            )
        self._eval_critic = None

    def train_steps(self) -> dict:
        """The critic, actor and (when alpha is learned) temperature train steps."""
        steps = {"critic": self.critic_step, "actor": self.actor_step}
        if self.temperature_step is not None:
            steps["temperature"] = self.temperature_step
        return steps

    # --- acting ----------------------------------------------------------------------------
    def policy_outputs(self, obs):
        """``action`` (``tanh(mean)`` scaled to the action box, as ``act(obs, explore=False)``) and
        ``mean`` (the Gaussian's, before tanh) (see :meth:`Agent.policy_outputs`)."""
        ops = self.backend.ops
        actor = self.graph.actor
        mean = actor.head.params(actor.latent(obs))[0]
        low, high = ops.constant(np.asarray(self.low, np.float32)), ops.constant(np.asarray(self.high, np.float32))
        action = (ops.activation("tanh", mean) + 1.0) * (0.5 * (high - low)) + low
        return {"action": action, "mean": mean}

    def act(self, obs, explore=True):
        """Env-scaled actions ``[B, action_dim]``: sampled if exploring, ``tanh(mean)`` if not.

        Before ``learning_starts`` env steps an exploring agent acts uniformly at random.
        """
        obs = to_obs_array(obs, self.observation_space)
        n = batch_len(obs)
        if explore and self.timesteps < self.config.learning_starts:
            unit = self.rng.uniform(-1.0, 1.0, (n, self.action_dim))
        else:
            obs_t = self.backend.to_tensor(obs)
            if explore:
                noise = self.rng.standard_normal((n, self.action_dim), dtype=np.float32)
                unit = self.backend.to_numpy(self.graph.act(obs_t, self.backend.to_tensor(noise)))
            else:
                unit = self.backend.to_numpy(self.graph.greedy(obs_t))
        return scale_action(unit, self.low, self.high).astype(np.float32)

    def _stored_actions(self, actions):
        """Env actions mapped back to the unit box, as replay stores them."""
        return np.clip(unscale_action(actions, self.low, self.high), -1.0, 1.0).astype(np.float32)

    def _stored_action_space(self):
        """Actions in the unit box ``[-1, 1]``, float32."""
        return FloatBox(-1.0, 1.0, shape=(self.action_dim,))

    # --- learning --------------------------------------------------------------------------
    def _critic_inputs(self, sample, next_noise, extra=()):
        to_t = self.backend.to_tensor
        return (*self._transition_tensors(sample), to_t(next_noise), *(to_t(x) for x in extra))

    def _gradient_step(self, sample):
        """One critic, one actor and (if learned) one temperature update on ``sample``."""
        to_t = self.backend.to_tensor
        n = len(sample["rewards"])
        noise = self.rng.standard_normal((2, n, self.action_dim), dtype=np.float32)
        extra = self._critic_extra_noise(n)
        critic_loss, td, *critic_extra = self.critic_step(*self._critic_inputs(sample, noise[0], extra))
        actor_loss, log_probs = self.actor_step(to_t(sample["obs"]), to_t(noise[1]))
        out = {"critic_loss": critic_loss, "actor_loss": actor_loss, "log_probs": log_probs}
        out.update(zip(self.critic_extra_metrics, critic_extra))
        if self.temperature_step is not None:
            out["temperature_loss"], out["alpha"] = self.temperature_step(log_probs)
        return out, td

    # --- fused rounds (module docstring) ---------------------------------------------------
    def _round_arrays(self, samples):
        """The K batches' critic inputs stacked ``[K, B, ...]``, then the next-action and actor
        noise ``[K, B, d]`` and the critic's extra inputs, drawn from ``self.rng`` step by step as
        :meth:`_gradient_step` draws them."""
        draws = []
        for s in samples:
            n = len(s["rewards"])
            draws.append([self.rng.standard_normal((2, n, self.action_dim), dtype=np.float32)])
            draws[-1] += self._critic_extra_noise(n)
        next_noise, actor_noise = np.ascontiguousarray(stack_steps([d[0] for d in draws]).transpose(1, 0, 2, 3))
        extra = [stack_steps([d[i] for d in draws]) for i in range(1, len(draws[0]))]
        return self._stacked_transitions(samples) + [next_noise, actor_noise] + extra

    def _round_step(self, *inputs):
        """One step of the fused round: critic, actor, temperature, then the target sync where ``due``
        (inputs: the 7 transition tensors, next noise, actor noise, the critic's extras, due)."""
        transitions, next_noise, noise, extra, due = inputs[:7], inputs[7], inputs[8], inputs[9:-1], inputs[-1]
        critic_loss, td, *critic_extra = self.critic_step.inline(*transitions, next_noise, *extra)
        actor_loss, log_probs = self.actor_step.inline(transitions[0], noise)
        out = (critic_loss, td, actor_loss, log_probs, *critic_extra)
        if self.temperature_step is not None:
            out += tuple(self.temperature_step.inline(self.backend.ops.stop_gradient(log_probs)))
        self.graph.target_sync.sync_if(due)
        return out

    def _round_result(self, outputs):
        critic_loss, td, actor_loss, log_probs = outputs[:4]
        last = {"critic_loss": critic_loss[-1], "actor_loss": actor_loss[-1], "log_probs": log_probs[-1]}
        n_extra = len(self.critic_extra_metrics)
        last.update((k, v[-1]) for k, v in zip(self.critic_extra_metrics, outputs[4 : 4 + n_extra]))
        if self.temperature_step is not None:
            last["temperature_loss"], last["alpha"] = outputs[4 + n_extra][-1], outputs[5 + n_extra][-1]
        return last, td

    def _td_errors(self, batch):
        """|TD| of the critic under the current weights (initial priorities on an actor)."""
        if self._eval_critic is None:
            self._eval_critic = self.backend.function(self.graph.critic_loss)
        n = len(batch["rewards"])
        noise = self.rng.standard_normal((n, self.action_dim), dtype=np.float32)
        inputs = self._critic_inputs(batch, noise, self._critic_extra_noise(n))
        return self.backend.to_numpy(self._eval_critic(*inputs)[1])

    def _sync_target(self):
        self.graph.sync_target()

    def _metric_floats(self, last):
        to_np = self.backend.to_numpy
        out = {k: float(to_np(v)) for k, v in last.items() if k not in ("log_probs", "alpha")}
        out["entropy"] = float(-np.mean(to_np(last["log_probs"])))
        return out

    def metrics(self) -> dict[str, float]:
        """Latest losses, temperature and entropy estimate (converted to floats only here)."""
        out = super().metrics()
        out["alpha"] = float(self.backend.to_numpy(self.graph.alpha()))
        return out

    # --- weights and state -----------------------------------------------------------------
    def variables(self):
        """Actor, critic, target critic and ``log_alpha``, keyed by scope path."""
        return dict(self.graph.variables())
