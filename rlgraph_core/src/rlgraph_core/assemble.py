"""Assembly: turn a validated run config into built parts, resolving every name exactly once.

:func:`assemble` is the only place where registry names of a run (backend, agent, memory,
swappable components, loggers, executor) are looked up in a plugin manager. Everything below it
receives instances or factories: agents get a backend instance, a memory instance and a
component resolver; executors get the :class:`Assembly`. Nothing below calls
``get_plugin_manager()``, so an executor's (or a test's) own plugin manager is the one used.

Typical use::

    pm = get_plugin_manager()
    config = validate_config(raw, pm)
    assembly = assemble(config, pm)
    summary = assembly.executor_class(config, out_dir, assembly=assembly).run()

or, in one call, :func:`train`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import gymnasium as gym
import numpy as np

from rlgraph_core.agents.a2c import A2CAgent
from rlgraph_core.agents.base import Agent, check_agent_class
from rlgraph_core.agents.impala import ImpalaAgent
from rlgraph_core.agents.policy_set import PolicySet
from rlgraph_core.agents.dqn import DQNAgent
from rlgraph_core.agents.ppo import PPOAgent
from rlgraph_core.agents.recurrent_a2c import RecurrentA2CAgent
from rlgraph_core.agents.recurrent_dqn import RecurrentDQNAgent
from rlgraph_core.agents.recurrent_impala import RecurrentImpalaAgent
from rlgraph_core.agents.recurrent_ppo import RecurrentPPOAgent
from rlgraph_core.agents.self_play import SelfPlayOpponents
from rlgraph_core.backend.contract import Backend
from rlgraph_core.backend.settings import backend_entry
from rlgraph_core.callbacks import make_callbacks
from rlgraph_core.components.settings import component_entry
from rlgraph_core.components.sizing import check_networks_fit
from rlgraph_core.config.memory import make_memory
from rlgraph_core.config.run import multi_agent_layout, validate_backend_settings
from rlgraph_core.config.sections import MultiAgentConfig
from rlgraph_core.config.slots import validated_agent_config
from rlgraph_core.config.wrappers import resolve_wrappers
from rlgraph_core.envs import make_eval_env, make_vector_env, make_vector_env_from, missing_space_message
from rlgraph_core.errors import ConfigError, PluginError
from rlgraph_core.execution.loggers import start_loggers
from rlgraph_core.execution.settings import executor_entry
from rlgraph_core.integrations.video import TrainingVideos
from rlgraph_core.memories import PrioritizedReplay, ReplayMemory
from rlgraph_core.multi_agent import (
    is_pettingzoo_id,
    is_turn_based,
    make_pettingzoo_vector_env,
    pettingzoo_action_spaces,
    pettingzoo_agents,
    pettingzoo_observation_spaces,
)
from rlgraph_core.memories.sizing import check_replay_fits, estimate_replay_bytes
from rlgraph_core.plugins.manager import PluginManager, get_plugin_manager
from rlgraph_core.spaces import Space, SpaceError, from_gym, to_gym
from rlgraph_core.wrappers import apply_wrappers
from rlgraph_core.install_hints import extra_install_command


@dataclass
class Assembly:
    """The resolved parts of one run (see :func:`assemble`).

    Attributes:
        config: the validated run config.
        plugin_manager: the manager every name was resolved with (its ``hook`` relays the
            lifecycle hooks to logger plugins).
        backend: the backend instance the agent is built on.
        agent_class: the agent class ``config.agent.type`` names.
        memory_class: the replay memory class ``config.agent.memory.type`` names (None for agents
            without a memory).
        logger_classes: metric logger classes, in ``config.train.loggers`` order.
        executor_class: the executor class ``config.train.executor`` names.
        backend_factory: makes a further backend like :attr:`backend` (for workers that need their own).
        callbacks: callback objects of the run (:mod:`rlgraph_core.callbacks`): those
            ``config.train.callbacks`` names, and any a caller adds (the facade's ``learn``).
        env_factory: makes one environment (a gymnasium env instance or factory given to the
            facade) instead of ``config.env.id``; None: the config's env.
        env_wrappers: ``env -> env`` callables of ``config.env.wrappers``, resolved once (picklable).
        eval_wrappers: those of evaluation envs: ``config.env.wrappers`` without their
            training-only parts (reward clipping, a lost life ending the episode), so that
            evaluation measures the task itself (:meth:`rlgraph_core.wrappers.WrapperSettings.for_evaluation`).
        agent_policy: for a PettingZoo env, the policy of each of its agents (row order); the
            agent made is then a :class:`~rlgraph_core.agents.policy_set.PolicySet`. None: one agent.
        policy_configs: ``{policy: agent config}`` of a multi-agent run (``multi_agent.policies``).
    """

    config: Any
    plugin_manager: PluginManager
    backend: Backend
    agent_class: type
    memory_class: Any
    logger_classes: list[type]
    executor_class: type
    backend_factory: Callable[[], Backend] = field(repr=False)
    callbacks: list = field(default_factory=list)
    env_factory: Callable[[], Any] | None = field(default=None, repr=False)
    env_wrappers: list[Callable] = field(default_factory=list, repr=False)
    eval_wrappers: list[Callable] = field(default_factory=list, repr=False)
    agent_policy: list[str] | None = None
    policy_configs: dict[str, Any] = field(default_factory=dict, repr=False)

    def resolve_component(self, name: str, field: str) -> type:
        """The component class registered as ``name`` (a ConfigError names ``field`` otherwise)."""
        cls, _ = component_entry(_get(self.plugin_manager, "components", name, field))
        return cls.resolve() if hasattr(cls, "resolve") else cls

    def make_memory(self, seed: int):
        """A fresh replay memory as ``config.agent.memory`` says, or None without one."""
        settings = getattr(self.config.agent, "memory", None)
        if settings is None:
            return None
        return make_memory(self.plugin_manager, settings, seed=seed)

    def make_agent(
        self,
        observation_space,
        action_space,
        *,
        num_envs: int = 1,
        backend: Backend | None = None,
        seed: int | None = None,
        with_memory: bool = True,
    ) -> Agent:
        """Build the configured agent for gymnasium (or rlgraph) spaces.

        ``backend`` defaults to :attr:`backend`; ``seed`` to ``config.train.seed``. Without
        ``with_memory`` a replay agent gets a minimal memory (capacity 1, never filled): for
        actor or learner copies whose replay lives elsewhere.
        """
        seed = self.config.train.seed if seed is None else seed
        if self.agent_policy is not None:
            return self._make_policy_set(observation_space, action_space, backend, seed, with_memory)
        check_networks_fit(self.config.agent, _as_space(observation_space))
        if with_memory:
            self.check_memory_fits(observation_space, action_space)
        memory = self.make_memory(seed) if with_memory else self._placeholder_memory(seed)
        agent_class = agent_class_for(self.agent_class, self.config.agent)
        return agent_class(
            self.config.agent,
            _as_space(observation_space),
            _as_space(action_space),
            backend or self.backend,
            seed=seed,
            num_envs=num_envs,
            memory=memory,
            components=self.resolve_component,
        )

    def _make_policy_set(self, observation_space, action_space, backend, seed: int, with_memory: bool) -> PolicySet:
        """The run's policies (``multi_agent``), each an agent of its own config built for the rows of
        the agents mapped to it (``env.num_envs`` copies each); policy ``i`` is seeded ``seed + i``."""
        agent_policy = self.agent_policy or []
        sizes = self._policy_observation_sizes(observation_space)
        actions = self._policy_action_spaces(action_space)
        policies = {}
        for i, (name, config) in enumerate(self.policy_configs.items()):
            single = self.model_copy_with_agent(config)
            rows = self.config.env.num_envs * agent_policy.count(name)
            own_space = observation_space
            if name in sizes:  # its agents observe shorter vectors than the padded rows: its own length
                own_space = _vector_prefix(observation_space, sizes[name])
            policies[name] = single.make_agent(
                own_space,
                actions.get(name, action_space),
                num_envs=rows,
                backend=backend,
                seed=seed + i,
                with_memory=with_memory,
            )
        policy_set = PolicySet(
            policies,
            agent_policy,
            self.config.agent,
            _as_space(observation_space),
            _as_space(action_space),
            backend or self.backend,
            observation_sizes=sizes,
        )
        if is_turn_based(self.config.env.id):
            policy_set.opponents = self._make_opponents(policies, observation_space, action_space, backend, seed)
        return policy_set

    def _policy_observation_sizes(self, observation_space) -> dict[str, int]:
        """``{policy: n}`` for the policies whose agents all observe one vector of ``n`` < the rows'
        length (a Parallel env pads shorter observations); a policy over agents of several lengths
        (parameter sharing) reads the padded rows."""
        width = getattr(observation_space, "shape", None)
        if is_turn_based(self.config.env.id) or width is None or len(width) != 1:
            return {}
        own = pettingzoo_observation_spaces(self.config.env.id, self.config.env.kwargs)
        ids = len(own) if self._agent_indicator else 0  # the indicator comes first: a prefix still
        out = {}
        for name in self.policy_configs:
            lengths = {
                ids + int(np.prod(own[a].shape or ())) for a, p in zip(own, self.agent_policy or []) if p == name
            }
            if len(lengths) == 1 and next(iter(lengths)) < int(width[0]):
                out[name] = next(iter(lengths))
        return out

    def _policy_action_spaces(self, action_space) -> dict[str, Any]:
        """``{policy: Discrete(n)}`` for the policies whose agents act in fewer actions than the rows'
        Discrete space (a Parallel env takes the largest of its agents' Discrete spaces).

        Raises:
            ConfigError: a policy over agents with different action spaces, naming them.
        """
        width = int(getattr(action_space, "n", 0) or 0)
        if is_turn_based(self.config.env.id) or not width:
            return {}
        own = pettingzoo_action_spaces(self.config.env.id, self.config.env.kwargs)
        out: dict[str, Any] = {}
        for name in self.policy_configs:
            agents = [a for a, p in zip(own, self.agent_policy or []) if p == name]
            spaces = {a: own[a] for a in agents}
            if len({(type(sp), getattr(sp, "n", None)) for sp in spaces.values()}) > 1:
                shown = ", ".join(f"'{a}' {sp}" for a, sp in list(spaces.items())[:4])
                raise ConfigError(
                    f"multi_agent: the policy '{name}' acts for agents with different action spaces ({shown}), but "
                    f"a policy acts in one space. Map these agents to separate policies in multi_agent.policy_mapping "
                    f"(e.g. one policy per agent), or pad their action spaces to one in the env."
                )
            n = int(getattr(next(iter(spaces.values())), "n", width))
            if n < width:
                out[name] = gym.spaces.Discrete(n)
        return out

    def _make_opponents(self, policies, observation_space, action_space, backend, seed: int) -> SelfPlayOpponents:
        """Who plays the other seats of a turn-based game (``multi_agent.self_play``): for ``latest``
        and ``pool`` an acting copy of every policy (no memory; seeded apart from the policies)."""
        settings = (getattr(self.config, "multi_agent", None) or MultiAgentConfig()).self_play
        stateful = [name for name, policy in policies.items() if policy.initial_state(1) is not None]
        if stateful:
            raise ConfigError(
                f"The policy '{stateful[0]}' is recurrent (its network carries a state between steps), but "
                f"'env.id' = '{self.config.env.id}' is a turn-based game, whose rows' opponents act from single "
                f"observations and carry no state. Use a feed-forward network (mlp, cnn) for turn-based games; "
                f"recurrent policies play Parallel envs (docs/multi_agent.md)."
            )
        players = {}
        if settings.opponent in ("latest", "pool"):
            for i, (name, config) in enumerate(self.policy_configs.items()):
                players[name] = self.model_copy_with_agent(config).make_agent(
                    observation_space, action_space, backend=backend, seed=seed + 1000 + i, with_memory=False
                )
        seats = pettingzoo_agents(self.config.env.id, self.config.env.kwargs)
        return SelfPlayOpponents(
            policies, dict(zip(seats, self.agent_policy or [])), players, settings, action_space, seed=seed + 2000
        )

    def model_copy_with_agent(self, agent_config) -> "Assembly":
        """This assembly for a single-agent run of ``agent_config`` (one policy of a multi-agent run)."""
        config = self.config.model_copy(update={"agent": agent_config, "multi_agent": None})
        return replace(self, config=config, agent_policy=None, policy_configs={})

    def memory_bytes(self, observation_space, action_space) -> int | None:
        """Estimated bytes of the configured replay memory when full (None without one).

        See :mod:`rlgraph_core.memories.sizing`: the observation twice, action, reward, terminal
        and discount per record, plus segment trees for a prioritized memory.
        """
        sizing = self._replay_sizing(observation_space, action_space)
        return None if sizing is None else estimate_replay_bytes(**sizing)

    def check_memory_fits(self, observation_space, action_space) -> int | None:
        """Refuse (ConfigError naming ``agent.memory.capacity``, the estimated size and the memory
        available) a replay memory that cannot fit in this machine's memory; return its estimate."""
        sizing = self._replay_sizing(observation_space, action_space)
        return None if sizing is None else check_replay_fits(**sizing)

    def _replay_sizing(self, observation_space, action_space) -> dict[str, Any] | None:
        """The arguments :mod:`rlgraph_core.memories.sizing` takes for the configured replay memory
        (capacity in transitions, spaces, prioritized, frame storage), or None without one."""
        settings = getattr(self.config.agent, "memory", None)
        if settings is None or self.memory_class is None:
            return None
        observation_space = _as_space(observation_space)
        return {
            "capacity": self._transition_capacity(settings, observation_space),
            "observation_space": observation_space,
            "action_space": _as_space(action_space),
            "prioritized": self._memory_prioritized(),
            **self._frame_storage(settings),
        }

    def _transition_capacity(self, settings, observation_space) -> int:
        """The memory's capacity in transition-sized records: a recurrent DQN's record is a window of
        ``seq_len`` steps and ``seq_len + 1`` observations (memories/sequences.py), about
        ``(seq_len + 1) / 2`` transitions of two observations each; where its uint8 observations are
        shared frames, a window adds the frames of its ``seq_len - burn_in`` new steps only, so it
        counts as that many transitions of one new frame each."""
        agent = self.config.agent
        network = getattr(agent, "network", None)
        if network is not None and getattr(network, "stateful", False) and hasattr(agent, "burn_in"):
            framed = getattr(settings, "frames", "off") == "auto" and any(
                np.dtype(leaf.dtype) == np.uint8 for leaf in observation_space.flatten().values()
            )
            stride = int(network.seq_len) - int(agent.burn_in)
            return int(settings.capacity) * (stride if framed else -(-(int(network.seq_len) + 1) // 2))
        return int(settings.capacity)

    def _frame_storage(self, settings) -> dict:
        """How the memory stores uint8 observations (its ``frames`` setting; "off" for a memory
        without one) and the frame stack of ``env.wrappers`` (1 without a channels-last stack)."""
        stack = 1
        for wrapper in self.config.env.wrappers:
            if wrapper.type == "frame_stack" and getattr(wrapper, "channels_last", False):
                stack = int(getattr(wrapper, "stack_size", 1))
        return {"frames": getattr(settings, "frames", "off"), "frame_stack": stack}

    def _memory_prioritized(self) -> bool:
        cls = self.memory_class.resolve() if hasattr(self.memory_class, "resolve") else self.memory_class
        return bool(getattr(cls, "prioritized", False))

    def _placeholder_memory(self, seed: int):
        """A one-record memory of the same kind (prioritized or not) for actor/learner copies."""
        if self.memory_class is None:
            return None
        cls = self.memory_class.resolve() if hasattr(self.memory_class, "resolve") else self.memory_class
        return PrioritizedReplay(1, seed=seed) if getattr(cls, "prioritized", False) else ReplayMemory(1, seed=seed)

    def make_loggers(self, out_dir: str | Path) -> list:
        """One instance of each configured metric logger writing under ``out_dir``.

        A logger whose constructor takes ``config`` gets the run config (see
        :func:`rlgraph_core.execution.loggers.make_logger`); one whose constructor raises is a
        ConfigError naming it (:func:`rlgraph_core.execution.loggers.start_loggers`).
        """

        return start_loggers(self.config.train.loggers, self.logger_classes, out_dir, self.config)

    def check_loggers_out_dir(self, out_dir: str | Path) -> None:
        """Each configured logger's check that it can write under ``out_dir`` (a ConfigError if not);
        run before the folder is claimed and by ``--dry-run``."""
        for cls in self.logger_classes:
            target = cls.resolve() if hasattr(cls, "resolve") else cls
            check = getattr(target, "check_out_dir", None)
            if callable(check):
                check(Path(out_dir))

    def make_vector_env(self, seed: int):
        """The configured gymnasium vector env (same-step autoreset)."""
        if self.env_factory is not None:
            return make_vector_env_from(self.env_factory, self.config.env, seed, wrappers=self.env_wrappers)
        if self.agent_policy is not None:  # a PettingZoo env: rows of (copy, agent)
            return make_pettingzoo_vector_env(self.config.env, seed, agent_indicator=self._agent_indicator)
        return make_vector_env(self.config.env, seed, wrappers=self.env_wrappers)

    def make_eval_env(self, render_mode: str | None = None):
        """A single configured env for evaluation, with :attr:`eval_wrappers` (the game's own
        episodes and score, not the training wrappers' shaped ones)."""
        if self.env_factory is not None and render_mode is None:
            return apply_wrappers(self.env_factory(), self.eval_wrappers)
        if self.agent_policy is not None and render_mode is None:  # one copy of a PettingZoo env
            return make_pettingzoo_vector_env(self.config.env, 0, num_envs=1, agent_indicator=self._agent_indicator)
        return make_eval_env(self.config.env, render_mode, wrappers=self.eval_wrappers)

    def agent_spaces(self) -> tuple[Any, Any]:
        """The (observation, action) spaces an agent of this run is built for, read from one eval
        env: a PettingZoo env's eval env is a vector env of one row per agent, so one agent's spaces."""
        probe = self.make_eval_env()
        try:
            obs_space = getattr(probe, "single_observation_space", getattr(probe, "observation_space", None))
            act_space = getattr(probe, "single_action_space", getattr(probe, "action_space", None))
        finally:
            probe.close()
        for what, space in (("observation", obs_space), ("action", act_space)):
            if space is None:  # a custom env class that sets no space (gymnasium.make would say so)
                raise ConfigError(missing_space_message(self.config.env.id, what))
        return obs_space, act_space

    @property
    def _agent_indicator(self) -> bool:
        """``multi_agent.agent_id``: rows start with a one-hot of their agent's index."""
        return bool(getattr(getattr(self.config, "multi_agent", None), "agent_id", False))

    def make_training_videos(self, out_dir: Path):
        """``train.video_interval``'s recorder: an rgb_array eval env streaming to ``out_dir/videos``
        (made here, in the application layer, so the run recorder never imports the integrations)."""
        import gymnasium as gym

        config = self.config
        try:
            return TrainingVideos(
                lambda: self.make_eval_env(render_mode="rgb_array"),
                Path(out_dir) / "videos",
                config.train.video_format,
                seed=20_000 + config.train.seed,
                env_id=config.env.id,
            )
        except gym.error.DependencyNotInstalled as exc:  # rendering needs the env's extras (pygame ...)
            raise ConfigError(
                f"train.video_interval needs rendering support for '{config.env.id}', which is not installed: "
                f"{exc} ({extra_install_command('render')} brings it for the classic-control envs)."
            ) from None

    @property
    def hook(self):
        """The lifecycle hook relay (``hook.rlgraph_on_iteration(metrics=...)`` ...)."""
        return self.plugin_manager.hook


def _as_space(space):
    """An env's gymnasium space as an rlgraph space; one that cannot be converted (a text space)
    is a ConfigError naming the wrapper that would help, never a traceback."""

    if isinstance(space, Space):
        return space
    try:
        return from_gym(space)
    except SpaceError as exc:
        raise ConfigError(f"The environment's space cannot be used: {exc}") from None


def _get(pm: PluginManager, kind: str, name: str, field: str):
    try:
        return pm.get(kind, name, field=field)
    except PluginError as exc:
        raise ConfigError(str(exc)) from None


#: ``{agent class: the class that trains it with a stateful network}``: a config names the
#: algorithm (``type: ppo``) and its network (``network: {type: lstm}``); the agent that carries
#: the network's state is chosen here, so the feed-forward agent's code and cost stay its own.
#: Validation refuses a stateful network for an algorithm whose config does not declare
#: ``recurrent_networks`` (:mod:`rlgraph_core.config.slots`).
RECURRENT_AGENTS: dict[type, type] = {
    PPOAgent: RecurrentPPOAgent,
    DQNAgent: RecurrentDQNAgent,
    ImpalaAgent: RecurrentImpalaAgent,
    A2CAgent: RecurrentA2CAgent,
}


def agent_class_for(agent_class: type, agent_config: Any) -> type:
    """The class to build for ``agent_config``: ``agent_class``, or its recurrent counterpart
    (:data:`RECURRENT_AGENTS`) when the config's network is stateful (``lstm``, ``gru``)."""
    if getattr(getattr(agent_config, "network", None), "stateful", False):
        return RECURRENT_AGENTS.get(agent_class, agent_class)
    return agent_class


def _memory_class(pm: PluginManager, agent_config):
    memory = getattr(agent_config, "memory", None)
    if memory is None:
        return None
    cls, _ = _get(pm, "memories", memory.type, "agent.memory.type")
    return cls


def _executor_class(pm: PluginManager, name: str) -> type:
    """The executor class registered as ``name`` (a lazily registered one is imported now)."""

    cls, _ = executor_entry(_get(pm, "executors", name, "train.executor"))
    return cls.resolve() if hasattr(cls, "resolve") else cls


def assemble(config, plugin_manager: PluginManager) -> Assembly:
    """Resolve every registry name of ``config`` once with ``plugin_manager`` and build the backend.

    Raises a ConfigError (one paragraph, naming the field and the known names) for anything
    that cannot be resolved, and a PluginError for an agent class that breaks the constructor
    contract.
    """

    pm = plugin_manager
    tc = config.train
    # Every component slot holds settings validated by its component's registered model (a no-op
    # for a config from validate_config; a config built in code is checked here, once).
    agent_config = validated_agent_config(pm, config.agent)
    if agent_config is not config.agent:
        config = config.model_copy(update={"agent": agent_config})
    agent_class, _ = _get(pm, "agents", config.agent.type, "agent.type")
    check_agent_class(agent_class, config.agent.type)
    backend_cls, settings_model = backend_entry(_get(pm, "backends", tc.backend, "train.backend"))
    # A backend that registered a settings model receives the validated ``backend:`` section.
    extra = {} if settings_model is None else {"settings": _backend_settings(pm, config, settings_model)}

    def backend_factory() -> Backend:
        backend = backend_cls(mode=tc.mode, device=tc.device, seed=tc.seed, **extra)
        if tc.num_threads is not None:
            backend.set_num_threads(tc.num_threads)
        return backend

    agent_policy, policy_configs = _policies(pm, config)
    return Assembly(
        config=config,
        plugin_manager=pm,
        backend=backend_factory(),
        agent_class=agent_class,
        memory_class=_memory_class(pm, config.agent),
        logger_classes=[_get(pm, "loggers", name, "train.loggers") for name in tc.loggers],
        executor_class=_executor_class(pm, tc.executor),
        backend_factory=backend_factory,
        callbacks=make_callbacks(pm, tc.callbacks),
        env_wrappers=_env_wrappers(pm, config.env),
        eval_wrappers=_env_wrappers(pm, config.env, evaluation=True),
        agent_policy=agent_policy,
        policy_configs=policy_configs,
    )


def _policies(pm: PluginManager, config) -> tuple[list[str] | None, dict[str, Any]]:
    """For a PettingZoo env: the policy of each of its agents (every agent mapped, every policy used:
    a ConfigError naming the agent otherwise) and each policy's agent config; else ``(None, {})``."""
    if not is_pettingzoo_id(config.env.id):
        return None, {}
    return multi_agent_layout(pm, config.agent, config.env, getattr(config, "multi_agent", None))


def _vector_prefix(space, size: int):
    """The first ``size`` entries of the vector space ``space`` (gymnasium's or rlgraph's Box)."""
    box = space if isinstance(space, gym.spaces.Box) else to_gym(space)
    return gym.spaces.Box(box.low[:size], box.high[:size], (size,), box.dtype)


def _backend_settings(pm: PluginManager, config, model) -> Any:
    """``config.backend`` as an instance of ``model`` (validated here for a config built in code)."""
    settings = getattr(config, "backend", None)
    if isinstance(settings, model):
        return settings

    dump = getattr(settings, "model_dump", None)
    raw = dump() if dump is not None else settings
    return validate_backend_settings(pm, config.train.backend, raw)


def _env_wrappers(pm: PluginManager, env_cfg, evaluation: bool = False) -> list[Callable]:
    """``config.env.wrappers`` resolved through ``pm`` (a PluginError becomes a ConfigError);
    with ``evaluation``, as evaluation envs apply them."""
    try:
        return resolve_wrappers(pm, env_cfg.wrappers, evaluation=evaluation)
    except PluginError as exc:
        raise ConfigError(str(exc)) from None


def make_agent(
    config, observation_space, action_space, num_envs: int = 1, plugin_manager: PluginManager | None = None
) -> Agent:
    """Build the configured agent for the given spaces (convenience over :func:`assemble`)."""
    return assemble(config, plugin_manager or get_plugin_manager()).make_agent(
        observation_space, action_space, num_envs=num_envs
    )


def train(
    config, out_dir: str | Path, resume_dir: str | Path | None = None, plugin_manager: PluginManager | None = None
) -> dict:
    """Assemble ``config`` and run its executor into ``out_dir``; return the run summary."""
    assembly = assemble(config, plugin_manager or get_plugin_manager())
    return assembly.executor_class(config, out_dir, assembly=assembly, resume_dir=resume_dir).run()


def make_backend(
    name: str,
    mode: str = "eager",
    device: str = "auto",
    seed: int | None = None,
    plugin_manager: PluginManager | None = None,
) -> Backend:
    """Instantiate the backend registered as ``name`` in ``mode`` (with its default settings)."""
    factory, _ = backend_entry(_get(plugin_manager or get_plugin_manager(), "backends", name, "backend"))
    return factory(mode=mode, device=device, seed=seed)
