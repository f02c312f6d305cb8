"""Several policies in one run, behind the one agent API every executor already drives.

A :class:`PolicySet` holds one ordinary agent per policy (its own rollouts or replay, optimizer,
schedules, counters) and the mapping of the env's agents to them. The multi-agent vector env
(:class:`~rlgraph_core.multi_agent.PettingZooVectorEnv`) gives one row per ``(copy, agent)``,
copy-major; the set splits each batch by the policy of each row's agent and hands every policy
only its rows, so each policy's agent sees an ordinary vector env of ``copies * len(its agents)``
rows. The env runner, the recorder and the checkpoint code see one agent and are unchanged.

Checkpoints: one folder, each policy's weights and state under ``NAME/`` (``shared/policy/...``,
``shared/optimizer/...``), each policy's counters under ``counters["policies"][NAME]``; every
policy's arrays are checked by that policy's own agent before anything is assigned, and a
resumed run resumes all of them. A self-play run's opponent pool (frozen copies) is stored under
``~pool/NAME/K/...`` and checked against its policy's weights before it is restored.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from rlgraph_core.agents.base import Agent, LearnResult, VersionedWeights
from rlgraph_core.evaluation import agent_policy, evaluate_policy
from rlgraph_core.memories.obs import batch_len, map_obs

__all__ = ["PolicySet", "policy_batches"]

#: Where a checkpoint keeps a self-play opponent pool (``~pool/NAME/K/VARIABLE``): not a policy
#: name (those start with a letter or '_'), so it never meets a policy's own entries.
POOL = "~pool"
#: Where the weights a learner publishes carry each policy's ``[weights_version, updates]``
#: (``~meta/NAME``), so a worker's policies and its self-play pool follow the learner's.
META = "~meta"


class _BuildReports:
    """The build reports of the policies as one: build time and sizes summed."""

    def __init__(self, reports: Sequence[Any]):
        self.reports = [r for r in reports if r is not None]
        self.build_seconds = float(sum(r.build_seconds for r in self.reports))
        self.num_variables = int(sum(getattr(r, "num_variables", 0) for r in self.reports))
        self.num_parameters = int(sum(getattr(r, "num_parameters", 0) for r in self.reports))

    def render(self) -> str:
        """Each policy's component graph, one after the other."""
        return "\n".join(r.render() for r in self.reports)


class PolicySet(Agent):
    """One agent per policy, acting and learning on the rows of the agents mapped to it.

    Args:
        policies: ``{name: agent}``, each built for ``copies * len(its agents)`` rows.
        agent_policy: the policy name of each env agent, in the env's row order (its ``possible_agents``).
        config: the run's ``agent`` section (the type every policy has; checkpoints record it).
        observation_space / action_space: the spaces of the rows (rlgraph spaces).
        backend: the backend the policies are built on.
        observation_sizes: ``{name: n}`` for the policies whose agents observe vectors shorter than
            the rows' (the env pads them, see
            :func:`~rlgraph_core.multi_agent.pettingzoo_env.padded_observation_space`): such a
            policy is built for its own length and sees the first ``n`` entries of its rows.
    """

    def __init__(
        self,
        policies: Mapping[str, Agent],
        agent_policy: Sequence[str],
        config,
        observation_space,
        action_space,
        backend,
        observation_sizes: Mapping[str, int] | None = None,
    ):
        # Not Agent.__init__: a set builds no model of its own, its policies did.
        self.observation_sizes = dict(observation_sizes or {})
        self.policies = dict(policies)
        self.agent_policy = list(agent_policy)
        self.config = config
        self.observation_space = observation_space
        self.action_space = action_space
        self.backend = backend
        first = next(iter(self.policies.values()))
        self.seed = first.seed
        self.components = first.components
        self.agent_setup = first.agent_setup
        self.rng = first.rng
        self.num_envs = sum(p.num_envs for p in self.policies.values())
        self.timesteps = 0
        reports = [p.build_report for p in self.policies.values()]
        self.build_report = _BuildReports(reports)  # type: ignore[assignment]
        self._rows_cache: dict[int, dict[str, Any]] = {}
        #: who plays the other seats of a turn-based game's rows (set by the assembly for one:
        #: :class:`~rlgraph_core.agents.self_play.SelfPlayOpponents`); the env runner binds it.
        self.opponents: Any = None

    # --- rows ----------------------------------------------------------------------------
    def rows(self, batch: int) -> dict[str, Any]:
        """``{policy: row index}`` of a batch of ``batch`` rows (copy-major): a slice where a policy
        has every row (one shared policy: no copy), else an index array."""
        cached = self._rows_cache.get(batch)
        if cached is not None:
            return cached
        n = len(self.agent_policy)
        if batch % n:
            raise ValueError(
                f"A batch of {batch} rows is not whole copies of the env's {n} agents ({self.agent_policy}); "
                f"a PolicySet acts on the rows of a PettingZoo vector env."
            )
        names = np.array(self.agent_policy * (batch // n))
        out: dict[str, Any] = {}
        for name in self.policies:
            index = np.flatnonzero(names == name)
            out[name] = slice(None) if len(index) == batch else index
        self._rows_cache[batch] = out
        return out

    @staticmethod
    def _take(batch, rows):
        return map_obs(lambda x: np.asarray(x)[rows], batch)

    def _own_obs(self, name: str, obs, rows):
        """Policy ``name``'s rows of an observation batch, cut to its own length where it has one."""
        size = self.observation_sizes.get(name)
        if size is None:
            return self._take(obs, rows)
        return np.asarray(obs)[rows, :size]

    # --- acting and learning ----------------------------------------------------------------
    def initial_state(self, batch: int) -> dict[str, Any] | None:
        """``{policy: its state of its rows}`` for the stateful (recurrent) policies, or None when
        every policy is feed-forward (the env runner then calls :meth:`act` without state)."""
        if all(agent.initial_state(1) is None for agent in self.policies.values()):
            return None  # feed-forward (asked with any batch: evaluation asks with 1)
        rows = self.rows(batch)
        states = {name: agent.initial_state(_size(rows[name], batch)) for name, agent in self.policies.items()}
        stateful = {name: state for name, state in states.items() if state is not None}
        return stateful or None

    def act(self, obs, explore: bool = True, *, state=None, episode_start=None):
        """Each policy's actions for its rows, put back in row order; with ``state`` (from
        :meth:`initial_state`) also the next state, each stateful policy's from its rows."""
        n = batch_len(obs)
        rows = self.rows(n)
        if state is None and len(self.policies) == 1:
            (agent,) = self.policies.values()
            return agent.act(obs, explore)
        out, new_state = None, {}
        for name, agent in self.policies.items():
            own = self._own_obs(name, obs, rows[name])
            if state is not None and name in state:
                actions, new_state[name] = agent.act(
                    own, explore, state=state[name], episode_start=np.asarray(episode_start)[rows[name]]
                )
            else:
                actions = agent.act(own, explore)
            actions = np.asarray(actions)
            if out is None:
                out = np.empty((n, *actions.shape[1:]), actions.dtype)
            out[rows[name]] = actions
        assert out is not None  # a set has at least one policy
        return out if state is None else (out, new_state)

    def observe(self, obs, actions, rewards, next_obs, terminated, truncated) -> None:
        """Each policy records the step of its rows."""
        rows = self.rows(len(rewards))
        for name, agent in self.policies.items():
            r = rows[name]
            own = self._own_obs
            agent.observe(
                own(name, obs, r),
                self._take(actions, r),
                rewards[r],
                own(name, next_obs, r),
                terminated[r],
                truncated[r],
            )

    def update(self, batch=None) -> dict[str, Any] | None:
        """Each policy learns as its own schedule says; their metrics under ``NAME/``."""
        if batch is not None:
            raise NotImplementedError("A PolicySet learns from its policies' own rollouts or replay (update()).")
        out: dict[str, Any] = {}
        for name, agent in self.policies.items():
            metrics = agent.update()
            if metrics:
                out.update({f"{name}/{k}": v for k, v in metrics.items()})
        if out and self.opponents is not None:
            self.opponents.after_update()
        return out or None

    # --- the actor and learner roles of a distributed executor (ray_sync) ---------------------
    def take_rollout(self) -> dict[str, Any] | None:
        """Actor role: every policy's postprocessed rollout (``NAME/field``) once all are collected, else None."""
        batches = {name: agent.take_rollout() for name, agent in self.policies.items()}
        ready = sorted(name for name, batch in batches.items() if batch is not None)
        if not ready:
            return None
        if len(ready) != len(batches):
            raise ValueError(
                f"The policies {ready} finished their rollouts at a step where {sorted(set(batches) - set(ready))} did "
                f"not: a distributed executor collects one round for all policies, so every policy needs the same "
                f"n_steps (remove n_steps from multi_agent.policies' changes)."
            )
        return {f"{name}/{k}": v for name, batch in batches.items() for k, v in batch.items()}  # type: ignore[union-attr]

    # --- the actor and learner roles of a replay executor (ray_apex) --------------------------
    def postprocess(self, trajectory: Mapping[str, Any]) -> dict[str, Any]:
        """Actor role (replay): every policy's postprocessed records of a time-major ``[T, N, ...]``
        trajectory of all rows, as ``NAME/field`` (:func:`policy_batches` gives them per policy)."""
        return {
            f"{name}/{k}": v for name, batch in self.postprocess_policies(trajectory).items() for k, v in batch.items()
        }

    def postprocess_policies(self, trajectory: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        """``{policy: its agent's postprocess of its rows of trajectory}`` (n-step records, initial
        priorities under its weights); a stateful policy's rows get its own ``states``."""
        rows = self.rows(int(np.shape(trajectory["rewards"])[1]))
        out: dict[str, dict[str, Any]] = {}
        for name, agent in self.policies.items():
            r = rows[name]
            own: dict[str, Any] = {}
            for key, value in trajectory.items():
                if key == "states":
                    if name in value:
                        own[key] = value[name]
                    continue
                own[key] = map_obs(lambda x, r=r: np.asarray(x)[:, r], value)
            size = self.observation_sizes.get(name)
            if size is not None:
                for key in ("obs", "next_obs"):
                    own[key] = np.asarray(own[key])[..., :size]
            out[name] = agent.postprocess(own)
        return out

    def count_policy_steps(self, steps: int) -> dict[str, int]:
        """Count ``steps`` row steps of the whole env (every row steps at each vector step) into each
        policy's own ``timesteps`` by its share of the rows (its schedules read them); ``{policy: steps}``."""
        n = len(self.agent_policy)
        out = {name: int(steps) * self.agent_policy.count(name) // n for name in self.policies}
        for name, agent in self.policies.items():
            agent._count_env_steps(out[name])
        return out

    def learn_policy(self, name: str, batch: Mapping[str, Any]) -> LearnResult:
        """Learner role (replay): policy ``name`` learns from one batch of its own replay (its new
        priorities in the result); a self-play pool takes the copies that update makes due."""
        result = self.policies[name].learn(batch)
        if self.opponents is not None:
            self.opponents.after_update()
        return result

    def learn(self, batch: Mapping[str, Any]) -> LearnResult:
        """Learner role: each policy learns from its part of ``batch`` (``NAME/field``, e.g. from
        :meth:`take_rollout` of several workers concatenated along the env axis) and counts its
        steps; metrics under ``NAME/`` (``staleness``: the largest); a self-play pool takes its copies."""
        split = self._split(batch)
        metrics: dict[str, float] = {}
        for name, agent in self.policies.items():
            own = split[name]
            agent._count_env_steps(int(np.prod(np.shape(own["rewards"]))))
            result = agent.learn(own)
            metrics.update({f"{name}/{k}": v for k, v in result.metrics.items()})
            if "staleness" in result.metrics:
                metrics["staleness"] = max(metrics.get("staleness", 0.0), float(result.metrics["staleness"]))
        if self.opponents is not None:
            self.opponents.after_update()
        return LearnResult(metrics)

    def get_versioned_weights(self) -> VersionedWeights:
        """Every policy's weights (``NAME/...``) and its ``[weights_version, updates]`` (``~meta/NAME``)."""
        arrays = self.get_weights()
        for name, agent in self.policies.items():
            arrays[f"{META}/{name}"] = np.array([int(agent.weights_version), int(agent.updates)], np.int64)
        return VersionedWeights(self.weights_version, arrays)

    def set_weights(self, weights: Mapping[str, np.ndarray] | VersionedWeights, version: int | None = None) -> None:
        """Every policy's weights (checked, all of them, before any is assigned); with the ``~meta``
        entries of :meth:`get_versioned_weights` each policy takes its version and update count,
        and a self-play pool takes the copies the learner's took at those counts."""
        if isinstance(weights, VersionedWeights):
            weights = weights.arrays
        split = self._split(weights)
        for name, agent in self.policies.items():
            agent.check_weights(split[name])
        meta = split.get(META, {})
        for name, agent in self.policies.items():
            counts = meta.get(name)
            agent.set_weights(split[name], None if counts is None else int(counts[0]))
            if counts is not None:
                agent.updates = int(counts[1])
        if meta and self.opponents is not None:
            self.opponents.after_update()

    def metrics(self) -> dict[str, float]:
        """``updates`` (all policies) and each policy's metrics under ``NAME/``."""
        out: dict[str, float] = {"updates": self.updates}
        for name, agent in self.policies.items():
            out.update({f"{name}/{k}": v for k, v in agent.metrics().items()})
        return out

    @property
    def updates(self) -> int:  # type: ignore[override]
        """Gradient updates of all policies together."""
        return sum(int(p.updates) for p in self.policies.values())

    @updates.setter
    def updates(self, value: int) -> None:
        pass  # counted by the policies (set through set_state)

    @property
    def weights_version(self) -> int:  # type: ignore[override]
        """The sum of the policies' weight versions (it grows whenever any policy learns)."""
        return sum(int(p.weights_version) for p in self.policies.values())

    @weights_version.setter
    def weights_version(self, value: int) -> None:
        pass  # each policy keeps its own (set through set_state)

    def train_steps(self) -> dict[str, Any]:
        return {f"{name}/{k}": step for name, agent in self.policies.items() for k, step in agent.train_steps().items()}

    # --- weights and checkpoints -------------------------------------------------------------
    def variables(self) -> dict[str, Any]:
        """Every policy's variables under ``NAME/``."""
        return {f"{name}/{k}": v for name, agent in self.policies.items() for k, v in agent.variables().items()}

    def get_state(self) -> tuple[dict[str, np.ndarray], dict]:
        arrays: dict[str, np.ndarray] = {}
        counters: dict[str, Any] = {"timesteps": self.timesteps, "updates": self.updates, "policies": {}}
        for name, agent in self.policies.items():
            own, own_counters = agent.get_state()
            arrays.update({f"{name}/{k}": v for k, v in own.items()})
            counters["policies"][name] = own_counters
        if self.opponents is not None:  # a self-play pool: frozen copies under POOL/NAME/K/...
            pool, counters["opponent_pool"] = self.opponents.get_state()
            arrays.update({f"{POOL}/{k}": v for k, v in pool.items()})
        return arrays, counters

    def _split(self, arrays: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {name: {} for name in [*self.policies, POOL]}
        for key, value in arrays.items():
            name, _, rest = key.partition("/")
            out.setdefault(name, {})[rest] = value
        return out

    def state_array_problem(self, name: str, shape: tuple[int, ...], dtype: np.dtype) -> str | None:
        policy, sep, rest = name.partition("/")
        if policy == POOL:
            if self.opponents is None:
                return "is a frozen copy of a self-play opponent pool, but this run plays no turn-based game"
            return self.opponents.array_problem(rest, shape, dtype)
        if not sep or policy not in self.policies:
            return f"belongs to no policy of this run (its policies store under {[p + '/' for p in self.policies]})"
        return self.policies[policy].state_array_problem(rest, shape, dtype)

    def state_problem(self, arrays: Mapping[str, np.ndarray], counters: Mapping[str, Any]) -> str | None:
        if not isinstance(counters, Mapping) or not isinstance(counters.get("policies"), Mapping):
            return "its counters hold no per-policy counters ('policies'): it was not written by a multi-agent run."
        stored = set(counters["policies"])
        if stored != set(self.policies):
            return f"it holds the policies {sorted(stored)}, but this run has {sorted(self.policies)}."
        split = self._split(arrays)
        for name, agent in self.policies.items():
            problem = agent.state_problem(split[name], counters["policies"][name])
            if problem:
                return f"policy '{name}': {problem}"
        if self.opponents is not None and "opponent_pool" in counters:
            return self.opponents.state_problem(split[POOL], counters["opponent_pool"])
        return None

    def set_state(self, arrays: dict[str, np.ndarray], counters: dict) -> None:
        self.timesteps = int(counters.get("timesteps", 0))
        split = self._split(arrays)
        for name, agent in self.policies.items():
            agent.set_state(split[name], counters["policies"][name])
        if self.opponents is not None and "opponent_pool" in counters:
            self.opponents.set_state(split[POOL], counters["opponent_pool"])

    def extra_state_names(self) -> frozenset[str] | None:
        return None  # each policy bounds its own (state_array_problem delegates)

    # --- evaluation ------------------------------------------------------------------------
    def evaluate(self, env, episodes: int = 10, seed: int | None = None, stop=None) -> dict[str, float] | None:
        """Greedy episodes on a one-copy multi-agent vector env.

        A Parallel env: ``episodes`` episodes, each episode's return the mean over its agents (what
        a training row's return is), and with several policies each one's as ``NAME/eval_return_mean``.
        A turn-based game: ``episodes`` games (shared out over the seats) of each row's seat against
        the evaluation opponent (``multi_agent.self_play.eval_opponent``, by default a uniformly
        random legal player), with ``eval_win_rate``, ``eval_draw_rate``, ``eval_loss_rate`` and
        ``eval_illegal_moves`` (per policy too, under ``NAME/``, with several policies).
        """
        policy = agent_policy(self)
        if not hasattr(env, "agents"):
            return evaluate_policy(policy, env, episodes, seed, stop=stop)
        if hasattr(env, "bind_opponents"):
            return self._evaluate_games(env, policy, episodes, seed, stop)
        names = np.array(self.agent_policy * (env.num_envs // len(self.agent_policy)))
        returns, lengths = [], []
        by_policy: dict[str, list[float]] = {name: [] for name in self.policies}
        for i in range(episodes):
            obs, _ = env.reset(seed=None if seed is None else seed + i)
            if hasattr(policy, "start_episode"):
                policy.start_episode()
            total = np.zeros(env.num_envs)
            length = 0
            while True:
                obs, reward, terminated, truncated, _ = env.step(policy(obs))
                total += reward
                length += 1
                if stop is not None and stop():
                    return None
                if np.all(np.logical_or(terminated, truncated)):
                    break
            returns.append(float(total.mean()))
            lengths.append(length)
            for name in by_policy:
                by_policy[name].append(float(total[names == name].mean()))
        out = _summary(returns, lengths)
        if len(self.policies) > 1:
            out.update({f"{name}/eval_return_mean": float(np.mean(r)) for name, r in by_policy.items()})
        return out

    def _evaluate_games(self, env, policy, episodes: int, seed: int | None, stop) -> dict[str, float] | None:
        """``episodes`` games against the evaluation opponent, the first ``ceil(episodes / rows)`` of each row."""
        env.bind_opponents(None if self.opponents is None else self.opponents.eval_opponent)
        rows = env.num_envs
        per_row = -(-int(episodes) // rows)
        names = np.array(self.agent_policy * (rows // len(self.agent_policy)))
        illegal_before = env.illegal_moves
        obs, _ = env.reset(seed=seed)
        total, length = np.zeros(rows), np.zeros(rows, np.int64)
        played = np.zeros(rows, np.int64)
        games: list[tuple[int, float, int, float]] = []  # (row, return, length, outcome)
        while (played < per_row).any():
            obs, reward, terminated, truncated, infos = env.step(policy(obs))
            total += reward
            length += 1
            if stop is not None and stop():
                return None
            for row in np.flatnonzero(np.logical_or(terminated, truncated)):
                if played[row] < per_row:
                    games.append((int(row), float(total[row]), int(length[row]), float(infos["outcome"][row])))
                    played[row] += 1
                total[row], length[row] = 0.0, 0
        out = _summary([g[1] for g in games], [g[2] for g in games])
        out.update(_outcomes([g[3] for g in games]))
        out["eval_illegal_moves"] = float(env.illegal_moves - illegal_before)
        if len(self.policies) > 1:
            for name in self.policies:
                own = [g for g in games if names[g[0]] == name]
                out[f"{name}/eval_return_mean"] = float(np.mean([g[1] for g in own]))
                out.update({f"{name}/{k}": v for k, v in _outcomes([g[3] for g in own]).items()})
        return out


def _summary(returns: Sequence[float], lengths: Sequence[int]) -> dict[str, float]:
    """The evaluation keys every agent reports."""
    return {
        "eval_return_mean": float(np.mean(returns)),
        "eval_return_std": float(np.std(returns)),
        "eval_length_mean": float(np.mean(lengths)),
        "eval_episodes": len(returns),
    }


def _outcomes(outcomes: Sequence[float]) -> dict[str, float]:
    """Win, draw and loss rates of games whose outcomes are +1 / 0 / -1."""
    values = np.asarray(outcomes)
    return {
        "eval_win_rate": float(np.mean(values > 0)),
        "eval_draw_rate": float(np.mean(values == 0)),
        "eval_loss_rate": float(np.mean(values < 0)),
    }


def _size(rows, batch: int) -> int:
    """How many rows ``rows`` (a slice of all ``batch`` rows, or an index array) selects."""
    return batch if isinstance(rows, slice) else len(rows)


def policy_batches(agent: Agent, trajectory: Mapping[str, Any]) -> dict[str | None, dict[str, Any]]:
    """An actor's postprocessed replay records of ``trajectory``, by the policy whose replay takes
    them: a :class:`PolicySet`'s per policy name, any other agent's under None (its one replay)."""
    if isinstance(agent, PolicySet):
        return dict(agent.postprocess_policies(trajectory))
    return {None: agent.postprocess(trajectory)}
