"""Fixed-length sequences of a vector env's steps for recurrent replay (R2D2), in plain numpy.

:class:`SequenceAssembler` cuts each env's stream of steps into overlapping windows of
``seq_len`` steps plus one observation to bootstrap from, as R2D2 does (Kapturowski et al. 2019:
sequences of 80 steps, adjacent ones overlapping by 40, the first 40 a burn-in). The first
``burn_in`` steps of a window only warm up the recurrent state; the other ``seq_len - burn_in``
are trained on. Windows start every ``seq_len - burn_in`` steps, so a window's burn-in is the
previous window's last trained steps and every step after an env's first ``burn_in`` is trained
on exactly once. A window is one replay record; sequences run across episode ends (the state is
zeroed where an episode starts, as in this library's recurrent PPO), so nothing is padded and
every record has the same shape::

    obs     [L + 1, ...]   the observations acted on (L = seq_len); the last one only
                           bootstraps the last step
    starts  [L + 1]        where an episode starts (the state is zeroed before that step)
    actions, rewards, terminated, truncated   [L]
    state   {key: [units]} the policy state the window's first step acted from, before its reset

:func:`sequence_targets` turns a sampled batch into n-step targets of the trained steps.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from rlgraph_core.memories.obs import map_obs

__all__ = ["SequenceAssembler", "sequence_batch", "sequence_priorities", "sequence_targets", "trained_rows"]

#: Per-step fields of a sequence record that hold ``L`` values (``obs`` and ``starts`` hold ``L + 1``).
STEP_FIELDS = ("actions", "rewards", "terminated", "truncated")


class SequenceAssembler:
    """Collects a vector env's steps and emits sequence records (module docstring).

    Args:
        num_envs: envs stepped together (each env's stream is cut on its own, all at the same steps).
        burn_in: leading steps of a window that only warm up the state.
        seq_len: steps per window, burn-in included (windows start every ``seq_len - burn_in`` steps).
    """

    def __init__(self, num_envs: int, burn_in: int, seq_len: int):
        self.num_envs = int(num_envs)
        self.burn_in = int(burn_in)
        self.seq_len = int(seq_len)
        self.length = self.seq_len
        self.stride = self.seq_len - self.burn_in
        self._steps: deque = deque(maxlen=self.length + 1)
        self._count = 0

    def reset(self) -> None:
        """Forget the steps collected so far (the envs start afresh)."""
        self._steps.clear()
        self._count = 0

    def add(self, obs, starts, state, actions, rewards, terminated, truncated) -> dict[str, Any] | None:
        """One vector step: ``obs`` acted on, ``starts`` ``[N]`` (episode starts there), the
        ``state`` it acted from (before the reset), and the step's outcome. Returns the
        ``num_envs`` records of a window that is complete now (its last observation is this
        step's), else None."""
        self._steps.append(
            (
                obs,
                np.asarray(starts, bool),
                state,
                np.asarray(actions),
                np.asarray(rewards, np.float32),
                np.asarray(terminated, bool),
                np.asarray(truncated, bool),
            )
        )
        self._count += 1
        done = self._count - 1 - self.length  # steps since the first window could close
        if done < 0 or done % self.stride:
            return None
        steps = list(self._steps)
        trained = steps[:-1]

        def env_major(values) -> np.ndarray:
            return np.stack([np.asarray(v) for v in values], axis=1)  # [N, T, ...]

        record: dict[str, Any] = {
            "obs": _stack_obs([s[0] for s in steps]),
            "starts": env_major([s[1] for s in steps]),
        }
        for i, name in enumerate(STEP_FIELDS, start=3):
            record[name] = env_major([s[i] for s in trained])
        record["state"] = {k: np.asarray(v, np.float32).copy() for k, v in steps[0][2].items()}
        return record


def _stack_obs(values: list):
    """Per-step observation batches ``[N, ...]`` (or dicts of them) -> ``[N, T, ...]``."""
    if isinstance(values[0], dict):
        return {k: _stack_obs([v[k] for v in values]) for k in values[0]}
    return np.stack([np.asarray(v) for v in values], axis=1)


def sequence_targets(
    rewards: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    burn_in: int,
    n_step: int,
    gamma: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n-step returns, bootstrap discounts and loss masks of the trained steps of sequences.

    Args:
        rewards / terminated / truncated: ``[N, L]`` per sequence (``L = seq_len``).
        burn_in: leading steps that are not trained.
        n_step: steps summed before bootstrapping.
        gamma: discount.

    Returns:
        ``(returns, discounts, mask)``, each ``[N, L - burn_in]`` float32, for the trained steps
        ``t = burn_in ... L - 1``. With ``m = min(n_step, L - t)`` (the sequence's last steps
        bootstrap sooner, from its last observation): ``returns = sum_{i<j} gamma^i r_{t+i}`` up
        to the end of the episode or ``m`` steps, ``discounts = gamma^m`` where the value of
        observation ``t + m`` is added, 0 where the episode terminated within those steps. A step
        whose window meets a truncation has mask 0: its bootstrap would need the final
        observation, which the sequence (holding the next episode's first one) does not keep.
    """
    rewards = np.asarray(rewards, np.float64)
    term = np.asarray(terminated, bool)
    trunc = np.asarray(truncated, bool)
    n, length = rewards.shape
    trained = length - burn_in
    returns = np.zeros((n, trained))
    discounts = np.zeros((n, trained))
    mask = np.ones((n, trained))
    for k in range(trained):
        t = burn_in + k
        m = min(n_step, length - t)
        alive = np.ones(n, bool)
        scale = np.ones(n)
        for i in range(m):
            returns[:, k] += np.where(alive, scale * rewards[:, t + i], 0.0)
            mask[:, k] = np.where(alive & trunc[:, t + i], 0.0, mask[:, k])
            alive &= ~(term[:, t + i] | trunc[:, t + i])
            scale = scale * gamma
        discounts[:, k] = np.where(alive, gamma**m, 0.0)
    return returns.astype(np.float32), discounts.astype(np.float32), mask.astype(np.float32)


def trained_rows(trained: int, batch: int, n_step: int) -> tuple[np.ndarray, np.ndarray]:
    """int64 ``(rows, boot_rows)``, each ``[trained * batch]``: of a time-major unroll over a
    window's ``trained + 1`` last steps flattened to rows ``t * batch + b``, the rows of the trained
    steps ``t < trained`` and the rows ``min(t + n_step, trained) * batch + b`` they bootstrap from."""
    t = np.repeat(np.arange(trained), batch)
    b = np.tile(np.arange(batch), trained)
    return t * batch + b, np.minimum(t + n_step, trained) * batch + b


def sequence_priorities(td: np.ndarray, mask: np.ndarray, eta: float) -> np.ndarray:
    """R2D2's priority of each sequence from the ``|TD|`` of its trained steps ``[S, B]``:
    ``eta * max + (1 - eta) * mean`` over the steps the loss takes (``mask`` 1), float32 ``[B]``
    (0 for a sequence without any)."""
    td = np.abs(np.asarray(td, np.float64)) * mask
    count = np.maximum(mask.sum(axis=0), 1.0)
    return (eta * td.max(axis=0) + (1.0 - eta) * td.sum(axis=0) / count).astype(np.float32)


def sequence_batch(sample, burn_in: int, n_step: int, gamma: float) -> tuple[tuple, np.ndarray]:
    """``(loss inputs, mask [S, B])`` of a sample of ``B`` sequence records, in numpy, in the order of
    :meth:`rlgraph_core.agents.recurrent_dqn.RecurrentDQNGraph.loss`: ``burn_obs, burn_reset``
    ``[burn_in, B, ...]`` (one placeholder step when ``burn_in`` is 0), ``obs, reset``
    ``[S + 1, B, ...]``, ``state``, ``rows, boot_rows`` (:func:`trained_rows`), then per row
    ``t * B + b`` of the trained steps: ``actions``, n-step ``returns``, ``discounts`` and
    ``weights`` (the sample's importance weight, default 1, times the loss mask)."""
    returns, discounts, mask = sequence_targets(
        sample["rewards"], sample["terminated"], sample["truncated"], burn_in, n_step, gamma
    )
    n, trained = returns.shape
    weights = sample.get("weights")
    weights = np.ones(n, np.float32) if weights is None else np.asarray(weights, np.float32)
    rows, boot_rows = trained_rows(trained, n, n_step)

    def time_major(x) -> np.ndarray:
        return np.ascontiguousarray(np.swapaxes(np.asarray(x), 0, 1))

    def flat(x) -> np.ndarray:  # [B, S] -> [S * B], row t * B + b
        return np.ascontiguousarray(np.asarray(x).T.reshape(-1))

    obs, starts = sample["obs"], sample["starts"]
    burn = slice(0, max(burn_in, 1))
    inputs = (
        map_obs(lambda x: time_major(x[:, burn]), obs),
        time_major(starts[:, burn]),
        map_obs(lambda x: time_major(x[:, burn_in:]), obs),
        time_major(starts[:, burn_in:]),
        {k: np.asarray(v, np.float32) for k, v in sample["state"].items()},
        rows,
        boot_rows,
        flat(np.asarray(sample["actions"])[:, burn_in:]),
        flat(returns),
        flat(discounts),
        flat(mask * weights[:, None]).astype(np.float32),
    )
    return inputs, np.ascontiguousarray(mask.T)
