"""A PettingZoo Parallel env as a gymnasium vector env whose rows are ``(copy, agent)`` pairs.

(A turn-based game, a module with ``env()`` and no ``parallel_env``, is made into the same rows by
:mod:`rlgraph_core.multi_agent.turn_based`.)

``env.id: pettingzoo:mpe2.simple_spread_v3`` imports the module and calls its ``parallel_env(**env.kwargs)``
``env.num_envs`` times. The vector env has ``num_envs * len(possible_agents)`` rows, copy-major
(row ``r`` is agent ``possible_agents[r % n]`` of copy ``r // n``), so the one
:class:`~rlgraph_core.execution.env_runner.EnvRunner` steps it as it steps any vector env: one
``act`` on the batch of every agent's observation, one ``step``, per-row rewards and episode ends.
:class:`rlgraph_core.agents.policy_set.PolicySet` splits the rows by policy.

Agents that are not in the env (dead, or not joined yet) are padded as SuperSuit's ``black_death``
wrapper pads them: a zero observation, reward 0, their action ignored, until their copy's
episode ends (an agent's last real observation is its death step's ``next_obs``, through
``infos["final_obs"]``). A row's episode is its copy's episode (every row of a copy ends together, as
PettingZoo's ``agents`` list empties), so per-row counters and returns stay aligned; the one
approximation is that a dead agent's last transition is bootstrapped from the value of the zero
observation rather than being terminal.

The autoreset is gymnasium's ``SAME_STEP`` (as :func:`rlgraph_core.envs.make_vector_env`): a copy
whose episode ended is reset in the same step, and its rows' last observations are in
``infos["final_obs"]`` (masked by ``infos["_final_obs"]``).

Why by hand: PettingZoo's own vectorisation (SuperSuit's ``pettingzoo_env_to_vec_env_v1``) needs
agents that never die and does not follow gymnasium 1.x's vector API and autoreset modes.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array

from rlgraph_core.env_checks import observation_problem, reward_problem
from rlgraph_core.errors import ConfigError, EnvDataError
from rlgraph_core.install_hints import extra_install_command
from rlgraph_core.multi_agent.turn_based import TurnBasedVectorEnv

__all__ = [
    "PETTINGZOO_PREFIX",
    "PettingZooVectorEnv",
    "game_factory",
    "is_pettingzoo_id",
    "is_turn_based",
    "padded_observation_space",
    "make_pettingzoo_vector_env",
    "pettingzoo_agents",
    "pettingzoo_action_spaces",
    "pettingzoo_observation_spaces",
    "widest_action_space",
]

#: ``env.id`` of a PettingZoo env: this prefix, then the module whose ``parallel_env`` makes it.
PETTINGZOO_PREFIX = "pettingzoo:"


def is_pettingzoo_id(env_id: Any) -> bool:
    """Whether ``env_id`` names a PettingZoo env (``pettingzoo:MODULE``)."""
    return isinstance(env_id, str) and env_id.startswith(PETTINGZOO_PREFIX)


def _import_game_module(env_id: str):
    """The module of ``env.id = pettingzoo:MODULE`` (PettingZoo's deprecation warning for importing
    an env module directly, which is PettingZoo's documented way to make one, silenced)."""
    module_name = env_id[len(PETTINGZOO_PREFIX) :]
    try:
        importlib.import_module("pettingzoo")
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*old environment creation API", category=DeprecationWarning)
            return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        raise ConfigError(
            f"'env.id' = '{env_id}' needs the optional package '{missing}' (for the module '{module_name}'), which "
            f"is not installed. PettingZoo envs come with the pettingzoo extra ({extra_install_command('pettingzoo')}; the particle envs "
            f"are mpe2.*, e.g. pettingzoo:mpe2.simple_spread_v3; the classic board games pettingzoo.classic.*, "
            f"e.g. pettingzoo:pettingzoo.classic.tictactoe_v3)."
        ) from None


def is_turn_based(env_id: str) -> bool:
    """Whether ``env.id = pettingzoo:MODULE`` is a turn-based (AEC) game: its module makes ``env()``
    and no ``parallel_env`` (PettingZoo's classic games)."""
    module = _import_game_module(env_id)
    return not callable(getattr(module, "parallel_env", None)) and callable(getattr(module, "env", None))


def game_factory(env_id: str, kwargs: dict | None = None) -> Callable[[], Any]:
    """``() -> env`` for ``env.id = pettingzoo:MODULE``: its ``parallel_env(**kwargs)``, or, for a
    turn-based game (:func:`is_turn_based`), its ``env(**kwargs)`` (AEC).

    Raises:
        ConfigError: pettingzoo (or the module's package) is missing, the module does not exist,
            or it makes neither kind of env.
    """
    module_name = env_id[len(PETTINGZOO_PREFIX) :]
    module = _import_game_module(env_id)
    make = getattr(module, "parallel_env", None)
    if not callable(make):
        make = getattr(module, "env", None)
    if not callable(make):
        raise ConfigError(
            f"'env.id' = '{env_id}': the module '{module_name}' has neither parallel_env nor env, so it makes no "
            f"PettingZoo env. Name a module with parallel_env (e.g. pettingzoo:mpe2.simple_spread_v3) or a "
            f"turn-based game with env (e.g. pettingzoo:pettingzoo.classic.tictactoe_v3)."
        )
    kwargs = dict(kwargs or {})

    def factory():
        try:
            return make(**kwargs)
        except TypeError as exc:
            raise ConfigError(
                f"'env.id' = '{env_id}' could not be made with env.kwargs = {kwargs}: {exc}. env.kwargs are passed "
                f"to {module_name}.{make.__name__}: pass only the arguments it takes."
            ) from None

    return factory


def _read_env(env_id: str, kwargs: dict | None, read: Callable[[Any], Any]) -> Any:
    """``read(env)`` of one env ``env_id``, made for it and closed after."""
    env = game_factory(env_id, kwargs)()
    try:
        return read(env)
    finally:
        env.close()


def pettingzoo_agents(env_id: str, kwargs: dict | None = None) -> list[str]:
    """The ``possible_agents`` of the env ``env_id`` (made once and closed)."""
    return _read_env(env_id, kwargs, lambda env: list(env.possible_agents))


def pettingzoo_observation_spaces(env_id: str, kwargs: dict | None = None) -> dict[str, gym.Space]:
    """``{agent: its own observation space}`` of the env ``env_id``, in ``possible_agents`` order."""
    return _read_env(env_id, kwargs, lambda env: {agent: env.observation_space(agent) for agent in env.possible_agents})


def pettingzoo_action_spaces(env_id: str, kwargs: dict | None = None) -> dict[str, gym.Space]:
    """``{agent: its own action space}`` of the env ``env_id``, in ``possible_agents`` order."""
    return _read_env(env_id, kwargs, lambda env: {agent: env.action_space(agent) for agent in env.possible_agents})


def make_pettingzoo_vector_env(env_cfg, seed: int, num_envs: int | None = None, agent_indicator: bool = False):
    """The vector env of ``env_cfg`` (``env.id: pettingzoo:...``), ``num_envs`` copies (default ``env.num_envs``):
    a :class:`PettingZooVectorEnv`, or a :class:`~rlgraph_core.multi_agent.turn_based.TurnBasedVectorEnv`
    for a turn-based game.

    ``env.wrappers`` are gymnasium wrappers of one env and do not apply: they are refused. With
    ``agent_indicator`` (``multi_agent.agent_id``) a Parallel env's rows start with a one-hot of
    their agent's index.
    """
    if env_cfg.wrappers:
        raise ConfigError(
            f"env.wrappers ({[w.type for w in env_cfg.wrappers]}) wrap a single gymnasium env, but "
            f"'env.id' = '{env_cfg.id}' is a PettingZoo env of several agents. Remove env.wrappers (wrap the "
            f"PettingZoo env in your own module, e.g. with SuperSuit, and name that module in env.id)."
        )
    if getattr(env_cfg, "vectorization", "sync") != "sync":
        raise ConfigError(
            f"env.vectorization = '{env_cfg.vectorization}': the PettingZoo env '{env_cfg.id}' is stepped in "
            f"this process (env.vectorization: sync); set it to sync."
        )
    factory = game_factory(env_cfg.id, env_cfg.kwargs)
    kind = TurnBasedVectorEnv if is_turn_based(env_cfg.id) else PettingZooVectorEnv
    extra = {"agent_indicator": True} if agent_indicator else {}
    if agent_indicator and kind is TurnBasedVectorEnv:
        raise ConfigError(
            f"multi_agent.agent_id tells a policy which agent a row is, but '{env_cfg.id}' is a turn-based game, "
            f"whose rows are games of one seat each and whose observations already say the seat's view (own "
            f"marks, the opponent's). Set multi_agent.agent_id: false, or map the seats to their own policies."
        )
    envs = kind(
        factory,
        num_envs or env_cfg.num_envs,
        env_id=env_cfg.id,
        allow_nonfinite_obs=bool(getattr(env_cfg, "allow_nonfinite_obs", False)),
        **extra,
    )
    envs.action_space.seed(int(seed))
    if isinstance(envs, TurnBasedVectorEnv):
        envs.random_opponent.seed(int(seed))
    return envs


def padded_observation_space(spaces: dict[str, gym.Space]) -> gym.Space:
    """The one observation space of every agent's rows: the agents' own when they are all equal,
    else (all rank-1 Boxes of one dtype) a Box as long as the longest, bounds padded with 0 (the
    padding's value, as SuperSuit's ``pad_observations_v0`` pads).

    Raises:
        ValueError: spaces that differ and are not all vectors of one dtype (naming two of them).
    """
    first_agent, first = next(iter(spaces.items()))
    if all(space == first for space in spaces.values()):
        return first
    for agent, space in spaces.items():
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1 or space.dtype != first.dtype:
            raise ValueError(
                f"the agent '{agent}' observes {space} and '{first_agent}' {first}, and they are not all vectors "
                f"of one dtype"
            )
    size = max(space.shape[0] for space in spaces.values())
    low = np.zeros(size, first.dtype)
    high = np.zeros(size, first.dtype)
    for i, space in enumerate(spaces.values()):
        n = space.shape[0]
        low[:n] = space.low if i == 0 else np.minimum(low[:n], space.low)
        high[:n] = space.high if i == 0 else np.maximum(high[:n], space.high)
    low, high = np.minimum(low, 0), np.maximum(high, 0)
    return gym.spaces.Box(low, high, (size,), first.dtype)


def widest_action_space(spaces: dict[str, gym.Space]) -> gym.Space:
    """The one action space of every agent's rows: the agents' own when they are all equal, else
    (all Discrete, starting at 0) the largest; each policy then acts in its own agents' space.

    Raises:
        ValueError: spaces that differ and are not all Discrete from 0 (naming two of them).
    """
    first_agent, first = next(iter(spaces.items()))
    if all(space == first for space in spaces.values()):
        return first
    for agent, space in spaces.items():
        if not isinstance(space, gym.spaces.Discrete) or int(space.start) != 0:
            raise ValueError(
                f"the agent '{agent}' acts in {space} and '{first_agent}' in {first}, and they are not all "
                f"Discrete spaces starting at 0"
            )
    return gym.spaces.Discrete(max(int(space.n) for space in spaces.values()))


class PettingZooVectorEnv(gym.vector.VectorEnv):
    """``copies`` PettingZoo Parallel envs as one vector env of ``copies * len(possible_agents)`` rows.

    Observation spaces may differ when they are all vectors: rows are padded to the longest
    (:func:`padded_observation_space`) and each policy reads its own agents' length
    (:class:`~rlgraph_core.agents.policy_set.PolicySet`). Action spaces may differ when they are all
    Discrete from 0: the rows take the largest (:func:`widest_action_space`) and each policy acts
    in its own agents' space.

    Args:
        factory: ``() -> ParallelEnv``.
        copies: how many envs to step at once.
        env_id: named in errors.
        allow_nonfinite_obs: accept NaN/inf in observations (rewards are checked regardless).
        agent_indicator: start each row with a one-hot of its agent's index in ``possible_agents``
            (SuperSuit's ``agent_indicator_v0``), so one shared policy knows which agent it acts for.

    Attributes:
        agents: the env's ``possible_agents``, the order of the rows of each copy.
        copies: envs stepped at once.
    """

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def __init__(
        self,
        factory: Callable[[], Any],
        copies: int,
        env_id: str = "?",
        allow_nonfinite_obs: bool = False,
        agent_indicator: bool = False,
    ):
        self.envs = [factory() for _ in range(int(copies))]
        self.copies = len(self.envs)
        first = self.envs[0]
        self.agents: list[str] = list(first.possible_agents)
        self.env_id = env_id
        self._allow = allow_nonfinite_obs
        #: each agent's own observation space (they may differ: see :func:`padded_observation_space`)
        self.agent_observation_spaces = {a: first.observation_space(a) for a in self.agents}
        #: each agent's own action space (Discrete spaces of different sizes: see :func:`widest_action_space`)
        self.agent_action_spaces = {a: first.action_space(a) for a in self.agents}
        act_space = self._joint_space(
            widest_action_space,
            self.agent_action_spaces,
            "Agents whose action spaces differ are trained on rows of one batch when every one is a Discrete "
            "space starting at 0 (each policy then acts in its own agents' space); pad the action spaces to one "
            "in the env (SuperSuit's pad_action_space_v0 does) or train the agents in separate runs.",
        )
        obs_space = self._joint_space(
            padded_observation_space,
            self.agent_observation_spaces,
            "Agents whose observation spaces differ are trained on rows of one batch when every one is a vector "
            "(a rank-1 Box of one dtype): rlgraph pads the shorter ones with zeros and gives each policy its own "
            "agents' length. Pad the observations to one space in the env (SuperSuit's pad_observations_v0 does) "
            "or train the agents in separate runs.",
        )
        self.num_envs = self.copies * len(self.agents)
        self._padded_space = obs_space
        self._zero_obs = create_empty_array(obs_space, n=1, fn=np.zeros)
        self._uniform = all(space == obs_space for space in self.agent_observation_spaces.values())
        self._ids: np.ndarray | None = None
        if agent_indicator:  # SuperSuit's agent_indicator: a one-hot of the agent's index, first
            if not (isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1):
                self.close()
                raise ConfigError(
                    f"multi_agent.agent_id puts a one-hot of the agent's index before its observation, but the "
                    f"agents of '{env_id}' observe {obs_space}, not a vector (a rank-1 Box). Set "
                    f"multi_agent.agent_id: false, or give the agents vector observations."
                )
            n = len(self.agents)
            self._ids = np.eye(n, dtype=obs_space.dtype)
            low = np.concatenate([np.zeros(n, obs_space.dtype), obs_space.low])
            high = np.concatenate([np.ones(n, obs_space.dtype), obs_space.high])
            obs_space = gym.spaces.Box(low, high, (n + obs_space.shape[0],), obs_space.dtype)
        self.single_observation_space = obs_space
        self.single_action_space = act_space
        self.observation_space = batch_space(obs_space, self.num_envs)
        self.action_space = batch_space(act_space, self.num_envs)
        self._steps = 0

    def _joint_space(self, join, spaces: dict, advice: str):
        """``join(spaces)``: the one space of a batch row of any agent; where the agents' spaces cannot
        share one, close the envs and raise a ConfigError naming the env, the reason and ``advice``."""
        try:
            return join(spaces)
        except ValueError as exc:
            self.close()
            raise ConfigError(f"'env.id' = '{self.env_id}': {exc}. {advice}") from None

    # --- rows ----------------------------------------------------------------------------

    def row_agents(self) -> list[str]:
        """The agent name of every row (copy-major)."""
        return self.agents * self.copies

    def _zero(self, index: int):
        """The padding observation of the absent agent ``index`` (its indicator kept)."""
        return self._row_obs(index, _row(self._zero_obs, 0))

    def _rows(self, obs_by_agent: dict) -> list:
        """One copy's observations in row order (zeros for absent agents, shorter vectors padded)."""
        return [
            self._row_obs(j, self._pad(obs_by_agent[a])) if a in obs_by_agent else self._zero(j)
            for j, a in enumerate(self.agents)
        ]

    def _pad(self, obs):
        """An agent's observation in the padded space (a shorter vector zero-padded at its end)."""
        if self._uniform:
            return obs
        obs = np.asarray(obs)
        out = np.zeros(self._padded_space.shape, self._padded_space.dtype)
        out[: obs.shape[0]] = obs
        return out

    def _row_obs(self, index: int, obs):
        """Agent ``index``'s row: its (padded) observation, after the one-hot of ``index`` with agent_id."""
        if self._ids is None:
            return obs
        return np.concatenate([self._ids[index], np.asarray(obs, self._ids.dtype)])

    def _batch(self, rows: Sequence) -> Any:
        out = create_empty_array(self.single_observation_space, n=self.num_envs)
        assert out is not None  # a Box or Dict space always has an array
        return concatenate(self.single_observation_space, rows, out)

    def _checked(self, obs: dict, copy: int, when: str) -> dict:
        for agent, value in obs.items():
            problem = observation_problem(value, self._allow)
            if problem:
                raise self._fail(f"the {when} observation of agent '{agent}'", problem, copy)
        return obs

    def _fail(self, what: str, problem: str, copy: int) -> EnvDataError:
        return EnvDataError(
            f"Environment '{self.env_id}' returned a bad value at vector step {self._steps} (copy {copy}): {what} "
            f"{problem}. Nothing of it reached the agents, so no weight or checkpoint holds it. Fix the "
            f"environment so that it returns finite numbers."
        )

    # --- gymnasium vector API --------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Reset every copy (copy ``i`` with ``seed + i``); the batch of every agent's observation."""
        rows: list = []
        for i, env in enumerate(self.envs):
            obs, _ = env.reset(seed=None if seed is None else int(seed) + i, options=options)
            rows.extend(self._rows(self._checked(obs, i, "reset")))
        return self._batch(rows), {}

    def step(self, actions):
        """Step every copy with its alive agents' actions; reset copies whose episode ended (same step)."""
        self._steps += 1
        n = len(self.agents)
        rows: list = []
        rewards = np.zeros(self.num_envs, np.float64)
        terminated = np.zeros(self.num_envs, bool)
        truncated = np.zeros(self.num_envs, bool)
        finals = np.empty(self.num_envs, dtype=object)
        final_mask = np.zeros(self.num_envs, bool)
        for i, env in enumerate(self.envs):
            base = i * n
            alive = set(env.agents)
            acts = {a: _row(actions, base + j) for j, a in enumerate(self.agents) if a in alive}
            obs, rew, term, trunc, _ = env.step(acts)
            for j, agent in enumerate(self.agents):
                if agent in rew:
                    problem = reward_problem(rew[agent])
                    if problem:
                        raise self._fail(f"the reward of agent '{agent}'", problem, i)
                    rewards[base + j] = float(rew[agent])
            self._checked(obs, i, "step")
            copy_rows = self._rows(obs)
            if env.agents and not all(term.get(a, False) or trunc.get(a, False) for a in env.agents):
                for j, agent in enumerate(self.agents):
                    if agent in alive and agent not in env.agents:  # died now: its last observation is
                        finals[base + j] = copy_rows[j]  # this step's next_obs, and it acts on zeros from now
                        final_mask[base + j] = True
                        copy_rows[j] = self._zero(j)
                rows.extend(copy_rows)
                continue
            # the copy's episode ended: every row ends with it (an agent that died earlier as terminated)
            for j, agent in enumerate(self.agents):
                truncated[base + j] = bool(trunc.get(agent, False)) and not term.get(agent, False)
                terminated[base + j] = not truncated[base + j]
                finals[base + j] = copy_rows[j]
                final_mask[base + j] = True
            reset_obs, _ = env.reset()
            rows.extend(self._rows(self._checked(reset_obs, i, "reset")))
        infos: dict = {}
        if final_mask.any():
            infos = {"final_obs": finals, "_final_obs": final_mask}
        return self._batch(rows), rewards, terminated, truncated, infos

    def close_extras(self, **kwargs):
        for env in getattr(self, "envs", ()):
            env.close()


def _row(batch: Any, index: int) -> Any:
    """Row ``index`` of a batch (an array, or a dict of them for a Dict space)."""
    if isinstance(batch, dict):
        return {k: _row(v, index) for k, v in batch.items()}
    return batch[index]
