"""Self-play: the run's own policies (now, or frozen earlier copies) as the opponents of a turn-based game.

In a :class:`~rlgraph_core.multi_agent.turn_based.TurnBasedVectorEnv` every row is a game of its
own seat; :class:`SelfPlayOpponents` plays the other seats. With ``opponent: latest`` a seat is
played by the policy mapped to it as it is now (one shared policy plays itself); with ``pool`` a
game draws, when it starts, either the latest policy (``latest_prob``) or a member of the pool:
up to ``pool_size`` frozen copies taken every ``snapshot_every`` updates of that policy and, with
``pool_random`` (the default), the uniformly random legal player, as RLlib's self-play example
starts its league with one (OpenAI Five's and RLlib's recipe, without the league's promotion
rules). Facing only itself, a policy tends to settle into the lines it plays against itself and
stops punishing moves it never sees; the pool keeps older and weaker players in the games.
``random`` and ``module:callable`` are fixed players.

Opponent moves are made by a *player*: a second agent of the policy's config, built without
memory, into which the weights of whoever plays are copied (only when they change), with the
policy's step count (so an exploring DQN opponent uses the policy's current epsilon). The learning
agent itself never acts for an opponent, so its rollouts, caches and random draws are only its
own rows'.
"""

from __future__ import annotations

from itertools import count
from typing import Any, Mapping

import numpy as np

from rlgraph_core.checkpoint import weight_problem
from rlgraph_core.memories.obs import map_obs
from rlgraph_core.multi_agent.turn_based import RandomOpponent, load_scripted_opponent

__all__ = ["SelfPlayOpponents"]

#: The pool member that is the uniformly random legal player (not a frozen copy).
_RANDOM: tuple[int, dict] = (-2, {})


class SelfPlayOpponents:
    """The opponents of every row's game, from ``multi_agent.self_play`` settings.

    Args:
        policies: ``{name: agent}``, the run's learning policies.
        seat_policy: ``{seat: policy name}`` (the run's mapping of the game's seats).
        players: ``{name: agent}``, an acting copy per policy (needed for ``latest`` and ``pool``).
        settings: a :class:`~rlgraph_core.config.sections.SelfPlayConfig`.
        action_space: the game's (gymnasium Discrete) action space, for the random player.
        seed: seeds the pool draws and the random player.

    Attributes:
        pools: ``{name: [(id, weights), ...]}``, each policy's frozen copies, oldest first.
        eval_opponent: the player evaluation plays against (None: the env's own random player).
    """

    def __init__(
        self,
        policies: Mapping[str, Any],
        seat_policy: Mapping[str, str],
        players: Mapping[str, Any] | None,
        settings,
        action_space,
        seed: int = 0,
    ):
        self.policies = dict(policies)
        self.seat_policy = dict(seat_policy)
        self.players = dict(players or {})
        self.settings = settings
        self.mode = settings.opponent
        self.rng = np.random.default_rng(seed)
        self.fixed: Any = None
        self.random_player = RandomOpponent(action_space, seed)
        if self.mode == "random":
            self.fixed = self.random_player
        elif self.mode not in ("latest", "pool"):
            self.fixed = load_scripted_opponent(self.mode)
        missing = [p for p in self.policies if p not in self.players]
        if self.fixed is None and missing:
            raise ValueError(f"opponent '{self.mode}' needs an acting copy of every policy; none for {missing}")
        eval_name = settings.eval_opponent
        self.eval_opponent = None if eval_name == "random" else load_scripted_opponent(eval_name)
        self.pools: dict[str, list[tuple[int, dict]]] = {name: [] for name in self.policies}
        self._ids = count()
        self._next_snapshot = {name: int(settings.snapshot_every) for name in self.policies}
        self._loaded: dict[str, Any] = dict.fromkeys(self.policies)
        self._choice: dict[int, dict[str, tuple[int, dict] | None]] = {}

    # --- the pool ----------------------------------------------------------------------------
    def after_update(self) -> None:
        """Freeze a copy of every policy that made ``snapshot_every`` more updates (pool mode)."""
        if self.mode != "pool":
            return
        for name, agent in self.policies.items():
            if int(agent.updates) < self._next_snapshot[name]:
                continue
            while self._next_snapshot[name] <= int(agent.updates):
                self._next_snapshot[name] += int(self.settings.snapshot_every)
            pool = self.pools[name]
            pool.append((next(self._ids), agent.get_weights()))
            del pool[: max(0, len(pool) - int(self.settings.pool_size))]

    def start_games(self, rows: np.ndarray) -> None:
        """New games at ``rows``: in pool mode each draws, per policy, the latest or a frozen copy."""
        for row in np.asarray(rows).tolist():
            choice: dict[str, tuple[int, dict] | None] = {}
            if self.mode == "pool":
                for name, pool in self.pools.items():
                    members = len(pool) + int(self.settings.pool_random)
                    if members and self.rng.random() >= self.settings.latest_prob:
                        k = int(self.rng.integers(members))
                        choice[name] = pool[k] if k < len(pool) else _RANDOM
            self._choice[row] = choice

    # --- checkpoints -------------------------------------------------------------------------
    def get_state(self) -> tuple[dict[str, np.ndarray], dict]:
        """The pool as arrays ``NAME/K/VARIABLE`` (copy ``K`` of policy ``NAME``, oldest first) and
        counters (each pool's size, the update count of each policy's next copy)."""
        arrays = {
            f"{name}/{k}/{var}": np.asarray(value)
            for name, pool in self.pools.items()
            for k, (_, weights) in enumerate(pool)
            for var, value in weights.items()
        }
        counters = {"sizes": {n: len(p) for n, p in self.pools.items()}, "next_snapshot": dict(self._next_snapshot)}
        return arrays, counters

    def array_problem(self, key: str, shape: tuple[int, ...], dtype) -> str | None:
        """Why the stored array ``key`` (``NAME/K/VARIABLE``) cannot be a frozen copy's weight, or None."""
        name, _, rest = key.partition("/")
        index, _, var = rest.partition("/")
        if name not in self.policies:
            return f"is a frozen copy of the policy '{name}', which this run does not have ({list(self.policies)})"
        if not index.isdigit() or int(index) >= int(self.settings.pool_size):
            return f"is not the weight of a frozen copy 0..{int(self.settings.pool_size) - 1} (pool_size)"
        spec = self.policies[name].weight_specs().get(var)
        if spec is None:
            return f"names no weight of the policy '{name}'"
        return weight_problem(var, shape, dtype, *spec)

    def state_problem(self, arrays: Mapping[str, np.ndarray], counters: Mapping[str, Any]) -> str | None:
        """Why :meth:`set_state` must not take ``arrays``/``counters``, or None (every copy complete)."""
        sizes = counters.get("sizes") if isinstance(counters, Mapping) else None
        if not isinstance(sizes, Mapping) or set(sizes) - set(self.policies):
            return (
                f"its opponent pool counters {str(counters)[:80]} do not name this run's policies {list(self.policies)}"
            )
        for name, size in sizes.items():
            if not isinstance(size, int) or not 0 <= size <= int(self.settings.pool_size):
                return f"its opponent pool of '{name}' has {str(size)[:20]} copies, not 0..{self.settings.pool_size}"
            want = set(self.policies[name].weight_specs())
            for k in range(size):
                have = {key.split("/", 2)[2] for key in arrays if key.startswith(f"{name}/{k}/")}
                if have != want:
                    return f"its frozen copy {k} of '{name}' lacks {sorted(want - have)[:3]} or has {sorted(have - want)[:3]}"
        return None

    def set_state(self, arrays: Mapping[str, np.ndarray], counters: Mapping[str, Any]) -> None:
        """The pool of a checkpoint (checked by :meth:`state_problem`)."""
        sizes = counters.get("sizes", {})
        for name in self.policies:
            self.pools[name] = [
                (
                    next(self._ids),
                    {key.split("/", 2)[2]: np.array(v) for key, v in arrays.items() if key.startswith(f"{name}/{k}/")},
                )
                for k in range(int(sizes.get(name, 0)))
            ]
            self._next_snapshot[name] = int(counters.get("next_snapshot", {}).get(name, self._next_snapshot[name]))
        self._choice.clear()

    # --- moves ------------------------------------------------------------------------------
    def __call__(self, seat: str, obs, rows: np.ndarray) -> np.ndarray:
        """The moves of ``seat`` in the games of ``rows`` (its observations ``obs``, a batch)."""
        if self.fixed is not None:
            return np.asarray(self.fixed(seat, obs, rows))
        name = self.seat_policy[seat]
        rows = np.asarray(rows)
        drawn = [self._choice.get(int(row), {}).get(name) for row in rows]
        keys = np.array([-1 if entry is None else entry[0] for entry in drawn])
        out = np.empty(len(rows), np.int64)
        for key in np.unique(keys):
            index = np.flatnonzero(keys == key)
            own = map_obs(lambda x: np.asarray(x)[index], obs)
            if key == _RANDOM[0]:
                out[index] = self.random_player(seat, own, rows[index])
                continue
            self._load(name, drawn[index[0]])
            out[index] = np.asarray(self.players[name].act(own, explore=bool(self.settings.opponent_explore)))
        return out

    def _load(self, name: str, entry: tuple[int, dict] | None) -> None:
        """Put the weights of ``entry`` (None: the policy's current ones) into the policy's player."""
        policy = self.policies[name]
        key = ("latest", int(policy.weights_version)) if entry is None else ("pool", entry[0])
        if self._loaded[name] == key:
            return
        player = self.players[name]
        player.set_weights(policy.get_weights() if entry is None else entry[1])
        # the player explores as the policy does now (an epsilon schedule reads timesteps; a fresh
        # copy's 0 would keep a DQN opponent at its first, all-random epsilon)
        player.timesteps = int(policy.timesteps)
        self._loaded[name] = key
