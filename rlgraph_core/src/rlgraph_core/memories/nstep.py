"""Assemble n-step transitions from a vector environment's one-step stream."""

from __future__ import annotations

import numpy as np

from rlgraph_core.readonly import ReadOnly
from rlgraph_core.memories._checks import check_float, check_int
from rlgraph_core.memories.obs import flatten_fields, map_obs, unflatten_fields

__all__ = ["NStepAssembler"]


class NStepAssembler:
    """Turns per-step vector-env output into n-step transitions, one ring buffer per env.

    Each pending transition starts at some step t and accumulates rewards until it spans
    ``n_step`` steps, or until its episode ends, whichever comes first. A completed transition
    covering m steps (1 <= m <= n_step) has

    * "obs", "actions": observation and action at step t;
    * "rewards": ``sum_{k<m} gamma**k * r_{t+k}`` (float32);
    * "next_obs": the true observation after step t+m-1;
    * "terminals": True iff the episode terminated at step t+m-1 (do not bootstrap);
    * "discounts": ``gamma**m`` (float32), the factor for the bootstrap value.

    When an env's episode ends (terminated or truncated) every pending transition of that env
    is emitted with its own m, so no transition spans two episodes; truncation still
    bootstraps (terminals False). With ``n_step=1`` the output is the one-step transitions.

    Observations keep their dtype (uint8 images stay uint8); a Dict observation (a dict of
    arrays, each with leading dimension ``num_envs``) is buffered per key and emitted as a dict.

    Args:
        num_envs: Number of environments in the vector env (leading dim of every ``add`` arg).
        n_step: Maximum number of steps a transition spans.
        gamma: Discount factor in [0, 1].
    """

    def __init__(self, num_envs: int, n_step: int, gamma: float) -> None:
        self._num_envs = check_int("num_envs", num_envs, minimum=1)
        self._n = check_int("n_step", n_step, minimum=1)
        self._gamma = check_float("gamma", gamma, low=0.0, high=1.0)
        self._gamma_powers = self._gamma ** np.arange(self._n + 1, dtype=np.float64)
        # returns = chronological_rewards @ self._discount_matrix, where entry [i, j] is
        # gamma**(i - j) for i >= j: row j of the result is the return of the j-th oldest item.
        lag = np.arange(self._n)[:, None] - np.arange(self._n)[None, :]
        self._discount_matrix = np.where(lag >= 0, self._gamma ** np.maximum(lag, 0), 0.0)
        self._env_ids = np.arange(self._num_envs)
        self._obs: dict[str, np.ndarray] | None = None  # per flattened key: "obs", "obs/image" ...
        self._actions: np.ndarray | None = None
        self._rewards = np.zeros((self._num_envs, self._n), dtype=np.float64)
        self._head = np.zeros(self._num_envs, dtype=np.int64)  # slot of the oldest pending step
        self._count = np.zeros(self._num_envs, dtype=np.int64)  # pending steps per env

    num_envs = ReadOnly[int]("_num_envs", "Number of environments.")
    n_step = ReadOnly[int]("_n", "Maximum number of steps a transition spans.")
    gamma = ReadOnly[float]("_gamma", "Discount factor.")

    @property
    def pending(self) -> np.ndarray:
        """Number of not yet emitted transitions per env (int64 copy, shape ``[num_envs]``)."""
        return self._count.copy()

    def reset(self) -> None:
        """Drop all pending, not yet emitted data (for example after the envs are re-created)."""
        self._head[:] = 0
        self._count[:] = 0

    def _as_batch(self, name: str, value: np.ndarray, record_shape: tuple[int, ...] | None) -> np.ndarray:
        """Return ``value`` as an array with leading dim ``num_envs`` (and ``record_shape``)."""
        arr = np.asarray(value)
        if arr.ndim == 0 or arr.shape[0] != self._num_envs:
            raise ValueError(f"{name} must have leading dimension num_envs={self._num_envs}, got shape {arr.shape}.")
        if record_shape is not None and arr.shape[1:] != record_shape:
            raise ValueError(f"{name} must have shape ({self._num_envs}, *{record_shape}), got {arr.shape}.")
        return arr

    def _one_step(self, obs, actions, rewards, next_obs, terminated) -> dict[str, np.ndarray]:
        """With ``n_step == 1`` every step is a finished transition: no buffering is needed."""
        obs = map_obs(np.asarray, obs)
        if isinstance(obs, dict):
            obs_f, next_f = flatten_fields({"o": obs}), flatten_fields({"o": next_obs})
            next_obs = unflatten_fields({k: np.asarray(next_f[k], a.dtype) for k, a in obs_f.items()})["o"]
            n = len(next(iter(obs_f.values())))
        else:
            next_obs, n = np.asarray(next_obs, obs.dtype), len(obs)
        return {
            "obs": obs,
            "actions": np.asarray(actions),
            "rewards": np.asarray(rewards, np.float32),
            "next_obs": next_obs,
            "terminals": np.asarray(terminated, bool),
            "discounts": np.full(n, self._gamma, np.float32),
        }

    def add(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
    ) -> dict[str, np.ndarray] | None:
        """Record one vector-env step and return the transitions it completes, or None.

        Every argument has leading dimension ``num_envs``; ``next_obs`` is the true next
        observation (the final one for envs whose episode just ended). The first call fixes the
        per-env shapes and dtypes of obs and actions; later calls must match those shapes (values
        are cast to the first dtypes). Emitted transitions are ordered by env index, and within an
        env oldest first, ready for ``ReplayMemory.insert``.
        """
        if self._n == 1:
            return self._one_step(obs, actions, rewards, next_obs, terminated)
        obs_f = flatten_fields({"obs": obs})
        if self._obs is None:
            obs_arrs = {k: self._as_batch(k, v, None) for k, v in obs_f.items()}
            act_arr = self._as_batch("actions", actions, None)
        else:
            assert self._actions is not None
            if obs_f.keys() != self._obs.keys():
                raise ValueError(f"obs has keys {sorted(obs_f)}, but earlier steps had {sorted(self._obs)}.")
            obs_arrs = {k: self._as_batch(k, v, self._obs[k].shape[2:]) for k, v in obs_f.items()}
            act_arr = self._as_batch("actions", actions, self._actions.shape[2:])
        rew = self._as_batch("rewards", rewards, ()).astype(np.float64, copy=False)
        next_f = flatten_fields({"obs": next_obs})  # named like obs to pair the keys
        if next_f.keys() != obs_f.keys():
            raise ValueError(f"next_obs has keys {sorted(next_f)}, but obs has {sorted(obs_f)}.")
        next_arrs = {k: self._as_batch("next_" + k, v, obs_arrs[k].shape[1:]) for k, v in next_f.items()}
        term = self._as_batch("terminated", terminated, ()).astype(bool, copy=False)
        trunc = self._as_batch("truncated", truncated, ()).astype(bool, copy=False)
        if self._obs is None:
            n, e = self._n, self._num_envs
            self._obs = {k: np.zeros((e, n) + a.shape[1:], dtype=a.dtype) for k, a in obs_arrs.items()}
            self._actions = np.zeros((e, n) + act_arr.shape[1:], dtype=act_arr.dtype)
        assert self._actions is not None

        n, env = self._n, self._env_ids
        slot = (self._head + self._count) % n
        for k, a in obs_arrs.items():
            self._obs[k][env, slot] = a
        self._actions[env, slot] = act_arr
        self._rewards[env, slot] = rew
        self._count += 1

        # Column j of ``chrono`` is the slot of each env's j-th oldest pending step.
        chrono = (self._head[:, None] + np.arange(n)[None, :]) % n
        valid = np.arange(n)[None, :] < self._count[:, None]
        returns = np.where(valid, self._rewards[env[:, None], chrono], 0.0) @ self._discount_matrix

        done = term | trunc
        full = ~done & (self._count == n)  # emits only its oldest item
        emit = (done[:, None] & valid) | (full[:, None] & (np.arange(n) == 0)[None, :])
        env_idx, age = np.nonzero(emit)  # row-major: by env, then oldest first

        out = None
        if env_idx.size:
            src = chrono[env_idx, age]
            steps = self._count[env_idx] - age  # steps summed into each emitted transition
            out = unflatten_fields(
                {
                    **{k: buf[env_idx, src] for k, buf in self._obs.items()},
                    "actions": self._actions[env_idx, src],
                    "rewards": returns[env_idx, age].astype(np.float32),
                    **{"next_" + k: a[env_idx].astype(self._obs[k].dtype, copy=False) for k, a in next_arrs.items()},
                    "terminals": term[env_idx],
                    "discounts": self._gamma_powers[steps].astype(np.float32),
                }
            )
        self._head = np.where(done, 0, np.where(full, (self._head + 1) % n, self._head))
        self._count = np.where(done, 0, np.where(full, self._count - 1, self._count))
        return out
