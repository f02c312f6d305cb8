"""A turn-based PettingZoo game (AEC API) as a gymnasium vector env of ``(copy, seat)`` rows.

``env.id: pettingzoo:pettingzoo.classic.tictactoe_v3`` names a module with ``env()`` and no
``parallel_env``: a game whose agents take turns. Its rows are laid out as a Parallel env's
(row ``r`` is seat ``possible_agents[r % n]`` of copy ``r // n``, copy-major), so the one
:class:`~rlgraph_core.execution.env_runner.EnvRunner` and :class:`rlgraph_core.agents.policy_set.PolicySet`
step it unchanged, but **every row is a game of its own**: in the game of row ``(c, seat)`` the
policy of ``seat`` plays that seat and *opponents* play the others. A row's step is one move of
its seat, then the opponents' moves up to the seat's next turn (or the game's end), so each row
sees only its own turns, as RLlib's turn-based envs give each agent its own observations: the
reward is what the seat earned over those moves, the next observation is its board at its next
turn. PettingZoo's ``aec_to_parallel`` does not apply: it needs every agent to act every step.

Why not every seat of one game in one row batch: the seat to move next observes the board only
after the previous move, so one batched ``act`` per vector step cannot serve two seats of the same
game. Opponents inside the env keep the runner one loop; the cost is that a learning policy learns
from its own seat's moves only (every seat has rows, so a shared policy learns every seat).

Opponents (:meth:`TurnBasedVectorEnv.bind_opponents`): a callable ``(seat, obs, rows) -> actions``
giving the actions of ``seat`` in the games of ``rows`` from that seat's observations (a batch),
with an optional ``start_games(rows)`` told where new games begin (a pool draws its player there).
Self-play binds the run's policies (:class:`rlgraph_core.agents.self_play.SelfPlayOpponents`); until
something is bound, :class:`RandomOpponent` plays (a uniformly random legal move).

Each step's ``infos`` carry ``outcome`` (masked by ``_outcome``) where a row's game ended: +1 the
row's seat won (its return above every opponent's), 0 a draw, -1 a loss; and
:attr:`TurnBasedVectorEnv.illegal_moves` counts the rows' moves that their mask forbade (the game
then ends as the env rules it: PettingZoo's classic games end it with -1 for the offender).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array

from rlgraph_core.components.masks import MASK_KEY
from rlgraph_core.env_checks import observation_problem, reward_problem
from rlgraph_core.errors import ConfigError, EnvDataError

__all__ = ["RandomOpponent", "TurnBasedVectorEnv", "load_scripted_opponent"]


class RandomOpponent:
    """A uniformly random legal move (the observation's ``action_mask``; any action without one).

    Args:
        action_space: the game's Discrete action space (gymnasium's or rlgraph's).
        seed: the generator's seed.
    """

    def __init__(self, action_space, seed: int | None = None):
        self.n = int(action_space.n)
        self.start = int(getattr(action_space, "start", 0))
        self.rng = np.random.default_rng(seed)

    def seed(self, seed: int | None) -> None:
        """Restart the generator from ``seed``."""
        self.rng = np.random.default_rng(seed)

    def __call__(self, seat: str, obs, rows: np.ndarray) -> np.ndarray:
        count = len(rows)
        if isinstance(obs, dict) and MASK_KEY in obs:
            legal = np.asarray(obs[MASK_KEY]).reshape(count, -1) != 0
        else:
            legal = np.ones((count, self.n), bool)
        # a uniform legal choice: the largest of uniform keys over the legal actions
        keys = np.where(legal, self.rng.random((count, self.n)), -1.0)
        return keys.argmax(axis=1) + self.start


def load_scripted_opponent(spec: str) -> Callable:
    """The opponent ``module:name`` (a callable ``(seat, obs, rows) -> actions``, or a class made
    with no argument into one).

    Raises:
        ConfigError: the module or name does not exist, or is not callable.
    """
    module_name, _, name = spec.partition(":")
    try:
        target = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(
            f"The opponent '{spec[:80]}' could not be loaded ({exc}). Name an opponent as 'random', 'latest', "
            f"'pool', or 'module:callable' where the callable takes (seat, obs, rows) and returns one action per row."
        ) from None
    if isinstance(target, type):
        target = target()
    if not callable(target):
        raise ConfigError(
            f"The opponent '{spec[:80]}' is a {type(target).__name__}, not a callable (seat, obs, rows) -> actions."
        )
    return target


class TurnBasedVectorEnv(gym.vector.VectorEnv):
    """``copies * len(possible_agents)`` AEC games, row ``(c, seat)`` playing ``seat`` against opponents.

    Args:
        factory: ``() -> AECEnv`` (one game).
        copies: copies of the seat layout (rows per seat).
        env_id: named in errors.
        allow_nonfinite_obs: accept NaN/inf in observations (rewards are checked regardless).

    Attributes:
        agents: the game's ``possible_agents`` (the seats), the order of the rows of each copy.
        copies: copies of the layout.
        illegal_moves: moves of the rows' seats that their legal-action mask forbade.
    """

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def __init__(self, factory: Callable[[], Any], copies: int, env_id: str = "?", allow_nonfinite_obs: bool = False):
        first = factory()
        self.agents: list[str] = list(first.possible_agents)
        self.copies = int(copies)
        self.num_envs = self.copies * len(self.agents)
        self.games = [first] + [factory() for _ in range(self.num_envs - 1)]
        # the game's state read past PettingZoo's wrappers (each read through them is a __getattr__
        # chain; moves and observations still go through them: order checks, illegal-move rules)
        self._state = [getattr(game, "unwrapped", game) for game in self.games]
        self.seats = self.agents * self.copies
        self.env_id = env_id
        self._allow = allow_nonfinite_obs
        obs_space = first.observation_space(self.agents[0])
        act_space = first.action_space(self.agents[0])
        for agent in self.agents[1:]:
            for what, own, other in (
                ("observation", obs_space, first.observation_space(agent)),
                ("action", act_space, first.action_space(agent)),
            ):
                if other != own:
                    self.close()
                    raise ConfigError(
                        f"'env.id' = '{env_id}': the seat '{agent}' has the {what} space {other}, but "
                        f"'{self.agents[0]}' has {own}. The seats of a turn-based game share one observation and "
                        f"action space (their rows form one batch); pad them to one space in the env (SuperSuit's "
                        f"pad_observations_v0 / pad_action_space_v0 do)."
                    )
        if not isinstance(act_space, gym.spaces.Discrete):
            self.close()
            raise ConfigError(
                f"'env.id' = '{env_id}' is a turn-based game whose action space is {act_space}; turn-based games "
                f"are played with Discrete actions (PettingZoo's classic games). Use a Parallel env for others."
            )
        self.single_observation_space = obs_space
        self.single_action_space = act_space
        self.observation_space = batch_space(obs_space, self.num_envs)
        self.action_space = batch_space(act_space, self.num_envs)
        self.random_opponent = RandomOpponent(act_space)
        self.opponents: Callable = self.random_opponent
        self.illegal_moves = 0
        self._masks: list[np.ndarray] | None = None
        self._returns = [dict.fromkeys(self.agents, 0.0) for _ in range(self.num_envs)]
        self._steps = 0

    def bind_opponents(self, opponents: Callable | None) -> None:
        """Who plays the seats other than each row's (None: :class:`RandomOpponent`); takes effect at
        the next move, so bind before :meth:`reset`."""
        self.opponents = self.random_opponent if opponents is None else opponents

    def row_agents(self) -> list[str]:
        """The seat of every row (copy-major)."""
        return list(self.seats)

    # --- one game --------------------------------------------------------------------------
    def _fail(self, what: str, problem: str, row: int) -> EnvDataError:
        return EnvDataError(
            f"Environment '{self.env_id}' returned a bad value at vector step {self._steps} (game of row {row}): "
            f"{what} {problem}. Nothing of it reached the agents, so no weight or checkpoint holds it. Fix the "
            f"environment so that it returns finite numbers."
        )

    def _observe(self, row: int, seat: str) -> Any:
        value = self.games[row].observe(seat)
        problem = observation_problem(value, self._allow)
        if problem:
            raise self._fail(f"the observation of seat '{seat}'", problem, row)
        return value

    def _move(self, row: int, action) -> None:
        """One move of the game's seat to move; every seat's reward added to its return."""
        self.games[row].step(action)
        for seat, reward in self._state[row].rewards.items():
            problem = reward_problem(reward)
            if problem:
                raise self._fail(f"the reward of seat '{seat}'", problem, row)
            self._returns[row][seat] += float(reward)

    def _over(self, row: int) -> bool:
        """Whether the row's seat is done (terminated or truncated): its episode ends."""
        state, seat = self._state[row], self.seats[row]
        return bool(
            state.terminations.get(seat, False) or state.truncations.get(seat, False) or seat not in state.agents
        )

    def _play_opponents(self, rows: Sequence[int]) -> None:
        """Opponents move in the games of ``rows`` until each is at its row's turn or over, batched
        by seat: all games waiting for the same seat ask it once."""
        pending = list(rows)
        while pending:
            waiting: dict[str, list[int]] = {}
            for row in pending:
                state, own = self._state[row], self.seats[row]
                while not self._over(row) and state.agent_selection != own:
                    seat = state.agent_selection
                    if state.terminations.get(seat, False) or state.truncations.get(seat, False):
                        self._move(row, None)  # a done seat leaves the game (PettingZoo's dead step)
                        continue
                    waiting.setdefault(seat, []).append(row)
                    break
            pending = []
            for seat, seat_rows in waiting.items():
                index = np.asarray(seat_rows)
                obs = self._batch([self._observe(r, seat) for r in seat_rows], len(seat_rows))
                actions = np.asarray(self.opponents(seat, obs, index))
                for row, action in zip(seat_rows, actions):
                    self._move(row, _scalar(action))
                pending.extend(seat_rows)

    def _start(self, rows: Sequence[int], seed: int | None = None) -> None:
        """New games at ``rows`` (reset with ``seed + row`` when given), opponents told, played up to each row's turn."""
        for row in rows:
            self.games[row].reset(seed=None if seed is None else int(seed) + row)
            self._returns[row] = dict.fromkeys(self.agents, 0.0)
        start = getattr(self.opponents, "start_games", None)
        if start is not None:
            start(np.asarray(rows))
        self._play_opponents(rows)
        for row in rows:
            if self._over(row):
                raise EnvDataError(
                    f"Environment '{self.env_id}': the game of row {row} ended before its seat "
                    f"'{self.seats[row]}' moved once. A turn-based game must give every seat a turn; check the env."
                )

    def _batch(self, rows: Sequence, n: int | None = None) -> Any:
        out = create_empty_array(self.single_observation_space, n=n or self.num_envs)
        assert out is not None  # a Box or Dict space always has an array
        return concatenate(self.single_observation_space, rows, out)

    def _outcome(self, row: int) -> float:
        """+1 / 0 / -1: the row's seat's return above / equal to / below the best opponent's."""
        own = self._returns[row][self.seats[row]]
        best = max((r for s, r in self._returns[row].items() if s != self.seats[row]), default=own)
        return float(np.sign(own - best))

    # --- gymnasium vector API --------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """New games everywhere (game ``r`` reset with ``seed + r``; the random opponent reseeded),
        each played up to its row's first turn."""
        if seed is not None:
            self.random_opponent.seed(int(seed))
        self._start(range(self.num_envs), seed)
        return self._own_observations(), {}

    def step(self, actions):
        """Each row's move, the opponents' replies; games that ended are started anew (same step)."""
        self._steps += 1
        actions = np.asarray(actions)
        before = [dict(returns) for returns in self._returns]
        start = int(self.single_action_space.start)
        for row in range(self.num_envs):
            action = _scalar(actions[row])
            if self._masks is not None and not self._masks[row][int(action) - start]:
                self.illegal_moves += 1
            self._move(row, action)
        self._play_opponents(range(self.num_envs))
        rewards = np.array(
            [self._returns[r][self.seats[r]] - before[r][self.seats[r]] for r in range(self.num_envs)], np.float64
        )
        terminated = np.zeros(self.num_envs, bool)
        truncated = np.zeros(self.num_envs, bool)
        ended = [r for r in range(self.num_envs) if self._over(r)]
        infos: dict = {}
        if ended:
            finals = np.empty(self.num_envs, dtype=object)
            outcome = np.zeros(self.num_envs)
            for row in ended:
                state, seat = self._state[row], self.seats[row]
                truncated[row] = bool(state.truncations.get(seat, False)) and not state.terminations.get(seat, False)
                terminated[row] = not truncated[row]
                finals[row] = self._observe(row, seat)
                outcome[row] = self._outcome(row)
            mask = np.zeros(self.num_envs, bool)
            mask[ended] = True
            infos = {"final_obs": finals, "_final_obs": mask, "outcome": outcome, "_outcome": mask}
            self._start(ended)
        return self._own_observations(), rewards, terminated, truncated, infos

    def _own_observations(self) -> Any:
        """The batch of every row's observation of its own seat (its mask kept for the next step's check)."""
        rows = [self._observe(r, self.seats[r]) for r in range(self.num_envs)]
        space = self.single_observation_space
        if isinstance(space, gym.spaces.Dict) and MASK_KEY in space.spaces:
            self._masks = [np.asarray(o[MASK_KEY]).reshape(-1) for o in rows]
        return self._batch(rows)

    def close_extras(self, **kwargs):
        for game in getattr(self, "games", ()):
            game.close()


def _scalar(action):
    """A row's action as PettingZoo takes it (a Python int for a Discrete action)."""
    return int(action) if np.ndim(action) == 0 else action
