"""What PPO and A2C share: config fields, the actor-critic root component, rollouts and GAE.

An on-policy agent collects ``n_steps`` vector-env steps with its current policy into a
:class:`~rlgraph_core.memories.RolloutBuffer`, estimates advantages with
:class:`~rlgraph_core.components.gae.GAE`, learns from that rollout (the subclass's
:meth:`OnPolicyAgent._learn`: PPO epochs of clipped minibatch steps, or one A2C step) and throws
it away. It runs under the unchanged local executor: ``act`` caches what ``observe`` needs
(raw actions, log-probabilities, values), ``observe`` stores the step, and ``update`` learns when
the rollout holds ``n_steps`` steps per env.

Episode ends: ``terminated`` steps are not bootstrapped; ``truncated`` steps are bootstrapped
from the value of the *true* final observation (the ``next_obs`` the executor passes to
``observe``), computed at once, with the same weights the rollout was collected with.

Continuous actions: the Gaussian policy works in the unit box; for a bounded environment box
``act`` scales its sample linearly onto ``[low, high]`` and clips it there, while the rollout
keeps the unclipped sample so log-probabilities stay exact.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Optional

import numpy as np
from pydantic import Field, SerializeAsAny

from rlgraph_core.agents.base import Agent, LearnResult, rng_state_problem
from rlgraph_core.components.actor_critic import ActorCritic, RunningObsNormalizer
from rlgraph_core.components.distributions import scale_action, unscale_action
from rlgraph_core.components.gae import GAE
from rlgraph_core.components.masks import MASK_KEY, check_legal, mask_layout, split_observation
from rlgraph_core.components.network import NetworkSpec
from rlgraph_core.components.schedules import as_schedule
from rlgraph_core.agents.observations import check_observation_space, to_obs_array
from rlgraph_core.agents.support import action_space_hint, refuse_recurrent_problem
from rlgraph_core.agents.slots import ComponentResolver, builtin_resolver, make_slot_component, network_maker
from rlgraph_core.components.settings import ComponentSettings, NetworkSettings, Slot
from rlgraph_core.config.common import ComponentSlot, OptimizerConfig, ScheduleOrFloat, StrictModel
from rlgraph_core.errors import ConfigError
from rlgraph_core.graph import Component, api, build
from rlgraph_core.memories.obs import batch_len, map_obs, obs_equal
from rlgraph_core.memories.rollout_buffer import RolloutBuffer
from rlgraph_core.spaces import BoolBox, Discrete, FloatBox, IntBox, MultiDiscrete


#: the smallest positive float32: uniform noise is kept above it (log(0) in Gumbel-max sampling)
_TINY = np.float32(np.finfo(np.float32).tiny)


class ActorCriticNetworkSpec(NetworkSpec):
    """A trunk of an actor-critic: 64-64 tanh with orthogonal initialisation by default (SB3)."""

    hidden: list[int] = Field(default_factory=lambda: [64, 64], description="hidden layer sizes")
    activation: str = Field("tanh", description="one of relu, tanh, sigmoid, elu, softplus, leaky_relu, linear")
    initializer: str = Field(
        "orthogonal", description="one of glorot_uniform, he_uniform, lecun_uniform, orthogonal, torch_linear"
    )


#: The network slot of the on-policy agents (default: ``mlp`` with the actor-critic defaults).
ActorCriticNetworkSlot = Annotated[
    SerializeAsAny[ComponentSettings], Slot("network", NetworkSettings, ActorCriticNetworkSpec)
]


class OnPolicyOptimizerConfig(OptimizerConfig):
    """Adam with the on-policy defaults of Stable-Baselines3: lr 3e-4, eps 1e-5, grad-norm clip 0.5."""

    learning_rate: ScheduleOrFloat = Field(3e-4, description="float or a schedule over env steps")
    max_grad_norm: Optional[float] = Field(0.5, gt=0, description="global gradient-norm clip; null disables")
    eps: float = Field(1e-5, gt=0)


class OnPolicyConfig(StrictModel):
    """Fields shared by the on-policy actor-critic agents (PPO, A2C)."""

    #: what executors may rely on (see :data:`rlgraph_core.agents.support.CAPABILITIES`)
    capabilities: ClassVar[frozenset[str]] = frozenset({"rollouts"})

    network: ActorCriticNetworkSlot = Field(
        default_factory=ActorCriticNetworkSpec,
        description="network component of each trunk, policy and value (type: mlp, or a plugin's)",
    )
    shared_trunk: bool = Field(False, description="one trunk for policy and value (else one each)")
    n_steps: int = Field(2048, gt=0, description="env steps per env in each rollout")
    gamma: float = Field(0.99, gt=0, le=1)
    gae_lambda: float = Field(0.95, ge=0, le=1)
    ent_coef: float = Field(0.0, ge=0, description="weight of the entropy bonus")
    vf_coef: float = Field(0.5, ge=0, description="weight of the value loss")
    normalize_advantage: bool = Field(True, description="normalise advantages per minibatch")
    log_std_init: float = Field(0.0, description="initial log-std of a Gaussian policy (continuous actions)")
    preprocessor: ComponentSlot = Field(
        None,
        description="observation preprocessor component: box_normalize, running_mean_std (a running "
        "normaliser updated after every rollout) or any registered slot component",
    )
    obs_clip: float = Field(
        10.0,
        gt=0,
        description="running_mean_std (alias running_obs_normalizer): clip normalised observations to +-obs_clip",
    )
    optimizer: OnPolicyOptimizerConfig = Field(default_factory=OnPolicyOptimizerConfig)

    def validate_run(self, env, train) -> None:
        """A recurrent network's ``seq_len`` divides ``n_steps`` (a rollout, or an IMPALA fragment, is
        cut into sequences); PPO adds its minibatch checks.

        Raises:
            ConfigError: in one paragraph (:func:`validate_sequences`).
        """
        if getattr(self.network, "stateful", False):
            validate_sequences(self, self.n_steps * env.num_envs)


def validate_sequences(config, rollout: int, batch_size: int | None = None) -> None:
    """A recurrent network (``config.network``) trains on whole sequences of ``network.seq_len``
    steps: they tile a rollout's ``n_steps``, a minibatch of ``batch_size`` samples (PPO's; None for
    an algorithm that learns from the whole rollout) holds whole ones, and no preprocessor is set.

    Raises:
        ConfigError: one paragraph naming the field, its value and what would be right.
    """
    net = config.network
    seq_len = int(getattr(net, "seq_len"))
    problem = None
    if config.n_steps % seq_len:
        problem = (
            f"'agent.network.seq_len' = {seq_len} does not divide 'agent.n_steps' = {config.n_steps}: each env's "
            f"rollout is cut into sequences of seq_len steps"
            + (", so seq_len cannot be longer than the rollout" if seq_len > config.n_steps else "")
            + f"; use a seq_len that divides n_steps (e.g. {_largest_divisor(config.n_steps, seq_len)})"
        )
    elif batch_size is not None and (batch_size % seq_len or batch_size > rollout):
        problem = (
            f"'agent.batch_size' = {batch_size} is not a whole number of sequences of "
            f"'agent.network.seq_len' = {seq_len} steps within a rollout of {rollout} samples; a recurrent "
            f"minibatch is batch_size / seq_len whole sequences: use a multiple of {seq_len} up to {rollout}"
        )
    refuse_recurrent_problem(problem, config.preprocessor, net)


def _largest_divisor(n: int, at_most: int) -> int:
    """The largest divisor of ``n`` that is at most ``at_most``."""
    return max(d for d in range(1, min(n, at_most) + 1) if n % d == 0)


class OnPolicyGraph(Component):
    """Root component of an on-policy agent: actor-critic, GAE and the algorithm's loss.

    Subclasses add the ``loss`` API method (the one the train step minimises).

    Args:
        name: root name (``ppo``, ``a2c``).
        config: the agent config.
        observation_space / action_space: rlgraph spaces without batch rank.
        loss: the loss component (kept as ``self.pg_loss``).
        seed: seeds the initial weights.
    """

    def __init__(
        self,
        name: str,
        config: OnPolicyConfig,
        observation_space: FloatBox,
        action_space,
        loss: Component,
        seed: int,
        components: ComponentResolver | None = None,
    ):
        super().__init__(name)
        spec = config.preprocessor
        # obs_clip goes to the running normaliser by whatever name the config gives it (running_mean_std,
        # running_obs_normalizer, or a plugin's subclass): decided by the class, not by the name
        resolve = components or builtin_resolver
        cls = None if spec is None else resolve(spec.type, "agent.preprocessor.type")
        is_running = isinstance(cls, type) and issubclass(cls, RunningObsNormalizer)
        defaults = {"clip": config.obs_clip} if is_running else None
        # A legal-action mask in the observation goes to the policy's head; the preprocessor and
        # trunks see the rest (components/masks.py).
        self.mask_layout = mask_layout(observation_space, action_space, name.upper())
        policy_space = observation_space if self.mask_layout is None else self.mask_layout.policy_space
        preprocessor = make_slot_component(
            spec, policy_space, components, field="agent.preprocessor", name="preprocessor", defaults=defaults
        )
        # A preprocessor with an ``update`` API learns statistics from the data: it is folded in
        # after every rollout (and its statistics travel with the weights).
        self.obs_normalizer = (
            preprocessor if preprocessor is not None and "update" in type(preprocessor).api_methods() else None
        )
        network = network_maker(config.network, components, field="agent.network")
        self.policy = ActorCritic(
            network,
            action_space,
            config.shared_trunk,
            preprocessor,
            seed,
            config.log_std_init,
            name="policy",
            mask=self.mask_layout,
        )
        self.gae = GAE(config.gamma, config.gae_lambda)
        self.pg_loss = loss
        self.add_components(self.policy, self.gae, loss)

    @api
    def act(self, obs, noise):
        """``(actions, log_probs, values)`` of the stochastic policy."""
        return self.policy.act(obs, noise)

    @api
    def greedy(self, obs):
        """The deterministic action (mode or mean)."""
        return self.policy.deterministic(obs)

    @api
    def value(self, obs):
        """``V(obs)``."""
        return self.policy.value(obs)

    @api
    def evaluate_actions(self, obs, actions):
        """``(log_probs, entropy, values)`` of given actions."""
        return self.policy.evaluate(obs, actions)

    @api
    def advantages(self, rewards, values, next_values, terminated, truncated):
        """GAE ``(advantages, returns)`` of a time-major ``[T, N]`` rollout."""
        return self.gae.advantages(rewards, values, next_values, terminated, truncated)

    @api
    def update_normalizer(self, obs):
        """Fold observations into the running normaliser (no-op without one)."""
        if self.obs_normalizer is None:
            return None
        return self.obs_normalizer.update(split_observation(obs, self.mask_layout)[0])


#: the per-step fields :meth:`OnPolicyAgent.observe` stores in the rollout (without subclass extras)
_ROLLOUT_FIELDS = frozenset(
    {"obs", "actions", "log_probs", "values", "rewards", "terminated", "truncated", "final_values"}
)


class OnPolicyAgent(Agent):
    """Base of PPO and A2C: acting, rollout collection, bootstrapping and GAE.

    Subclasses set :attr:`graph_class`, implement :meth:`_make_loss`, :meth:`_loss_spaces` and
    :meth:`_learn`, and report their diagnostics through :meth:`metrics`.

    Args:
        config: the agent config.
        observation_space: a rank-1 ``FloatBox``.
        action_space: ``Discrete(n)`` or a rank-1 ``FloatBox``.
        backend: a backend instance.
        seed: seeds weights, action sampling and minibatch shuffling.
        num_envs: number of vector envs stepped together (N).
    """

    #: the root component class (a subclass of :class:`OnPolicyGraph`).
    graph_class: type = OnPolicyGraph
    #: the (read-only) zero ``final_values`` of a step without a cut episode, made at the first one
    _no_final_values: np.ndarray | None = None
    #: registry name of the algorithm (root component name).
    algorithm: str = "on_policy"

    def _setup_model(self) -> None:
        config, observation_space, action_space, backend, seed, components = self._setup_arguments()
        super()._setup_model()
        name = self.algorithm.upper()
        #: where the observation holds a legal-action mask (None: unmasked; components/masks.py)
        self.mask = mask_layout(observation_space, action_space, name)
        check_observation_space(
            observation_space if self.mask is None else self.mask.policy_space, config.network, name
        )
        self.multi = isinstance(action_space, MultiDiscrete) and len(action_space.shape) == 1
        self.discrete = isinstance(action_space, Discrete) or self.multi
        #: MultiDiscrete's sub-action sizes (None otherwise)
        self.nvec: tuple[int, ...] | None = None
        if self.multi:
            self.nvec = tuple(int(n) for n in np.asarray(action_space.nvec))
            self.num_actions = len(self.nvec) * max(self.nvec)  # noise per sample: one per padded logit
            self.action_start = np.asarray(action_space.start, np.int64)
            action_b = IntBox(0, np.asarray(self.nvec) - 1, shape=(len(self.nvec),)).with_batch_rank()
            noise_b = FloatBox(0.0, 1.0, shape=(self.num_actions,)).with_batch_rank()
        elif self.discrete:
            self.num_actions = int(action_space.n)
            self.action_start = int(action_space.start)
            action_b = IntBox(0, self.num_actions - 1, shape=()).with_batch_rank()
            noise_b = FloatBox(0.0, 1.0, shape=(self.num_actions,)).with_batch_rank()
        elif isinstance(action_space, FloatBox) and len(action_space.shape) == 1:
            self.action_dim = int(action_space.shape[0])
            self.action_low = np.asarray(action_space.low, np.float32)
            self.action_high = np.asarray(action_space.high, np.float32)
            self.bounded = bool(np.all(np.isfinite(self.action_low)) and np.all(np.isfinite(self.action_high)))
            action_b = FloatBox(shape=(self.action_dim,)).with_batch_rank()
            noise_b = FloatBox(shape=(self.action_dim,)).with_batch_rank()
        else:
            raise ConfigError(
                f"{name} supports a single Discrete or MultiDiscrete action space or a rank-1 Box of floats; this "
                f"environment's is {action_space!r}. {action_space_hint(action_space)}"
            )
        self.graph = self.graph_class(
            self.algorithm, config, observation_space, action_space, self._make_loss(config), seed, components
        )
        obs_b = observation_space.with_batch_rank()
        env_f = FloatBox(shape=(self.num_envs,)).with_batch_rank()
        env_b = BoolBox(shape=(self.num_envs,)).with_batch_rank()
        spaces = {
            **self._policy_spaces(obs_b, action_b, noise_b),
            "advantages": {
                "rewards": env_f,
                "values": env_f,
                "next_values": env_f,
                "terminated": env_b,
                "truncated": env_b,
            },
            "loss": self._loss_spaces(obs_b, action_b, FloatBox(shape=()).with_batch_rank()),
        }
        # Only the per-step inference methods are compiled in static mode (besides the train
        # step): GAE is a loop over time that would be unrolled, and the rest run rarely.
        self.build_report = build(self.graph, spaces, backend, compile_apis=("act", "greedy", "value"))
        if self.graph.obs_normalizer is not None:
            self.graph.obs_normalizer.reset()  # the build ran update_normalizer on a zero batch
        self.lr_schedule = as_schedule(config.optimizer.learning_rate)
        self._params = list(self.graph.policy.variables(trainable_only=True).values())
        self.train_step = backend.train_step(
            self.graph.loss, self._params, config.optimizer.backend_spec(self.lr_schedule(0))
        )
        self.buffer = RolloutBuffer(config.n_steps, self.num_envs, seed)
        self.shuffle_rng = np.random.default_rng([seed, 1])
        self._pending = None
        self._last_next_obs = None
        self._last_metrics: dict[str, float] = {}

    # --- hooks for subclasses --------------------------------------------------------------
    def _policy_spaces(self, obs_b, action_b, noise_b) -> dict:
        """Input spaces of the root's acting and evaluating API methods (all but ``advantages``
        and ``loss``), for batches ``obs_b`` of observations, ``action_b`` of actions, ``noise_b`` of noise."""
        return {
            "act": {"obs": obs_b, "noise": noise_b},
            "greedy": {"obs": obs_b},
            "value": {"obs": obs_b},
            "evaluate_actions": {"obs": obs_b, "actions": action_b},
            "update_normalizer": {"obs": obs_b},
        }

    def _make_loss(self, config) -> Component:
        """The algorithm's loss component."""
        raise NotImplementedError

    def _loss_spaces(self, obs_b, action_b, float_b) -> dict:
        """Input spaces of the root ``loss`` API method, in argument order."""
        raise NotImplementedError

    def _learn(self, rollout: dict[str, np.ndarray]) -> dict[str, float]:
        """Learn from one time-major rollout (see :meth:`rollout`); return metrics."""
        raise NotImplementedError

    def _step_extras(self, next_obs: np.ndarray) -> dict[str, np.ndarray]:
        """Extra per-step fields the rollout stores (``[N, ...]`` each); none by default."""
        return {}

    def _is_postprocessed(self, batch: dict[str, np.ndarray]) -> bool:
        """Whether :meth:`learn` can use ``batch`` as is (else it postprocesses it first)."""
        return "advantages" in batch

    # --- actions ---------------------------------------------------------------------------
    def _noise(self, n: int) -> np.ndarray:
        """Sampling noise from the agent's seeded generator: uniform in (0, 1) or standard normal."""
        if self.discrete:
            u = self.rng.random((n, self.num_actions), dtype=np.float32)
            return np.maximum(u, _TINY, out=u)
        return self.rng.standard_normal((n, self.action_dim), dtype=np.float32)

    def _to_env(self, raw: np.ndarray) -> np.ndarray:
        """Policy actions -> env actions (shift discrete; scale and clip bounded boxes)."""
        if self.discrete:  # the sampled int64 actions themselves where no shift is needed (no copy)
            actions = raw.astype(np.int64, copy=False)
            return actions + self.action_start if self.multi or self.action_start else actions
        if self.bounded:
            return np.clip(
                scale_action(raw, self.action_low, self.action_high), self.action_low, self.action_high
            ).astype(np.float32)
        return raw.astype(np.float32)

    def _from_env(self, actions: np.ndarray) -> np.ndarray:
        """Env actions -> policy actions (inverse of :meth:`_to_env` where not clipped)."""
        actions = np.asarray(actions)
        if self.discrete:
            return actions.astype(np.int64) - self.action_start
        if self.bounded:
            return unscale_action(actions, self.action_low, self.action_high).astype(np.float32)
        return actions.astype(np.float32)

    def policy_outputs(self, obs):
        """``action`` (as ``act(obs, explore=False)``), ``logits`` (discrete) or ``mean`` (continuous),
        and ``value`` (see :meth:`Agent.policy_outputs`)."""
        out = self.graph.policy.policy_outputs(obs)
        return {"action": self._greedy_action(out, lambda: self.graph.policy.deterministic(obs)), **out}

    def _greedy_action(self, out: dict, deterministic):
        """The env-ready greedy action from the policy's ``logits`` / ``mean`` (``deterministic()``
        gives a MultiDiscrete policy's), written against ``backend.ops`` (traced by the export)."""
        ops = self.backend.ops
        if self.multi:
            action = deterministic() + ops.constant(self.action_start, "int64")
        elif self.discrete:
            action = ops.argmax(out["logits"], axis=-1)
            action = action + self.action_start if self.action_start else action
        elif self.bounded:  # scale_action, then clip to the box: as _to_env does
            low, high = ops.constant(self.action_low), ops.constant(self.action_high)
            action = ops.clip((out["mean"] + 1.0) * (0.5 * (high - low)) + low, low, high)
        else:
            action = out["mean"]
        return action

    def act(self, obs, explore=True):
        """Env-ready actions for a batch of observations; with ``explore`` caches what observe needs."""
        to_t, to_np = self.backend.to_tensor, self.backend.to_numpy
        obs = to_obs_array(obs, self.observation_space)
        if self.mask is not None:
            check_legal(obs[MASK_KEY], self.timesteps, self.nvec)
        if not explore:
            return self._to_env(to_np(self.graph.greedy(to_t(obs))))
        actions, log_probs, values = self.graph.act(to_t(obs), to_t(self._noise(batch_len(obs))))
        raw = to_np(actions)
        env_actions = self._to_env(raw)
        self._pending = (obs, raw, to_np(log_probs), to_np(values), env_actions)
        return env_actions

    # --- rollouts --------------------------------------------------------------------------
    def observe(self, obs, actions, rewards, next_obs, terminated, truncated):
        """Store one vector step in the rollout.

        The log-probabilities and values cached by the last ``act(obs)`` are used when ``obs``
        and ``actions`` are what it saw and returned; otherwise they are computed here.
        """
        obs = to_obs_array(obs, self.observation_space)
        pending, self._pending = self._pending, None
        # The executor passes back the very arrays act saw and returned: identity answers
        # without comparing them element by element (two array_equal calls per env step).
        if pending is not None and (
            (pending[0] is obs or obs_equal(pending[0], obs))
            and (pending[4] is actions or np.array_equal(pending[4], actions))
        ):
            raw, log_probs, values = pending[1], pending[2], pending[3]
        else:
            raw = self._from_env(actions)
            to_t, to_np = self.backend.to_tensor, self.backend.to_numpy
            log_probs, _, values = (to_np(x) for x in self.graph.evaluate_actions(to_t(obs), to_t(raw)))
        next_obs = to_obs_array(next_obs, self.observation_space)

        def final_value():  # V(true final observation), to bootstrap a cut episode
            return self.backend.to_numpy(self.graph.value(self.backend.to_tensor(next_obs)))

        extras = self._step_extras(next_obs)
        self._store_step(obs, raw, log_probs, values, rewards, terminated, truncated, next_obs, final_value, extras)

    def _store_step(
        self, obs, raw, log_probs, values, rewards, terminated, truncated, next_obs, final_value, extras
    ) -> None:
        """Add one vector step to the rollout and count it; a cut (``truncated``) episode is
        bootstrapped from ``final_value()``, V(true final observation) ``[N]``, asked for only then.
        ``extras`` are the per-step fields of a subclass (IMPALA's ``next_obs``, recurrent PPO's
        ``episode_starts``)."""
        terminated, truncated = np.asarray(terminated, bool), np.asarray(truncated, bool)
        if truncated.any():
            final_values = np.where(truncated, final_value(), 0.0).astype(np.float32)
        else:  # the buffer copies it: one zeros array serves every step without a cut episode
            final_values = self._no_final_values
            if final_values is None or len(final_values) != len(rewards):
                final_values = self._no_final_values = np.zeros(len(rewards), np.float32)
                final_values.flags.writeable = False
        self.buffer.add(
            obs=obs,
            actions=raw,
            log_probs=log_probs,
            values=values,
            rewards=np.asarray(rewards, np.float32),
            terminated=terminated,
            truncated=truncated,
            final_values=final_values,
            **extras,
        )
        self._count_env_steps(len(rewards))
        if self.buffer.full:
            self._last_next_obs = map_obs(np.copy, next_obs)

    def rollout(self) -> dict[str, np.ndarray]:
        """The collected rollout, time-major ``[T, N, ...]``, with ``next_values[t] = V(true s_{t+1})``.

        Keys: obs, actions, log_probs, values, rewards, terminated, truncated, next_values. This
        is what :meth:`update` accepts as ``batch`` (e.g. a rollout gathered by another worker).
        """
        data = {k: map_obs(np.copy, v) for k, v in self.buffer.data().items()}
        last_values = self.backend.to_numpy(self.graph.value(self.backend.to_tensor(self._last_next_obs)))
        next_values = np.concatenate([data["values"][1:], np.asarray(last_values, np.float32)[None]], axis=0)
        data["next_values"] = np.where(data["truncated"], data.pop("final_values"), next_values).astype(np.float32)
        return data

    def compute_advantages(self, rollout: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """GAE advantages and returns ``[T, N]`` of a rollout (see :class:`~rlgraph_core.components.gae.GAE`)."""
        to_t, to_np = self.backend.to_tensor, self.backend.to_numpy
        adv, ret = self.graph.advantages(
            *(to_t(rollout[k]) for k in ("rewards", "values", "next_values", "terminated", "truncated"))
        )
        return to_np(adv), to_np(ret)

    def postprocess(self, trajectory: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Actor role: a :meth:`rollout` plus GAE ``advantages`` and ``returns`` and ``policy_version``.

        Computed on the actor with its current weights (the values are the ones it acted with),
        so a learner can concatenate batches of many actors along the env axis and learn.
        """
        batch = dict(trajectory)
        batch["advantages"], batch["returns"] = self.compute_advantages(batch)
        batch["policy_version"] = np.full(np.shape(batch["rewards"]), self.weights_version, np.int64)
        return batch

    def take_rollout(self) -> dict[str, np.ndarray] | None:
        """Actor role: the postprocessed rollout once ``n_steps`` steps per env are collected
        (the buffer then starts a new one), else None."""
        if not self.buffer.full:
            return None
        batch = self.postprocess(self.rollout())
        self.buffer.reset()
        return batch

    def train_steps(self):
        """The one train step over the actor-critic's trainable variables."""
        return {"policy": self.train_step}

    def learn(self, batch: dict[str, np.ndarray]) -> LearnResult:
        """Learner role: learn from one time-major batch (a :meth:`rollout`, postprocessed or not).

        Batches of several actors may be concatenated along the env axis (axis 1).
        """
        if not self._is_postprocessed(batch):
            batch = self.postprocess(batch)
        lr = self.lr_schedule(self.timesteps)
        if lr != self.train_step.learning_rate:
            self.train_step.learning_rate = lr
        before, staleness = self.updates, self._staleness(batch)
        metrics = self._learn(batch)
        self.weights_version += self.updates - before
        if self.graph.obs_normalizer is not None:
            self.graph.update_normalizer(self.backend.to_tensor(self._flat(batch["obs"])))
        self._last_metrics = metrics
        return LearnResult({**metrics, **staleness})

    def update(self, batch=None):
        """Learn once the rollout holds ``n_steps`` steps per env (or from ``batch``, a :meth:`rollout`)."""
        if batch is None:
            batch = self.take_rollout()
            if batch is None:
                return None
        metrics = self.learn(batch).metrics
        metrics.pop("staleness", None)  # always 0 in the single-process loop
        return metrics

    @staticmethod
    def _flat(x: np.ndarray) -> np.ndarray:
        """``[T, N, ...] -> [T * N, ...]`` (each array of a Dict observation's dict)."""
        return map_obs(lambda v: v.reshape(-1, *v.shape[2:]), x)

    def metrics(self) -> dict[str, float]:
        """Latest training metrics (losses of the last update, learning rate, update count)."""
        return {"updates": self.updates, "learning_rate": self.train_step.learning_rate, **self._last_metrics}

    # --- weights and state -----------------------------------------------------------------
    def variables(self):
        """Every variable (policy, value, normaliser statistics), keyed by scope path."""
        return dict(self.graph.variables())

    def get_state(self):
        """Optimizer state and counters (incl. generator states) for a checkpoint.

        A partly collected rollout is not stored: a resumed run resets its envs, so those steps
        could never be completed; the next rollout starts afresh.
        """
        arrays = {f"optimizer/{k}": v for k, v in self.train_step.get_state().items()}
        counters = {
            "timesteps": self.timesteps,
            "updates": self.updates,
            "rng": self.rng.bit_generator.state,
            "shuffle_rng": self.shuffle_rng.bit_generator.state,
        }
        return arrays, counters

    # --- a partly collected rollout across a resume (the local executor's env_runner attachment) ---
    def partial_rollout(self) -> dict[str, np.ndarray] | None:
        """The steps of a partly collected rollout (flat field names, ``[pos, N, ...]``), for a
        resume that continues the envs' episodes too; None when there is none or this agent
        stores per-step fields of its own (IMPALA, recurrent PPO: their rollout restarts)."""
        if type(self)._step_extras is not OnPolicyAgent._step_extras:
            return None
        return self.buffer.partial()

    def partial_rollout_problem(self, fields: dict[str, np.ndarray]) -> str | None:
        """Why ``fields`` cannot be this agent's partly collected rollout, or None: exactly the
        fields :meth:`observe` stores, each ``[pos, num_envs, ...]`` with ``0 < pos < n_steps``,
        observations of the observation space's shape, finite floats (observations aside)."""
        if type(self)._step_extras is not OnPolicyAgent._step_extras:
            return f"{type(self).__name__} does not continue a partly collected rollout"
        if set(fields) != _ROLLOUT_FIELDS:
            return f"the rollout holds {sorted(fields)}, not {sorted(_ROLLOUT_FIELDS)}"
        n, pos = self.num_envs, len(fields["rewards"])
        if not 0 < pos < self.buffer.n_steps:
            return f"the rollout holds {pos} steps, not 1..{self.buffer.n_steps - 1}"
        obs_shape = tuple(getattr(self.observation_space, "shape", None) or ())
        for name, value in fields.items():
            if value.shape[:2] != (pos, n) or value.dtype.kind not in "biuf":
                return f"rollout field '{name}' is {list(value.shape)} {value.dtype}, not [{pos}, {n}, ...] numbers"
            if name in ("terminated", "truncated") and (value.dtype != bool or value.ndim != 2):
                return f"rollout field '{name}' is {list(value.shape)} {value.dtype}, not [{pos}, {n}] bool"
            if name in ("log_probs", "values", "rewards", "final_values") and value.ndim != 2:
                return f"rollout field '{name}' is {list(value.shape)}, not [{pos}, {n}]"
            # observations were checked where they entered (env.allow_nonfinite_obs may let inf in)
            if name != "obs" and value.dtype.kind == "f" and not np.all(np.isfinite(value)):
                return f"rollout field '{name}' holds NaN or infinite values"
        if fields["obs"].shape[2:] != obs_shape:
            return f"rollout observations are {list(fields['obs'].shape[2:])}, the space's {list(obs_shape)}"
        return None

    def continue_rollout(self, fields: dict[str, np.ndarray] | None) -> None:
        """Carry on with a checked partly collected rollout, or (None) start a fresh one: the
        envs' episodes restarted, so the steps collected so far would not join the next ones."""
        self._pending = None
        if fields is None:
            self.buffer.reset()
        else:
            self.buffer.restore_partial(fields)

    def optimizer_state_steps(self):
        """The one train step stores its optimizer state under ``optimizer/``."""
        return {"optimizer/": self.train_step}

    def state_problem(self, arrays, counters):
        """The base checks plus the shuffling generator's state."""
        problem = super().state_problem(arrays, counters)
        if problem is None and isinstance(counters, dict) and "shuffle_rng" in counters:
            problem = rng_state_problem("shuffle_rng", counters["shuffle_rng"])
        return problem

    def set_state(self, arrays, counters):
        """Restore :meth:`get_state`'s output and start a fresh rollout."""
        super().set_state(arrays, counters)
        if "rng" in counters:
            self.rng.bit_generator.state = counters["rng"]
        if "shuffle_rng" in counters:
            self.shuffle_rng.bit_generator.state = counters["shuffle_rng"]
        self.buffer.reset()
        self._pending = None
        opt = {k[len("optimizer/") :]: v for k, v in arrays.items() if k.startswith("optimizer/")}
        if opt:
            self.train_step.set_state(opt)
