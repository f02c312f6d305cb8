"""The agent API shared by every algorithm, and the constructor contract every agent follows.

An agent plays three roles that an executor may use together (the local executor) or apart
(distributed executors, which run many actor copies and one learner):

* **actor**: :meth:`Agent.act` on a batch of observations, and :meth:`Agent.postprocess`, which
  turns a trajectory the actor collected into a learner batch (n-step folding, GAE, initial
  priorities), computed on the actor with its current weights;
* **learner**: :meth:`Agent.learn` takes one batch and returns a :class:`LearnResult` (metrics,
  and new per-sample priorities for prioritized replay);
* **weights**: :meth:`Agent.get_versioned_weights` / :meth:`Agent.set_weights` move numpy
  weights with a version number (the learner's count of gradient updates), so an actor can tell
  how stale its policy is.

:meth:`Agent.observe` and :meth:`Agent.update` are the single-process loop built on these roles.
"""

from __future__ import annotations

import abc
import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple

import numpy as np

from rlgraph_core.checkpoint import (
    dtype_family,
    is_count,
    load_checkpoint_into,
    save_checkpoint,
    weight_names_problem,
    weight_problem,
)
from rlgraph_core.errors import CheckpointError, PluginError
from rlgraph_core.evaluation import agent_policy, evaluate_policy
from rlgraph_core.memories.snapshot import RecordBounds, replay_values_problem
from rlgraph_core.spaces import Space

#: The keyword arguments every agent constructor accepts after ``(config, observation_space,
#: action_space, backend)``: this is exactly what :func:`rlgraph_core.assemble.assemble` passes.
AGENT_CONSTRUCTOR_KWARGS = ("seed", "num_envs", "memory", "components")

#: A gradient hook: receives every gradient of one train step as one flat float32 buffer and
#: returns a buffer of the same shape (e.g. the average over processes).
GradientHook = Callable[[np.ndarray], np.ndarray]


#: The most bytes a checkpoint state array may hold when nothing else bounds it (optimizer
#: slots are bounded by their variables, replay records by the memory's capacity); agents with
#: a replay memory allow ``64 * capacity`` bytes where that is more.
MAX_STATE_ARRAY_BYTES = 2**31

#: Per-record bytes allowed for replay fields of an agent that declares no record spaces.
MAX_UNDECLARED_RECORD_BYTES = 2**24


def rng_state_problem(name: str, state: Any) -> str | None:
    """Why ``state`` is not a numpy generator state (a ``bit_generator.state`` dict), or None."""
    probe = np.random.default_rng()
    try:
        probe.bit_generator.state = state
    except (TypeError, ValueError, KeyError, OverflowError) as exc:
        return f"counter '{name}' is not a generator state ({type(exc).__name__}: {exc})."
    return None


class VersionedWeights(NamedTuple):
    """Numpy weights and the version (learner gradient updates) that produced them."""

    version: int
    arrays: dict[str, np.ndarray]


@dataclass
class LearnResult:
    """What :meth:`Agent.learn` returns.

    Attributes:
        metrics: float metrics of the update (losses, learning rate ...).
        priorities: for prioritized agents given a batch with ``indices``: the new priority
            (``|TD error|``) of every sample, aligned with ``indices``; else None.
        indices: the batch's ``indices`` the priorities belong to (None without priorities).
    """

    metrics: dict[str, float] = field(default_factory=dict)
    priorities: np.ndarray | None = None
    indices: np.ndarray | None = None


def check_agent_class(agent_class: type, name: str) -> None:
    """Raise a PluginError unless ``agent_class`` accepts the agent constructor contract.

    The contract: ``agent_class(config, observation_space, action_space, backend, *, seed,
    num_envs, memory, components)`` (see :data:`AGENT_CONSTRUCTOR_KWARGS`).
    """
    try:
        params = inspect.signature(agent_class).parameters
    except (TypeError, ValueError):
        return  # not introspectable (a C extension): trust it
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    missing = [k for k in AGENT_CONSTRUCTOR_KWARGS if k not in params]
    if missing:
        raise PluginError(
            f"The agent '{name}' ({agent_class.__module__}.{agent_class.__qualname__}) does not follow the "
            f"agent constructor contract: it lacks the keyword argument(s) {', '.join(missing)}. An agent "
            f"class must accept (config, observation_space, action_space, backend, *, seed=0, num_envs=1, "
            f"memory=None, components=None); see docs/plugins.md."
        )


@dataclass(frozen=True)
class AgentSetup:
    """What an agent is built from besides its config, spaces and backend: the keyword arguments
    of the constructor contract (:data:`AGENT_CONSTRUCTOR_KWARGS`), kept together.

    Attributes:
        seed: seeds weight initialisation, exploration and sampling.
        num_envs: how many vector envs feed :meth:`Agent.observe` at once.
        memory: a replay memory instance (None: the agent builds the one its config names).
        components: resolver ``(kind, name) -> component class`` for the config's component slots.
    """

    seed: int = 0
    num_envs: int = 1
    memory: Any = None
    components: Callable[[str, str], type] | None = None


class Agent(abc.ABC):
    """A root component, its config, and the loop-facing API.

    Subclasses build their root component in ``__init__`` and implement :meth:`act`,
    :meth:`observe`, :meth:`update`, :meth:`postprocess`, :meth:`learn` and :meth:`train_steps`.
    An agent never knows which executor runs it: it takes numpy in and gives numpy out.

    Args:
        config: the agent's validated config model.
        observation_space / action_space: rlgraph spaces (without batch rank).
        backend: a built :class:`~rlgraph_core.backend.Backend`.
        seed: seeds weight initialisation and exploration.
        num_envs: how many vector envs feed :meth:`observe` at once.
        memory: a replay memory instance for agents that use one (else ignored).
        components: a resolver ``name -> component class`` for the config's swappable component
            slots (preprocessor ...); None resolves built-in names only.
    """

    def __init__(
        self,
        config,
        observation_space: Space,
        action_space: Space,
        backend,
        *,
        seed: int = 0,
        num_envs: int = 1,
        memory=None,
        components: Callable[[str, str], type] | None = None,
    ):
        self.config = config
        self.observation_space = observation_space
        self.action_space = action_space
        self.backend = backend
        self.seed = seed
        self.num_envs = int(num_envs)
        self.components = components
        self.rng = np.random.default_rng(seed)
        self.timesteps = 0
        self.updates = 0
        self.weights_version = 0
        self.build_report = None
        self.agent_setup = AgentSetup(seed, self.num_envs, memory, components)
        self._setup_model()

    #: The run's env-step counter that owns :attr:`timesteps` while a run records this agent
    #: (:class:`~rlgraph_core.execution.counters.StepCounter` sets it); None: the agent counts the
    #: env steps it observes or postprocesses itself (an actor, or a loop written by hand).
    step_counter: Any = None

    def _count_env_steps(self, n: int) -> None:
        """Count ``n`` env steps this agent observed into :attr:`timesteps`, unless a run's counter
        owns the count (:attr:`step_counter`: it counts every worker's steps before the agent learns)."""
        if self.step_counter is None:
            self.timesteps += int(n)

    def _setup_model(self) -> None:
        """Build what the agent needs from :attr:`config`, the spaces, :attr:`backend` and
        :attr:`agent_setup` (Stable-Baselines3's shape): each family base and algorithm overrides it
        and calls ``super()._setup_model()``, so the constructor's arguments are declared once, here."""

    def _setup_arguments(self) -> tuple:
        """``(config, observation_space, action_space, backend, seed, components)``, for the first line
        of a :meth:`_setup_model` that reads them as local names."""
        return self.config, self.observation_space, self.action_space, self.backend, self.seed, self.components

    # --- acting and learning (the single-process loop) -------------------------------------
    @abc.abstractmethod
    def act(self, obs: np.ndarray, explore: bool = True) -> np.ndarray:
        """Actions for a batch of observations ``[B, ...]``.

        A stateful (recurrent) agent, one whose :meth:`initial_state` is not None, takes two more
        keyword arguments and returns its next state with the actions: ``act(obs, explore, *,
        state, episode_start) -> (actions, state)``, where ``state`` is what :meth:`initial_state`
        or the previous call returned and ``episode_start`` ``[B]`` bool marks the envs whose
        episode starts at this step (their state is reset before they act). A feed-forward agent
        keeps the one-argument form.
        """

    #: The space of one env's policy state (a Dict space with batch rank), or None: a
    #: feed-forward agent carries no state between steps.
    state_space: Space | None = None

    def initial_state(self, batch: int) -> dict[str, np.ndarray] | None:
        """The policy state of ``batch`` envs at an episode start (numpy, ``{key: [batch, ...]}``),
        or None: this agent's policy carries no state (the default; the env runner, evaluation and
        ``predict`` then call :meth:`act` without one, at no cost)."""
        return None

    def policy_outputs(self, obs) -> dict[str, Any]:
        """The greedy policy as named backend tensors, for a batch ``obs`` (a backend tensor, float32).

        ``action`` is what ``act(obs, explore=False)`` returns (env-ready: offset, scaled and
        clipped as the env expects); the other entries are what the policy computes on the way
        (``q_values``, ``logits``, ``mean``, ``value``). Written against ``backend.ops`` only, so
        :mod:`rlgraph_core.export` can trace it into an ONNX graph. Agents that cannot be
        exported do not override it.
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not describe its greedy policy (policy_outputs), so it cannot be exported."
        )

    @abc.abstractmethod
    def observe(self, obs, actions, rewards, next_obs, terminated, truncated) -> None:
        """Record one vector-env step (every argument has leading dim = number of envs).

        ``next_obs`` is the true next observation (final observation where an episode ended).
        """

    @abc.abstractmethod
    def update(self, batch: dict[str, np.ndarray] | None = None) -> dict[str, Any] | None:
        """Learn: from ``batch`` if given, else as the agent's own schedule says.

        Returns metrics of the update(s) done, or None when the schedule did nothing.
        """

    # --- roles for distributed executors ---------------------------------------------------
    # The roles are not abstract: an agent that only runs under the local executor may leave
    # them out; a distributed executor then says which role is missing.
    def postprocess(self, trajectory: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Actor side: turn a collected trajectory into a batch :meth:`learn` accepts.

        The batch carries ``policy_version`` (one int per record): the weights version that
        acted, from which the learner measures staleness.
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not implement the actor role (postprocess); "
            f"it runs only under the local executor."
        )

    def learn(self, batch: Mapping[str, np.ndarray]) -> LearnResult:
        """Learner side: learn from one batch (without the agent's own memory)."""
        raise NotImplementedError(
            f"{type(self).__name__} does not implement the learner role (learn); it runs only under the local executor."
        )

    def train_steps(self) -> dict[str, Any]:
        """The backend train steps of this agent, by name (``{"q": step}``, SAC has three)."""
        return {}

    def set_gradient_hook(self, hook: GradientHook | None) -> None:
        """Install ``hook`` between gradient computation and application in every train step.

        The hook sees one flat float32 buffer of all gradients of a step and returns the buffer
        to apply (an allreduce average, for data-parallel learners); None removes it.
        """
        steps = self.train_steps()
        if not steps and hook is not None:
            raise NotImplementedError(
                f"{type(self).__name__} exposes no train steps, so gradients cannot be "
                f"averaged across processes; implement train_steps()."
            )
        for step in steps.values():
            step.gradient_hook = hook

    def metrics(self) -> dict[str, float]:
        """Latest training metrics (loss, schedules ...) for the executor's reports."""
        return {"updates": self.updates}

    def last_loss(self) -> float | None:
        """The last update's ``loss`` metric (None when the agent reports none), which the run
        recorder checks for finiteness after every update; an agent may read it without building
        all of :meth:`metrics`."""
        loss = self.metrics().get("loss")
        return None if loss is None else float(loss)

    def _staleness(self, batch: Mapping[str, np.ndarray]) -> dict[str, float]:
        """``{"staleness": ...}``: learner version minus the mean version that acted (if known)."""
        versions = batch.get("policy_version")
        if versions is None:
            return {}
        return {"staleness": float(self.weights_version - np.mean(versions))}

    # --- weights ---------------------------------------------------------------------------
    @abc.abstractmethod
    def variables(self) -> dict[str, Any]:
        """Every variable of the agent (backend objects), keyed by stable scope names."""

    def get_weights(self) -> dict[str, np.ndarray]:
        """All variables as numpy arrays (backend-neutral: dense weights are ``[in, out]``)."""
        return {k: self.backend.to_numpy(v).copy() for k, v in self.variables().items()}

    def get_versioned_weights(self) -> VersionedWeights:
        """``(version, arrays)``: the weights and how many learner updates produced them."""
        return VersionedWeights(self.weights_version, self.get_weights())

    def weight_specs(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """``{name: (shape, dtype)}`` of every variable, as :meth:`get_weights` returns them."""
        out = {}
        for name, var in self.variables().items():
            arr = np.asarray(self.backend.to_numpy(var))
            out[name] = (tuple(arr.shape), arr.dtype)
        return out

    def check_weights(self, weights: Mapping[str, Any]) -> None:
        """Raise CheckpointError unless ``weights`` has exactly this agent's names, shapes and dtype families."""
        own = self.weight_specs()
        names = weight_names_problem(own, weights)
        if names:
            raise CheckpointError(f"Weights {names}")
        for name, (want_shape, want_dtype) in own.items():
            value = np.asarray(weights[name])
            problem = weight_problem(name, value.shape, value.dtype, want_shape, want_dtype)
            if problem:
                raise CheckpointError(f"{problem} No weight was changed.")

    def set_weights(self, weights: Mapping[str, np.ndarray] | VersionedWeights, version: int | None = None) -> None:
        """Load numpy weights; names, shapes and dtype families must match (nothing is changed otherwise).

        ``weights`` may be a :class:`VersionedWeights` (its version is taken over) or a plain
        dict (then ``version``, when given, becomes this agent's :attr:`weights_version`).
        """
        if isinstance(weights, VersionedWeights):
            version, weights = weights.version, weights.arrays
        self.check_weights(weights)  # every array, before the first is assigned
        for name, var in self.variables().items():
            self.backend.assign_numpy(var, np.asarray(weights[name]))
        if version is not None:
            self.weights_version = int(version)

    # --- state beyond weights (optimizer, counters) for checkpoints -------------------------
    def get_state(self) -> tuple[dict[str, np.ndarray], dict]:
        """Extra arrays (optimizer state ...) and JSON-able counters for a checkpoint."""
        return {}, {"timesteps": self.timesteps, "updates": self.updates, "weights_version": self.weights_version}

    def set_state(self, arrays: dict[str, np.ndarray], counters: dict) -> None:
        """Restore what :meth:`get_state` returned."""
        self.timesteps = int(counters.get("timesteps", 0))
        self.updates = int(counters.get("updates", 0))
        self.weights_version = int(counters.get("weights_version", self.updates))

    def replay_record_spaces(self) -> dict[str, Space] | None:
        """The space of one record of each replay field this agent inserts (None: no replay memory).

        Agents that keep a replay memory as ``self.memory`` and store its ``state_dict`` under
        ``memory/`` in :meth:`get_state` declare here what they insert (``"obs"``,
        ``"actions"`` ...), so a checkpoint's records are checked before they are loaded: shape
        and dtype exactly, values against the bounds of spaces with finite bounds.
        """
        return None

    def optimizer_state_steps(self) -> dict[str, Any]:
        """``{prefix: train step}``: where :meth:`get_state` stores each step's optimizer state.

        The default is ``optimizer/<step name>/`` for every step of :meth:`train_steps`.
        """
        return {f"optimizer/{name}/": step for name, step in self.train_steps().items()}

    def _memory_capacity(self) -> int | None:
        """The replay memory's capacity (``self.memory.capacity``), or None without one."""
        capacity = getattr(getattr(self, "memory", None), "capacity", None)
        return capacity if isinstance(capacity, int) and is_count(capacity) else None

    def state_array_problem(self, name: str, shape: tuple[int, ...], dtype: np.dtype) -> str | None:
        """Why a checkpoint state array of ``shape``/``dtype`` cannot be this agent's ``name``, or None.

        Called with the ``.npy`` header only, before any data is read, so every size is bounded
        here: optimizer slots by their variables' shapes, replay records by the memory's capacity
        and :meth:`replay_record_spaces`, anything else by :data:`MAX_STATE_ARRAY_BYTES`.
        """
        shape, dtype = tuple(int(d) for d in shape), np.dtype(dtype)
        if dtype_family(dtype) is None:
            return "is not numeric; checkpoint state arrays are bool, integer or float"
        if name.startswith("optimizer/"):
            steps = self.optimizer_state_steps()
            prefix = max((p for p in steps if name.startswith(p)), key=len, default=None)
            if prefix is None:
                return f"is optimizer state of no train step of this agent (its steps store under {sorted(steps)})"
            return _optimizer_array_problem(name[len(prefix) :], shape, dtype, steps[prefix])
        capacity = self._memory_capacity()
        records = ("memory/data/", "memory/frames/", "memory/frame_index/")
        if not name.startswith(records):
            known = self._known_state_names()
            if known is not None and name not in known:
                shown = sorted(known)
                return (
                    f"is not state this agent keeps (besides optimizer slots and replay records it keeps "
                    f"{shown[:8]}{' ...' if len(shown) > 8 else ''}); the checkpoint was not written for this agent"
                )
        if name.startswith(records):
            bounds = RecordBounds(capacity, self.replay_record_spaces(), MAX_UNDECLARED_RECORD_BYTES)
            return bounds.array_problem(name[len("memory/") :], shape, dtype)
        limit = MAX_STATE_ARRAY_BYTES if capacity is None else max(MAX_STATE_ARRAY_BYTES, 64 * capacity)
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes > limit:
            return f"claims {nbytes:,} bytes, more than the {limit:,} bytes a state array of this agent may hold"
        return None

    def extra_state_names(self) -> frozenset[str] | None:
        """Names of the arrays :meth:`get_state` stores besides ``optimizer/...`` and ``memory/...``.

        A checkpoint's state array with any other name is refused from its header, before any
        data is read (so a hostile ``state.npz`` cannot make a load decompress gigabytes of
        arrays nobody asked for). The default is none; an agent that stores more names them
        here, or returns None to bound such arrays only by :data:`MAX_STATE_ARRAY_BYTES`.
        """
        return frozenset()

    def _known_state_names(self) -> set[str] | None:
        """Every non-optimizer, non-record state name a checkpoint of this agent may hold (None: any)."""
        extra = self.extra_state_names()
        if extra is None:
            return None
        memory = getattr(self, "memory", None)
        keys = getattr(memory, "_state_keys", None)
        if memory is not None and not callable(keys):
            return None  # a memory that does not say what it stores: bounded by size only
        return set(extra) | {f"memory/{k}" for k in (keys() if callable(keys) else ())}

    def state_problem(self, arrays: Mapping[str, np.ndarray], counters: Mapping[str, Any]) -> str | None:
        """Why :meth:`set_state` must not take ``arrays``/``counters``, or None; changes nothing.

        Checks the counters (non-negative integers, generator states) and the replay records'
        values against :meth:`replay_record_spaces` (e.g. actions within the action space); the
        memory's own ``load_state_dict`` checks the rest before it changes.
        """
        if not isinstance(counters, Mapping):
            return f"its counters are {counters!r}, not a mapping."
        for key in ("timesteps", "updates", "weights_version", "last_train"):
            if key in counters and not is_count(counters[key]):
                return f"counter '{key}' is {counters[key]!r}, not a non-negative integer."
        if "rng" in counters:
            problem = rng_state_problem("rng", counters["rng"])
            if problem:
                return problem
        data = {k[len("memory/data/") :]: v for k, v in arrays.items() if k.startswith("memory/data/")}
        framed = {k[len("memory/frame_index/") :] for k in arrays if k.startswith("memory/frame_index/")}
        return replay_values_problem(data, self.replay_record_spaces(), "memory/data/", framed=framed)

    def save(self, directory: str, extra: dict | None = None) -> str:
        """Write a checkpoint (weights as npz, config and counters as JSON) atomically."""

        return save_checkpoint(self, directory, extra or {})

    def load(self, directory: str, *, for_training: bool = True) -> dict:
        """Load a checkpoint written by :meth:`save` into this agent; returns its metadata.

        ``for_training`` (default): everything needed to resume (weights, optimizer state,
        replay memory, counters); a checkpoint without counters is refused. ``for_training=False``
        (evaluation): the weights only, and missing counters only warn. Every array is checked
        against this agent before anything changes (see docs/checkpoints.md).
        """

        return load_checkpoint_into(self, directory, for_training=for_training)

    # --- evaluation ------------------------------------------------------------------------
    def evaluate(self, env, episodes: int = 10, seed: int | None = None, stop=None) -> dict[str, float] | None:
        """Run ``episodes`` greedy episodes on a gymnasium env; mean and std of the returns (None
        when ``stop()``, asked after every step, answered True: see
        :func:`~rlgraph_core.evaluation.evaluate_policy`)."""

        return evaluate_policy(agent_policy(self), env, episodes, seed, stop=stop)


def _optimizer_array_problem(key: str, shape: tuple[int, ...], dtype: np.dtype, step: Any) -> str | None:
    """Why optimizer state ``<variable index>/<slot>`` of ``shape``/``dtype`` does not fit ``step``, or None."""
    index, sep, slot = key.partition("/")
    if not sep or not index.isdigit() or not slot:
        return "is not named '<variable index>/<slot>' as optimizer state is"
    shapes = step.variable_shapes() if hasattr(step, "variable_shapes") else None
    if shapes is None:  # a backend that does not say: bound the size only
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes > MAX_STATE_ARRAY_BYTES:
            return f"claims {nbytes:,} bytes, more than the {MAX_STATE_ARRAY_BYTES:,} bytes allowed"
        return None
    i = int(index)
    if i >= len(shapes):
        return f"names optimized variable {i}, but this train step optimizes {len(shapes)} variables"
    if slot == "step":
        if math.prod(shape) != 1 or dtype_family(dtype) == "bool":
            return "must be a single step count"
        return None
    if dtype_family(dtype) != "float":
        return f"must be float (an optimizer slot of variable {i})"
    if shape != tuple(shapes[i]):
        return f"must have the shape {tuple(shapes[i])} of optimized variable {i}"
    return None
