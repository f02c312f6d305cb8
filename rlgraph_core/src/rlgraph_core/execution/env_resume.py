"""The episodes in progress at a stop, stored without pickling and replayed on resume.

A gymnasium env's state cannot be saved without pickling it, which checkpoints never do. But a
deterministic env's state is a function of where its episode's randomness started and the
actions taken since: :class:`~rlgraph_core.env_checks.CheckedEnv` (the outermost wrapper of every
training env) notes at each reset either the reset seed or the env's ``np_random`` bit-generator
state before the reset draws (a JSON dict), and the :class:`~rlgraph_core.execution.env_runner.EnvRunner`
keeps the actions of the episodes in progress. :func:`snapshot` turns both, with the current
observations and the partial returns and lengths, into a checkpoint attachment (``env_runner.npz``
plus JSON; with an on-policy agent's partly collected rollout, ``rollout/<field>``); :func:`replay` restores each sub-env's generator, resets it, steps the recorded
actions and checks that it lands on the stored observation (and return). Where it does not (an
env with randomness of its own, such as ALE's), the episodes in progress restart as before, with
one warning line.

Only a :class:`gymnasium.vector.SyncVectorEnv` of array observations and array actions, stepped
by a feed-forward policy, is replayed; other vector envs (async, EnvPool, PettingZoo) and
recurrent policies store no snapshot and restart their episodes, as before.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from rlgraph_core.errors import CheckpointError

__all__ = ["ATTACHMENT", "check_snapshot", "replay", "snapshot"]

#: the checkpoint attachment's name (``env_runner.npz``)
ATTACHMENT = "env_runner"
_VERSION = 1
_ARRAYS = frozenset({"obs", "actions", "returns", "lengths"})
#: the prefix of an on-policy agent's partly collected rollout in the attachment
_ROLLOUT = "rollout/"
#: bit generators whose state a snapshot may name (numpy's own; nothing is looked up by a stored name otherwise)
_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")


def _sub_envs(envs) -> list | None:
    """The sub-envs of a sync vector env whose outermost wrapper notes episode starts, else None."""
    subs = getattr(envs, "envs", None)
    if not isinstance(subs, (list, tuple)) or len(subs) != getattr(envs, "num_envs", -1):
        return None
    if any(getattr(sub, "episode_start", None) is None for sub in subs):
        return None
    return list(subs)


def snapshot(runner, timesteps: int) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
    """``(arrays, info)`` of ``runner``'s episodes in progress at the run's ``timesteps``, or None
    where they cannot be replayed (another vector env, Dict observations or actions)."""
    subs = _sub_envs(runner.envs)
    obs = runner.obs
    log = runner.action_log()
    if runner.state is not None:  # a recurrent policy's state is not stored yet: its episodes restart
        return None
    if subs is None or not isinstance(obs, np.ndarray) or any(not isinstance(a, np.ndarray) for a in log[-1:]):
        return None
    n = runner.num_envs
    actions = np.stack(log) if log else np.zeros((0, n))
    arrays = {
        "obs": np.array(obs, copy=True),
        "actions": actions,
        "returns": np.array(runner._returns, dtype=np.float64, copy=True),
        "lengths": np.array(runner._lengths, dtype=np.int64, copy=True),
    }
    partial = getattr(runner.agent, "partial_rollout", None)
    rollout = partial() if partial is not None else None
    if rollout:  # an on-policy agent's steps of the rollout in progress, which the replayed episodes continue
        arrays.update({f"{_ROLLOUT}{k}": v for k, v in rollout.items()})
    info = {
        "version": _VERSION,
        "timesteps": int(timesteps),
        "num_envs": n,
        "starts": [dict(sub.episode_start) for sub in subs],
    }
    return arrays, info


def _start_problem(start: Any) -> str | None:
    """Why ``start`` is not ``{"seed": int}`` or ``{"rng": numpy bit-generator state}``, or None."""
    if not isinstance(start, dict) or len(start) != 1:
        return f"{str(start)[:80]} is not one of {{'seed': int}} or {{'rng': bit-generator state}}"
    if "seed" in start:
        seed = start["seed"]
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            return f"seed {seed!r} is not a whole number >= 0"
        return None
    state = start.get("rng")
    name = state.get("bit_generator") if isinstance(state, dict) else None
    if name not in _BIT_GENERATORS:
        return f"rng {str(state)[:80]} names no numpy bit generator of {', '.join(_BIT_GENERATORS)}"
    try:
        getattr(np.random, name)().state = state  # a throwaway generator: numpy checks every field
    except (TypeError, ValueError, KeyError, OverflowError) as exc:
        return f"rng state {str(state)[:80]} is refused by numpy ({type(exc).__name__}: {exc})"
    return None


def _actions_problem(actions: np.ndarray, space) -> str | None:
    """Why the recorded ``actions`` cannot be actions of ``space`` (Discrete and Box checked), or None."""
    if actions.size == 0:
        return None
    n = getattr(space, "n", None)
    if n is not None and not hasattr(space, "nvec"):
        if actions.dtype.kind not in "iu":
            return f"actions are {actions.dtype}, not integers of Discrete({n})"
        start = int(getattr(space, "start", 0))
        if actions.min() < start or actions.max() >= start + int(n):
            return f"actions span {actions.min()}..{actions.max()}, outside Discrete({n}, start={start})"
    low, high = getattr(space, "low", None), getattr(space, "high", None)
    if low is not None and high is not None:
        if actions.dtype.kind not in "fiu" or not np.all(np.isfinite(actions)):
            return "actions are not finite numbers"
        if np.any(actions < low) or np.any(actions > high):
            return "actions lie outside the Box's bounds"
    return None


def check_snapshot(
    info: Any, arrays: dict[str, np.ndarray], obs_space, act_space, num_envs: int, shown: str, agent=None
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """``(arrays, info)`` if they describe ``num_envs`` episodes of the given single-env spaces in
    progress (and a partly collected rollout ``agent`` can continue, where one is stored); else
    raise :class:`CheckpointError` (nothing is assigned before this passed)."""

    def refuse(problem: str) -> CheckpointError:
        return CheckpointError(
            f"Checkpoint '{shown}': its '{ATTACHMENT}' (the episodes in progress at the stop) is refused: "
            f"{problem}. It must hold, for the run's {num_envs} training envs, each episode's start (a reset seed "
            f"or a numpy bit-generator state), the actions since, the current observations and the partial returns "
            f"and lengths; a run resumed from it would otherwise replay other episodes. Nothing was loaded."
        )

    if not isinstance(info, dict) or info.get("version") != _VERSION:
        raise refuse(f"its info {str(info)[:80]} is not version {_VERSION}")
    if info.get("num_envs") != num_envs:
        raise refuse(f"it was written for {info.get('num_envs')!r} envs, this run has {num_envs}")
    timesteps = info.get("timesteps")
    if isinstance(timesteps, bool) or not isinstance(timesteps, int) or timesteps < 0:
        raise refuse(f"timesteps {timesteps!r} is not a whole number >= 0")
    starts = info.get("starts")
    if not isinstance(starts, list) or len(starts) != num_envs:
        raise refuse(f"starts {str(starts)[:80]} is not a list of {num_envs} episode starts")
    for i, start in enumerate(starts):
        problem = _start_problem(start)
        if problem:
            raise refuse(f"env {i}'s episode start: {problem}")
    rollout = {k[len(_ROLLOUT) :]: v for k, v in arrays.items() if k.startswith(_ROLLOUT)}
    if set(arrays) - {_ROLLOUT + k for k in rollout} != _ARRAYS:
        raise refuse(f"it holds the arrays {sorted(arrays)[:8]}, not {sorted(_ARRAYS)} (and rollout/...)")
    if rollout:
        check = getattr(agent, "partial_rollout_problem", None)
        problem = "this agent keeps no rollout" if check is None else check(rollout)
        if problem:
            raise refuse(f"its partly collected rollout: {problem}")
    obs, actions, returns, lengths = (arrays[k] for k in ("obs", "actions", "returns", "lengths"))
    want = (num_envs, *tuple(getattr(obs_space, "shape", None) or ()))
    if obs.shape != want or obs.dtype != getattr(obs_space, "dtype", obs.dtype):
        raise refuse(f"obs is {list(obs.shape)} {obs.dtype}, the env's batch is {list(want)} {obs_space.dtype}")
    if returns.shape != (num_envs,) or returns.dtype != np.float64 or not np.all(np.isfinite(returns)):
        raise refuse(f"returns is {list(returns.shape)} {returns.dtype}, not {num_envs} finite float64")
    if lengths.shape != (num_envs,) or lengths.dtype.kind not in "iu" or (lengths < 0).any():
        raise refuse(f"lengths is {list(lengths.shape)} {lengths.dtype}, not {num_envs} counts >= 0")
    steps = int(lengths.max()) if num_envs else 0
    act_shape = tuple(getattr(act_space, "shape", None) or ())
    if steps and actions.shape != (steps, num_envs, *act_shape):
        raise refuse(f"actions is {list(actions.shape)}, not [{steps}, {num_envs}, ...{list(act_shape)}]")
    if not steps and actions.shape[:1] != (0,):
        raise refuse(f"actions is {list(actions.shape)} though no episode has taken a step")
    problem = _actions_problem(actions, act_space)
    if problem:
        raise refuse(problem)
    return arrays, info


def _replay_one(sub, start: dict, actions: np.ndarray, obs: np.ndarray, ret: float) -> bool:
    """Reset ``sub`` at ``start``, step ``actions``; whether it ends on ``obs`` with return ``ret`` mid-episode."""
    if "seed" in start:
        current, _ = sub.reset(seed=start["seed"])
    else:
        sub.np_random.bit_generator.state = start["rng"]
        current, _ = sub.reset()
    total = 0.0
    for action in actions:
        current, reward, terminated, truncated, _ = sub.step(action)
        total += float(reward)  # float64, as the runner's sum of the vector env's float64 rewards
        if terminated or truncated:
            return False
    current = np.asarray(current)
    same = np.array_equal(current, obs, equal_nan=current.dtype.kind == "f" and obs.dtype.kind == "f")
    return same and float(total) == float(ret)


def replay(runner, arrays: dict[str, np.ndarray], info: dict[str, Any], timesteps: int, seed: int) -> bool:
    """Put ``runner``'s envs back into the episodes in progress a checked snapshot describes;
    whether it did. If not (another vector env, another step count, or an env that does not
    repeat: its replay ends elsewhere), every env is reset with ``seed`` (the episodes in
    progress restart, as without a snapshot) after one ``rlgraph: warning:`` line."""
    subs = _sub_envs(runner.envs)
    restart = getattr(runner.agent, "continue_rollout", None)
    why = None
    if subs is None:
        why = "its vector env cannot be replayed (only a sync one of array observations)"
    elif info["timesteps"] != timesteps:
        why = f"it was taken at {info['timesteps']} env steps, the agent is at {timesteps}"
    else:
        obs, actions, lengths = arrays["obs"], arrays["actions"], arrays["lengths"]
        steps = len(actions)
        for i, sub in enumerate(subs):
            if not _replay_one(
                sub, info["starts"][i], actions[steps - int(lengths[i]) :, i], obs[i], arrays["returns"][i]
            ):
                why = f"env {i} did not repeat its episode (its own randomness, or a wrapper that keeps state)"
                break
    if why is not None:
        warnings.warn(
            f"rlgraph: warning: the episodes in progress at the stop restart on resume: {why}.",
            RuntimeWarning,
            stacklevel=2,
        )
        runner.obs, _ = runner.envs.reset(seed=int(seed))
        if restart is not None:
            restart(None)  # the steps collected so far would not join the restarted episodes
        return False
    runner.obs = np.array(arrays["obs"], copy=True)
    runner._returns[:] = arrays["returns"]
    runner._lengths[:] = arrays["lengths"]
    runner.set_action_log(list(arrays["actions"]))
    rollout = {k[len(_ROLLOUT) :]: v for k, v in arrays.items() if k.startswith(_ROLLOUT)}
    if rollout and restart is not None:
        restart(rollout)
    return True
