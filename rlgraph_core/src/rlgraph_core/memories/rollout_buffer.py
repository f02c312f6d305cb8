"""On-policy rollout storage: ``n_steps`` steps of ``num_envs`` vector envs, then minibatches.

Plain numpy, backend-independent, preallocated. Data is stored time-major (``[T, N, ...]``), which
is what advantage estimation needs; :func:`iterate_minibatches` flattens ``T x N`` samples and
yields shuffled minibatches, every sample exactly once per epoch. Fields keep their dtype (uint8
images stay uint8); a field holding a dict (a Dict observation) is stored per key and given
back as the same dict.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from rlgraph_core.memories.obs import flatten_fields, map_obs, unflatten_fields


def iterate_minibatches(
    data: dict[str, np.ndarray],
    batch_size: int,
    n_epochs: int = 1,
    rng: np.random.Generator | None = None,
    shuffle: bool = True,
) -> Iterator[dict[str, np.ndarray]]:
    """Yield minibatches of ``data`` (equal leading dims) for ``n_epochs`` epochs.

    Each epoch draws a fresh permutation and cuts it into consecutive chunks of ``batch_size``;
    the last chunk is smaller when ``batch_size`` does not divide the number of samples, so every
    sample appears exactly once per epoch. Each minibatch also holds its ``"indices"``.

    Args:
        data: arrays with the same leading dimension (the samples).
        batch_size: samples per minibatch (positive).
        n_epochs: passes over the data.
        rng: generator for the permutations (a fresh unseeded one if None).
        shuffle: permute each epoch (False: in order).
    """
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}.")
    flat_data = flatten_fields(data)
    sizes = {k: len(v) for k, v in flat_data.items()}
    if len(set(sizes.values())) > 1:
        raise ValueError(f"every array must have the same number of samples; got {sizes}.")
    total = next(iter(sizes.values()), 0)
    rng = np.random.default_rng(rng)
    for _ in range(n_epochs):
        order = _epoch_order(total, rng, shuffle)
        for start in range(0, total, batch_size):
            idx = order[start : start + batch_size]
            batch = {k: map_obs(lambda v: v[idx], v) for k, v in data.items()}
            batch["indices"] = idx
            yield batch


def _epoch_order(total: int, rng: np.random.Generator, shuffle: bool) -> np.ndarray:
    """One epoch's sample order: a fresh permutation from ``rng`` (one call), or in order."""
    return rng.permutation(total) if shuffle else np.arange(total)


def minibatch_indices(
    total: int,
    batch_size: int,
    n_epochs: int = 1,
    rng: np.random.Generator | None = None,
    shuffle: bool = True,
) -> np.ndarray:
    """The sample indices of every minibatch of ``n_epochs`` epochs at once, ``[K, batch_size]`` int64.

    Row ``k`` holds the ``"indices"`` of the ``k``-th minibatch :func:`iterate_minibatches` yields
    for ``total`` samples: the permutations come from the same ``rng`` calls in the same order,
    so a fused update round (which takes its minibatches from these rows) and the minibatch loop
    see the same minibatches and leave ``rng`` in the same state. ``K = n_epochs * total //
    batch_size``.

    Raises:
        ValueError: when ``batch_size`` does not divide ``total`` (the last minibatch of each
            epoch would be smaller, so the rows would not stack).
    """
    if batch_size <= 0 or total % batch_size:
        raise ValueError(f"minibatch_indices needs a batch_size that divides the {total} samples; got {batch_size}.")
    rng = np.random.default_rng(rng)
    orders = [_epoch_order(total, rng, shuffle) for _ in range(n_epochs)]
    return np.concatenate(orders).astype(np.int64, copy=False).reshape(-1, batch_size)


class RolloutBuffer:
    """FIFO storage of one on-policy rollout.

    :meth:`add` appends one vector-env step (every field ``[N, ...]``); after ``n_steps`` adds the
    buffer is :attr:`full`. Fields and their shapes and dtypes are fixed by the first add.
    :meth:`data` gives the time-major arrays, :meth:`flat` the ``[T * N, ...]`` views, and
    :meth:`minibatches` shuffled minibatches over epochs; :meth:`reset` empties it for the next
    rollout (storage is reused).

    Args:
        n_steps: steps per env per rollout (T).
        num_envs: number of parallel envs (N).
        seed: seeds the minibatch permutations.
    """

    def __init__(self, n_steps: int, num_envs: int, seed: int | None = 0):
        if n_steps <= 0 or num_envs <= 0:
            raise ValueError(f"n_steps and num_envs must be positive; got {n_steps}, {num_envs}.")
        self.n_steps = int(n_steps)
        self.num_envs = int(num_envs)
        self.rng = np.random.default_rng(seed)
        self._store: dict[str, np.ndarray] = {}
        self._pos = 0

    def __len__(self) -> int:
        """Steps stored so far (per env)."""
        return self._pos

    @property
    def full(self) -> bool:
        """Whether ``n_steps`` steps are stored."""
        return self._pos >= self.n_steps

    @property
    def size(self) -> int:
        """Samples stored so far (steps x envs)."""
        return self._pos * self.num_envs

    def add(self, **fields: np.ndarray) -> None:
        """Append one vector step; every field has leading dimension ``num_envs``."""
        if self.full:
            raise RuntimeError(
                f"The rollout buffer is full ({self.n_steps} steps); learn from it and reset() it before adding more."
            )
        fields = flatten_fields(fields)
        if not self._store:
            for name, value in fields.items():
                value = np.asarray(value)
                self._check(name, value)
                self._store[name] = np.zeros((self.n_steps, *value.shape), value.dtype)
        elif fields.keys() != self._store.keys():
            raise KeyError(f"add() got fields {sorted(fields)} but the buffer holds {sorted(self._store)}.")
        store, pos = self._store, self._pos
        for name, value in fields.items():
            value = np.asarray(value)
            target = store[name]
            # A value of the stored step shape passed _check when the field was created; only
            # other shapes need it (for its error message). Saves a call per field per env step.
            if value.shape != target.shape[1:]:
                self._check(name, value)
            target[pos] = value
        self._pos += 1

    def _check(self, name: str, value: np.ndarray) -> None:
        if value.ndim == 0 or value.shape[0] != self.num_envs:
            raise ValueError(
                f"Field '{name}' has shape {value.shape}; its leading dimension must be the "
                f"number of envs ({self.num_envs})."
            )
        stored = self._store.get(name)
        if stored is not None and stored.shape[1:] != value.shape:
            raise ValueError(f"Field '{name}' has shape {value.shape} but earlier steps had {stored.shape[1:]}.")

    def set(self, name: str, values: np.ndarray) -> None:
        """Store a whole time-major field ``[T, N, ...]`` computed after the rollout (e.g. advantages)."""
        values = np.asarray(values)
        if values.shape[:2] != (self.n_steps, self.num_envs):
            raise ValueError(
                f"Field '{name}' must be [n_steps, num_envs, ...] = "
                f"[{self.n_steps}, {self.num_envs}, ...]; got {values.shape}."
            )
        self._store[name] = values

    def data(self) -> dict[str, np.ndarray]:
        """The stored steps, time-major ``[T, N, ...]`` (views, valid until the next add)."""
        return unflatten_fields({k: v[: self._pos] for k, v in self._store.items()})

    def flat(self) -> dict[str, np.ndarray]:
        """The stored samples flattened to ``[T * N, ...]`` (time-major order)."""
        return {k: map_obs(lambda v: v.reshape(-1, *v.shape[2:]), v) for k, v in self.data().items()}

    def minibatches(
        self, batch_size: int, n_epochs: int = 1, fields: list[str] | None = None, shuffle: bool = True
    ) -> Iterator[dict[str, np.ndarray]]:
        """Shuffled minibatches of the flattened samples, every sample once per epoch.

        Args:
            batch_size: samples per minibatch (the last one of an epoch may be smaller).
            n_epochs: passes over the rollout.
            fields: which fields to include (default: all).
            shuffle: permute each epoch.
        """
        flat = self.flat()
        if fields is not None:
            flat = {k: flat[k] for k in fields}
        return iterate_minibatches(flat, batch_size, n_epochs, self.rng, shuffle)

    def reset(self) -> None:
        """Empty the buffer (storage is kept and overwritten by the next rollout)."""
        self._pos = 0

    def partial(self) -> dict[str, np.ndarray] | None:
        """Copies of the steps of a partly collected rollout (flat field names, ``[pos, N, ...]``);
        None when the buffer is empty or full."""
        if self._pos == 0 or self.full:
            return None
        return {k: np.array(v[: self._pos], copy=True) for k, v in self._store.items()}

    def restore_partial(self, fields: dict[str, np.ndarray]) -> None:
        """Carry on with the partly collected rollout ``fields`` (as :meth:`partial` gave them; the
        caller checked them): storage of their shapes and dtypes, filled with them."""
        pos = len(next(iter(fields.values())))
        self._store = {}
        for name, value in fields.items():
            self._store[name] = np.zeros((self.n_steps, *value.shape[1:]), value.dtype)
            self._store[name][:pos] = value
        self._pos = pos
