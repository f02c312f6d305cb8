"""What replay-based (off-policy) agents such as DQN and SAC share.

:class:`OffPolicyAgent` owns everything around the algorithm's own graph and loss step, like
Stable-Baselines3's ``OffPolicyAlgorithm``:

* the replay memory (an instance handed in by the assembly; any :class:`Memory` works),
* n-step assembly of the vector-env stream (:class:`~rlgraph_core.memories.NStepAssembler`),
* the update schedule: nothing before ``learning_starts`` env steps or while the memory holds
  less than a batch, then ``gradient_steps`` gradient steps every ``train_freq`` env steps,
* the target network schedule, the same in every agent: every ``target_update_interval``
  gradient steps the target moves ``target <- (1 - tau) target + tau online`` (``tau = 1`` is a
  hard copy),
* learning-rate schedule sync for every train step, priority updates for prioritized replay,
* checkpoint state (optimizer states, the memory, counters, generator states),
* the actor/learner roles: :meth:`OffPolicyAgent.postprocess` (n-step folding and, for
  prioritized agents, initial priorities from the actor's current weights, as in Ape-X) and
  :meth:`OffPolicyAgent.learn` (one gradient step on a given batch, returning new priorities).

A subclass supplies its graph and its loss step: :meth:`_gradient_step`, :meth:`_td_errors`,
:meth:`_sync_target`, :meth:`train_steps`, :meth:`_stored_actions` and :meth:`_metric_floats`;
for fused rounds also :meth:`_round_arrays`, :meth:`_round_step` and :meth:`_round_result`.

Fused rounds: in static mode on a backend that compiles whole loops (``backend.fuses_loops``), a
round of ``gradient_steps`` steps from the own memory is one compiled program
(:meth:`OffPolicyAgent._fused_round`, config field ``fuse_rounds``). Its K batches are sampled up
front: uniform sampling does not depend on the weights and nothing is inserted during a round, so
they are the batches the step-by-step loop samples, and the result is the same. The target sync
runs inside the program, at the steps where it is due. A prioritized memory samples by the
priorities each step's ``|TD|`` changes, so its rounds stay step by step unless
``fuse_prioritized_rounds`` is set: then all K batches are sampled with the priorities of the
start of the round, and the K steps' ``|TD|`` update the priorities after it (the approximation
Ape-X's asynchronous learner makes anyway: its priority updates arrive steps late). A gradient
hook (Horovod averages every step's gradients on the host) keeps the step-by-step loop, and so do
Dict observations (a fused loop takes flat tensors).
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np
from pydantic import Field, SerializeAsAny, model_validator

from rlgraph_core.agents.base import Agent, LearnResult
from rlgraph_core.agents.observations import to_obs_array
from rlgraph_core.backend import FusedLoop
from rlgraph_core.components.schedules import as_schedule
from rlgraph_core.config.common import OptimizerConfig, StrictModel
from rlgraph_core.errors import CheckpointError, ConfigError
from rlgraph_core.memories import NStepAssembler, PrioritizedReplay, ReplayMemory
from rlgraph_core.memories.obs import concat
from rlgraph_core.memories.settings import MemorySettings, ReplaySettings
from rlgraph_core.spaces import BoolBox, Dict, FloatBox, LeafSpace, Space

#: Trajectory keys :meth:`OffPolicyAgent.postprocess` needs, each time-major ``[T, N, ...]``.
TRAJECTORY_KEYS = ("obs", "actions", "rewards", "next_obs", "terminated", "truncated")


def _at(value, t: int):
    """Step ``t`` of a time-major array, or of each array of a (Dict observation's) dict."""
    return {k: _at(v, t) for k, v in value.items()} if isinstance(value, Mapping) else value[t]


def check_trajectory_keys(trajectory: Mapping[str, Any], keys: Sequence[str], whose: str = "A", note: str = "") -> None:
    """Raise ValueError naming the ``keys`` an actor's time-major ``trajectory`` lacks (``whose`` starts
    the sentence, ``note`` follows the layout)."""
    missing = [k for k in keys if k not in trajectory]
    if missing:
        raise ValueError(
            f"{whose} trajectory needs the keys {', '.join(keys)} (time-major [T, N, ...]{note}); "
            f"missing {', '.join(missing)}."
        )


def round_due(config: "OffPolicyConfig", timesteps: int, stored: int, last_train: int) -> bool:
    """Whether the update schedule asks for a round of ``config.gradient_steps`` steps now: at
    least ``learning_starts`` env steps taken, a batch stored, and ``train_freq`` env steps since
    the last round (at ``last_train``). A pure function of the counters, so a program that runs
    many env steps at once (a plugin's compiled training loop) plans its rounds with it."""
    return (
        timesteps >= config.learning_starts
        and stored >= config.batch_size
        and timesteps - last_train >= config.train_freq
    )


def target_due(updates: int, steps: int, interval: int) -> np.ndarray:
    """Float32 ``[steps]``: 1.0 at the steps of a round after which the target moves. Step ``k``
    is the ``(updates + k + 1)``-th update; the target moves after every ``interval``-th."""
    if steps == 1:  # a round of one step (SAC at every env step): a few numpy calls fewer
        return np.array([(updates + 1) % interval == 0], np.float32)
    return ((updates + np.arange(1, steps + 1)) % interval == 0).astype(np.float32)


def stack_steps(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """``np.stack(arrays)``: a round's per-step arrays as one ``[K, ...]`` array; a round of one
    step is a view of its array (SAC rounds are one step each, at every env step: no copy)."""
    return arrays[0][None] if len(arrays) == 1 else np.stack(arrays)


def transition_spaces(obs_b: Space, actions_b: Space) -> dict[str, Space]:
    """Input spaces of a loss over a sampled batch of transitions, all with a batch rank:
    ``obs``, ``actions`` (``obs_b``, ``actions_b``), ``rewards``, ``next_obs``, bool ``terminals``,
    ``discounts`` (the n-step ``gamma^n``) and ``weights`` (prioritized replay's importance weights)."""
    float_b = FloatBox(shape=()).with_batch_rank()
    return {
        "obs": obs_b,
        "actions": actions_b,
        "rewards": float_b,
        "next_obs": obs_b,
        "terminals": BoolBox(shape=()).with_batch_rank(),
        "discounts": float_b,
        "weights": float_b,
    }


class OffPolicyConfig(StrictModel):
    """Fields every replay agent has (DQN and SAC set their own defaults for several)."""

    #: what executors may rely on (see :data:`rlgraph_core.agents.support.CAPABILITIES`)
    capabilities: ClassVar[frozenset[str]] = frozenset({"replay"})

    gamma: float = Field(0.99, gt=0, le=1)
    n_step: int = Field(1, ge=1, description="n-step returns (1 = one-step targets)")
    batch_size: int = Field(64, gt=0)
    learning_starts: int = Field(1_000, ge=0, description="env steps before the first update")
    train_freq: int = Field(4, gt=0, description="env steps between update rounds")
    gradient_steps: int = Field(1, gt=0, description="gradient steps per update round")
    target_update_interval: int = Field(500, gt=0, description="gradient steps between target updates")
    tau: float = Field(1.0, gt=0, le=1, description="target update: 1 = hard copy, < 1 = Polyak factor")
    memory: SerializeAsAny[MemorySettings] = Field(
        default_factory=ReplaySettings, description="replay memory: its registry type and that memory's settings"
    )
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    fuse_rounds: bool = Field(
        True,
        description="static mode on a backend that compiles loops: run each round of gradient_steps steps "
        "(target syncs included) as one compiled program, its batches sampled up front (uniform replay: the "
        "same batches and result as step by step); a prioritized memory or a gradient hook (Horovod) keeps "
        "the step-by-step loop",
    )
    fuse_prioritized_rounds: bool = Field(
        False,
        description="with fuse_rounds and a prioritized memory: fuse its rounds too, sampling all "
        "gradient_steps batches with the priorities of the start of the round and updating the priorities "
        "with their |TD| after it (an approximation, as in Ape-X's asynchronous learner)",
    )

    @model_validator(mode="after")
    def _memory_holds_a_batch(self) -> "OffPolicyConfig":
        """A memory smaller than a batch never holds one, so no update would ever run."""
        capacity = getattr(self.memory, "capacity", None)
        if isinstance(capacity, int) and capacity < self.batch_size:
            raise ValueError(
                f"'agent.memory.capacity' = {capacity} is smaller than 'agent.batch_size' = {self.batch_size}: "
                f"the replay memory could never hold a batch, so no update would run; raise "
                f"agent.memory.capacity to at least {self.batch_size} (typically 10^4 to 10^6) or "
                f"lower agent.batch_size"
            )
        return self


def builtin_memory(settings: MemorySettings, seed: int):
    """The core's own memory for ``settings`` (used when no memory instance is handed in).

    A memory type provided by a plugin must be built by the assembly
    (:func:`rlgraph_core.assemble.assemble`) and passed as ``memory=``.
    """
    kwargs = settings.model_dump(exclude={"type"})
    if settings.type == "replay":
        return ReplayMemory(**kwargs, seed=seed)
    if settings.type == "prioritized_replay":
        return PrioritizedReplay(**kwargs, seed=seed)
    raise ConfigError(
        f"The memory type '{settings.type}' is not built into rlgraph-core; build the agent "
        f"through rlgraph_core.assemble.assemble (which resolves plugin memories) or pass "
        f"memory=<instance> to the agent."
    )


class OffPolicyAgent(Agent):
    """Base of replay agents (DQN, SAC): memory, schedule, target sync, priorities, roles.

    Args:
        config: an :class:`OffPolicyConfig` subclass.
        observation_space / action_space: rlgraph spaces without batch rank.
        backend: a backend instance.
        seed: seeds weights, exploration and replay sampling.
        num_envs: number of vector envs feeding :meth:`observe` (and of trajectories' N axis).
        memory: the replay memory; None builds the core memory ``config.memory`` names.
        components: resolver for swappable component slots (see :class:`Agent`).
    """

    def _setup_model(self) -> None:
        config, seed, memory = self.config, self.seed, self.agent_setup.memory
        super()._setup_model()
        self.lr_schedule = as_schedule(config.optimizer.learning_rate)
        self.memory = memory if memory is not None else builtin_memory(config.memory, seed)
        self.prioritized = bool(getattr(self.memory, "prioritized", False))
        self.nstep = NStepAssembler(self.num_envs, config.n_step, config.gamma)
        self._last_train = 0
        self._last: dict[str, Any] | None = None
        self._round_loop: FusedLoop | None = None  # the fused round, made on first use

    #: Whether the subclass provides the fused-round hooks (:meth:`_round_arrays` ...).
    supports_fused_rounds: ClassVar[bool] = False

    # --- what a subclass provides ----------------------------------------------------------
    @abc.abstractmethod
    def _gradient_step(self, sample: Mapping[str, np.ndarray]) -> tuple[dict[str, Any], Any]:
        """One gradient step on ``sample``: ``(metrics as backend scalars, |TD| per sample)``."""

    @abc.abstractmethod
    def _td_errors(self, batch: Mapping[str, np.ndarray]) -> np.ndarray:
        """``|TD error|`` of each transition under the current weights, without learning."""

    @abc.abstractmethod
    def _sync_target(self) -> None:
        """Move the target network(s) towards the online ones (Polyak with ``tau``)."""

    @abc.abstractmethod
    def _stored_actions(self, actions: np.ndarray) -> np.ndarray:
        """Env actions -> the actions replay stores and the loss takes."""

    def stored_actions(self, actions: np.ndarray) -> np.ndarray:
        """Env actions as replay stores them and :meth:`learn` takes them (a dataset source
        encodes a dataset's actions with it)."""
        return self._stored_actions(actions)

    def stored_observations(self, obs):
        """Observations as replay stores them (float32 floats, uint8 images as they are, a dict
        per key for a Dict space), for a dataset source."""
        return to_obs_array(obs, self.observation_space)

    def _round_arrays(self, samples: Sequence[Mapping[str, np.ndarray]]) -> list[np.ndarray]:
        """The per-step inputs of a fused round from its K samples, each stacked ``[K, ...]``, in
        the order :meth:`_round_step` takes them (before ``due``); draws any per-step noise in the
        order :meth:`_gradient_step` draws it."""
        raise NotImplementedError(f"{type(self).__name__} does not fuse update rounds.")

    def _round_step(self, *inputs: Any) -> tuple[Any, ...]:
        """Body of the fused round, traced: one gradient step on step ``k``'s rows of
        :meth:`_round_arrays` (the train steps' ``inline``), then ``target_sync.sync_if(due)``
        (``due``, the last input, is 1.0 where the target update is due); returns tensors."""
        raise NotImplementedError(f"{type(self).__name__} does not fuse update rounds.")

    def _round_result(self, outputs: Sequence[Any]) -> tuple[dict[str, Any], Any]:
        """``(last step's metrics, |TD| [K, B])`` from the stacked outputs of :meth:`_round_step`,
        given as numpy arrays (the metrics are then numpy scalars, which every backend's
        ``to_numpy`` takes)."""
        raise NotImplementedError(f"{type(self).__name__} does not fuse update rounds.")

    def _stored_action_space(self) -> Space | None:
        """The space of one action as replay stores it (what :meth:`_stored_actions` returns); None: unchecked."""
        return None

    def replay_record_spaces(self) -> dict[str, Space] | None:
        """One n-step record as this agent inserts it: obs of the observation space (float ones as
        float32, others, such as uint8 images, in their own dtype), stored actions, float32
        rewards, bool terminals, float32 discounts in ``[0, 1]``."""
        if not isinstance(self.observation_space, LeafSpace):
            return None
        obs = self.observation_space
        if np.dtype(obs.dtype).kind == "f":
            obs = FloatBox(shape=obs.shape)
        actions = self._stored_action_space()
        spaces: dict[str, Space] = {
            "obs": obs,
            "actions": actions,
            "rewards": FloatBox(shape=()),
            "next_obs": obs,
            "terminals": BoolBox(shape=()),
            "discounts": FloatBox(0.0, 1.0, shape=()),
        }
        return None if actions is None else spaces

    def _memory_capacity(self) -> int | None:
        own = super()._memory_capacity()
        return own if own is not None else int(self.config.memory.capacity)

    def _metric_floats(self, last: dict[str, Any]) -> dict[str, float]:
        """Float metrics from the last step's backend scalars (converted only when reported)."""
        return {k: float(self.backend.to_numpy(v)) for k, v in last.items() if k != "log_probs"}

    # --- acting: observe (local loop) and postprocess (actor role) -------------------------
    def observe(self, obs, actions, rewards, next_obs, terminated, truncated):
        """Fold one vector-env step into n-step transitions and insert the completed ones."""
        self._count_env_steps(len(rewards))
        out = self.nstep.add(
            to_obs_array(obs, self.observation_space),
            self._stored_actions(actions),
            rewards,
            to_obs_array(next_obs, self.observation_space),
            terminated,
            truncated,
        )
        if out is not None:
            self.memory.insert(out)

    def postprocess(self, trajectory: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Actor role: n-step transitions of a time-major trajectory, ready for a replay memory.

        ``trajectory`` holds :data:`TRAJECTORY_KEYS`, each ``[T, N, ...]`` with N = ``num_envs``
        and env actions as :meth:`act` returned them. Steps are folded in order; transitions still
        pending at the end carry over to the next call (the actor's envs continue). The result
        has the memory's fields plus ``policy_version`` per record and, for prioritized agents,
        ``priorities`` (``|TD|`` under this actor's weights: insert, then ``update_priorities``).
        Counts the ``T * N`` env steps into :attr:`timesteps`.
        """
        check_trajectory_keys(trajectory, TRAJECTORY_KEYS)
        parts = []
        for t in range(len(trajectory["rewards"])):
            step = [_at(trajectory[k], t) for k in TRAJECTORY_KEYS]
            self._count_env_steps(len(step[2]))
            out = self.nstep.add(
                to_obs_array(step[0], self.observation_space),
                self._stored_actions(step[1]),
                step[2],
                to_obs_array(step[3], self.observation_space),
                step[4],
                step[5],
            )
            if out is not None:
                parts.append(out)
        return self._insert_batch(parts)

    def _insert_batch(self, parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """The records ``parts`` (each ``{field: [n, ...]}``) as one insert batch for the memory, with
        ``policy_version`` per record and, for prioritized agents, their float32 ``priorities``;
        ``{}`` when there are none."""
        if not parts:
            return {}
        batch = {k: concat([p[k] for p in parts]) for k in parts[0]}
        batch["policy_version"] = np.full(len(batch["rewards"]), self.weights_version, np.int64)
        if self.prioritized:
            batch["priorities"] = np.asarray(self._td_errors(batch), np.float32)
        return batch

    # --- learning: update (local loop) and learn (learner role) ----------------------------
    def _due_gradient_steps(self) -> int:
        """Gradient steps the schedule asks for now (0: none); marks the round as done."""
        if not round_due(self.config, self.timesteps, len(self.memory), self._last_train):
            return 0
        self._last_train = self.timesteps
        return self.config.gradient_steps

    def _sync_learning_rate(self) -> None:
        lr = self.lr_schedule(self.timesteps)
        steps = list(self.train_steps().values())
        if lr != steps[0].learning_rate:
            for step in steps:
                step.learning_rate = lr

    def _learn_step(self, sample: Mapping[str, np.ndarray]):
        """One gradient step plus the target schedule; returns the |TD| backend tensor."""
        self._last, td = self._gradient_step(sample)
        self.updates += 1
        self.weights_version += 1
        if self.updates % self.config.target_update_interval == 0:
            self._sync_target()
        return td

    def update(self, batch=None):
        """Local loop: the scheduled gradient steps from the own memory (one step on ``batch``).

        Returns the last step's metrics as backend scalars, or None when nothing was due.
        """
        steps = 1 if batch is not None else self._due_gradient_steps()
        if steps == 0:
            return None
        self._sync_learning_rate()
        if batch is None and self._fuses_round():
            self._fused_round(steps)
            return self._last
        for _ in range(steps):
            sample = batch if batch is not None else self.memory.sample(self.config.batch_size)
            td = self._learn_step(sample)
            if batch is None and self.prioritized and "indices" in sample:
                self.memory.update_priorities(sample["indices"], self.backend.to_numpy(td))
        return self._last

    def _fuses_round(self) -> bool:
        """Whether a round from the own memory runs as one fused program (module docstring)."""
        cfg = self.config
        return (
            self.supports_fused_rounds
            and cfg.fuse_rounds
            and self.backend.fuses_loops
            and all(step.gradient_hook is None for step in self.train_steps().values())
            and (not self.prioritized or cfg.fuse_prioritized_rounds)
            # A fused loop takes flat per-step tensors; a Dict observation's batches are dicts
            # (one array per key), so their rounds run step by step (the same result).
            and not isinstance(self.observation_space, Dict)
        )

    def learn_from(self, memory, steps: int) -> None:
        """Learner role on a memory the agent does not own (a dataset's, see
        :class:`~rlgraph_core.datasets.DatasetSource`): ``steps`` gradient steps on batches
        sampled from ``memory``, target syncs included, as one fused program where this agent
        fuses rounds (module docstring), else step by step. Priorities are not updated."""
        self._sync_learning_rate()
        if self._fuses_round():
            self._fused_round(steps, memory)
            return
        for _ in range(steps):
            self._learn_step(memory.sample(self.config.batch_size))

    def _fused_round(self, steps: int, memory=None) -> None:
        """``steps`` gradient steps, target syncs included, as one program (module docstring);
        batches from ``memory`` (default: the own memory, whose priorities are then updated)."""
        cfg = self.config
        to_t = self.backend.to_tensor
        own = memory is None
        samples = [(self.memory if own else memory).sample(cfg.batch_size) for _ in range(steps)]
        # the target moves after the steps where _learn_step would move it
        due = target_due(self.updates, steps, cfg.target_update_interval)
        per_step = [to_t(x) for x in self._round_arrays(samples)] + [to_t(due)]
        loop = self._round_loop
        if loop is None:
            loop = self._round_loop = self.backend.fused_loop(self._round_step)
        # The stacked outputs as numpy once (the loop has synced on its guard already): a row of a
        # numpy array costs nothing, a row of a framework's device array is a dispatched op (~28 us
        # per metric measured on one backend).
        to_np = self.backend.to_numpy
        self._last, td = self._round_result([to_np(o) for o in loop(per_step)])
        self.updates += steps
        self.weights_version += steps
        if self.prioritized and own:
            td = self.backend.to_numpy(td)
            for sample, td_k in zip(samples, td):
                if "indices" in sample:
                    self.memory.update_priorities(sample["indices"], td_k)

    def _stacked_transitions(self, samples: Sequence[Mapping[str, np.ndarray]]) -> list[np.ndarray]:
        """The K samples' loss inputs, each stacked ``[K, B, ...]``: obs, actions, rewards,
        next_obs, terminals, discounts, weights (the defaults of :meth:`_defaults` filled in)."""
        defaults = [self._defaults(s) for s in samples]
        fields = [stack_steps([s[k] for s in samples]) for k in ("obs", "actions", "rewards", "next_obs", "terminals")]
        return fields + [stack_steps([d for _, d in defaults]), stack_steps([w for w, _ in defaults])]

    def learn(self, batch: Mapping[str, np.ndarray]) -> LearnResult:
        """Learner role: one gradient step on ``batch`` (e.g. sampled from a remote replay shard).

        ``batch`` has obs, actions, rewards, next_obs, terminals and optionally discounts
        (default ``gamma``), weights (importance weights, default 1), indices and
        policy_version. For prioritized agents given ``indices`` the result carries the new
        priorities to send back to the memory that sampled the batch.
        """
        self._sync_learning_rate()
        staleness = self._staleness(batch)
        td = self._learn_step(batch)
        metrics = {"updates": float(self.updates), **self._metric_floats(self._last), **staleness}
        if self.prioritized and "indices" in batch:
            return LearnResult(metrics, np.asarray(self.backend.to_numpy(td), np.float32), np.asarray(batch["indices"]))
        return LearnResult(metrics)

    def _transition_tensors(self, sample) -> tuple:
        """The loss inputs of a replay sample, as backend tensors: ``(obs, actions, rewards,
        next_obs, terminals, discounts, weights)`` (the TD losses of DQN and SAC take them in this order)."""
        to_t = self.backend.to_tensor
        weights, discounts = self._defaults(sample)
        return tuple(
            to_t(x)
            for x in (
                sample["obs"],
                sample["actions"],
                sample["rewards"],
                sample["next_obs"],
                sample["terminals"],
                discounts,
                weights,
            )
        )

    def _defaults(self, sample: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """``(importance weights, discounts)`` of a sample, with defaults 1 and ``gamma``."""
        n = len(sample["rewards"])
        weights = sample.get("weights")
        if weights is None:
            weights = np.ones(n, np.float32)
        discounts = sample.get("discounts")
        if discounts is None:
            discounts = np.full(n, self.config.gamma, np.float32)  # a given batch: one-step transitions
        return weights, discounts

    def last_loss(self) -> float | None:
        """The last step's ``loss`` scalar alone (one host read), not the whole :meth:`metrics`:
        the run recorder asks for it after every update."""
        loss = None if self._last is None else self._last.get("loss")
        return None if loss is None else float(self.backend.to_numpy(loss))

    def metrics(self) -> dict[str, float]:
        """Latest training metrics (converting the last step's scalars to floats only here)."""
        steps = self.train_steps()
        out = {"updates": self.updates, "learning_rate": next(iter(steps.values())).learning_rate}
        if self._last is not None:
            out.update(self._metric_floats(self._last))
        return out

    # --- checkpoint state ------------------------------------------------------------------
    def get_state(self):
        """Optimizer states (``optimizer/<step>/*``), the memory (``memory/*``) and counters.

        The memory's ``state_dict`` (records, counters, sampling RNG) is stored so a resumed run
        samples from the same experience. Pending n-step transitions are not stored: a resumed
        run starts new episodes (the envs are reset), so they could never be completed.
        """
        arrays = {}
        for name, step in self.train_steps().items():
            arrays.update({f"optimizer/{name}/{k}": v for k, v in step.get_state().items()})
        arrays.update({f"memory/{k}": v for k, v in self.memory.state_dict().items()})
        _, counters = super().get_state()
        counters.update(last_train=self._last_train, rng=self.rng.bit_generator.state)
        return arrays, counters

    def set_state(self, arrays, counters):
        """Restore :meth:`get_state`'s output; the memory is validated and loaded first."""
        memory_state = {k[len("memory/") :]: v for k, v in arrays.items() if k.startswith("memory/")}
        if _empty_of_another_capacity(memory_state, self.memory):
            # An empty memory carries no experience: e.g. the placeholder of an offline run's learner
            # (its data was the dataset's), fine-tuned online with its own replay.
            memory_state = {}
        if memory_state:
            try:
                self.memory.load_state_dict(memory_state)  # validates everything before changing
            except ValueError as exc:
                raise CheckpointError(
                    f"The checkpoint's replay memory cannot be restored into this agent's "
                    f"'{self.config.memory.type}' memory (capacity {self.config.memory.capacity}): {exc} "
                    f"Resume with the memory settings the checkpoint was written with."
                ) from None
        self.nstep.reset()
        super().set_state(arrays, counters)
        self._last_train = int(counters.get("last_train", 0))
        if "rng" in counters:
            self.rng.bit_generator.state = counters["rng"]
        for name, step in self.train_steps().items():
            prefix = f"optimizer/{name}/"
            state = {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}
            if state:
                step.set_state(state)


def _empty_of_another_capacity(state: Mapping[str, Any], memory) -> bool:
    """Whether a saved memory ``state`` holds no records and another capacity than ``memory``'s."""
    size, capacity = state.get("size"), state.get("capacity")
    if size is None or capacity is None or int(np.asarray(size)) != 0:
        return False
    return int(np.asarray(capacity)) != int(getattr(memory, "capacity", -1))
