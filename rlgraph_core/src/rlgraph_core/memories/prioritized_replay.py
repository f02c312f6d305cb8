"""Proportional prioritized experience replay (Schaul et al., 2016) on segment trees."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlgraph_core.readonly import ReadOnly
from rlgraph_core.memories._checks import (
    as_index_array,
    check_float,
    check_int,
    state_scalar,
)
from rlgraph_core.memories.replay_memory import ReplayMemory
from rlgraph_core.memories.segment_tree import MinSegmentTree, SumSegmentTree

__all__ = ["PrioritizedReplay"]


class PrioritizedReplay(ReplayMemory):
    """Replay memory that samples record ``i`` with probability ``p_i / sum_k p_k``.

    The stored priority of a record is ``(|td| + epsilon) ** alpha``; new records get the largest
    stored priority seen so far (initially 1.0) so that each is likely to be replayed at least
    once. Sampling is stratified: ``[0, total)`` is split into ``batch_size`` equal segments with
    one uniform draw in each. Importance weights ``(N * P(i)) ** -beta`` are divided by their
    largest possible value, ``(N * p_min / total) ** -beta``, so they lie in ``(0, 1]``.

    Args:
        capacity: Maximum number of records held.
        alpha: Priority exponent; 0 gives uniform sampling.
        beta: Importance-weight exponent used by the first ``sample`` call.
        beta_final: Value ``beta`` reaches after ``beta_annealing_steps`` calls to ``sample``.
        beta_annealing_steps: Number of ``sample`` calls over which beta moves linearly from
            ``beta`` to ``beta_final``; 0 uses ``beta_final`` from the start.
        epsilon: Added to every |td| so no record ever has zero probability.
        seed: Seed for the sampling generator; None draws fresh entropy.
        frames: how uint8 observations are stored (see :class:`ReplayMemory`).
    """

    #: Agents feed |TD| errors back through ``update_priorities`` when this is True.
    prioritized = True

    def __init__(
        self,
        capacity: int,
        alpha: float = 0.6,
        beta: float = 0.4,
        beta_final: float = 1.0,
        beta_annealing_steps: int = 100_000,
        epsilon: float = 1e-6,
        seed: int | None = None,
        frames: str = "auto",
    ) -> None:
        super().__init__(capacity, seed=seed, frames=frames)
        self._alpha = check_float("alpha", alpha, low=0.0)
        self._beta_initial = check_float("beta", beta, low=0.0)
        self._beta_final = check_float("beta_final", beta_final, low=0.0)
        self._beta_steps = check_int("beta_annealing_steps", beta_annealing_steps, minimum=0)
        self._epsilon = check_float("epsilon", epsilon, low=0.0, low_inclusive=False)
        self._sum_tree = SumSegmentTree(self.capacity)
        self._min_tree = MinSegmentTree(self.capacity)
        self._max_priority = 1.0  # already in stored form, (p + epsilon) ** alpha
        self._sample_calls = 0

    alpha = ReadOnly[float]("_alpha", "Priority exponent.")

    @property
    def beta(self) -> float:
        """Importance-weight exponent the next ``sample`` call will use."""
        if self._beta_steps == 0:
            return self._beta_final
        frac = min(1.0, self._sample_calls / self._beta_steps)
        return self._beta_initial + frac * (self._beta_final - self._beta_initial)

    max_priority = ReadOnly[float]("_max_priority", "Largest stored priority so far; new records are inserted with it.")

    def priorities(self, indices: np.ndarray) -> np.ndarray:
        """Return the stored priorities ``(|td| + epsilon) ** alpha`` at ``indices`` (float64)."""
        idx = as_index_array("indices", indices, len(self), "the number of stored records")
        return self._sum_tree[idx]

    def insert(self, batch: Mapping[str, np.ndarray]) -> np.ndarray:
        """Append records as ``ReplayMemory.insert`` does, each with the current max priority."""
        indices = super().insert(batch)
        if indices.size:
            # Slots written by one insert are distinct and valid, so the checks can be skipped.
            values = np.full(indices.size, self._max_priority)
            self._sum_tree._assign_unique(indices, values)
            self._min_tree._assign_unique(indices, values)
        return indices

    def sample(self, batch_size: int) -> dict[str, np.ndarray]:
        """Draw ``batch_size`` records by stratified proportional sampling.

        Returns one array per field plus "indices" (int64) and "weights" (float32 normalised
        importance weights), then advances the beta schedule by one call. Raises RuntimeError
        when the memory is empty.
        """
        batch_size = self._check_can_sample(batch_size)
        total = self._sum_tree.total()
        segment = total / batch_size
        prefixes = (np.arange(batch_size) + self._rng.random(batch_size)) * segment
        np.minimum(prefixes, total, out=prefixes)  # (i + u) * segment can round up past total
        indices = self._sum_tree.find_prefixsum_index(prefixes)

        beta = self.beta
        n = len(self)
        probs = self._sum_tree[indices] / total
        max_weight = (n * self._min_tree.min() / total) ** -beta
        weights = (n * probs) ** -beta / max_weight
        self._sample_calls += 1

        out = self._gather(indices)
        out["indices"] = indices
        out["weights"] = weights.astype(np.float32)
        return out

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """Set the priorities of stored records from new |td| values.

        ``priorities[k]`` (finite, >= 0) applies to slot ``indices[k]``, which must hold a record;
        it is stored as ``(priorities[k] + epsilon) ** alpha``. Repeated indices: the last wins.
        """
        idx = as_index_array("indices", indices, len(self), "the number of stored records")
        raw = np.atleast_1d(np.asarray(priorities, dtype=np.float64))
        if raw.shape != idx.shape:
            raise ValueError(f"indices and priorities must have the same 1-d shape, got {idx.shape} and {raw.shape}.")
        if not (np.all(np.isfinite(raw)) and np.all(raw >= 0.0)):
            raise ValueError(
                "priorities must be finite and non-negative (pass |td error|); got "
                f"{raw[~(np.isfinite(raw) & (raw >= 0.0))][0]}."
            )
        if idx.size == 0:
            return
        stored = (raw + self._epsilon) ** self._alpha
        self._sum_tree.update(idx, stored)
        self._min_tree.update(idx, stored)
        # Read back rather than use ``stored.max()``: a repeated index keeps only its last value.
        self._max_priority = max(self._max_priority, float(self._sum_tree[idx].max()))

    # ------------------------------------------------------------------ state

    def _state_keys(self) -> set[str]:
        return super()._state_keys() | {"priorities", "max_priority", "alpha", "sample_calls"}

    def state_dict(self) -> dict[str, np.ndarray]:
        """Return ``ReplayMemory.state_dict`` plus the stored priorities and schedule counters.

        Adds "priorities" (float64, one per stored record), "max_priority", "alpha" and
        "sample_calls" (0-d arrays).
        """
        state = super().state_dict()
        state["priorities"] = self._sum_tree[np.arange(len(self))]
        state["max_priority"] = np.array(self._max_priority, dtype=np.float64)
        state["alpha"] = np.array(self._alpha, dtype=np.float64)
        state["sample_calls"] = np.array(self._sample_calls, dtype=np.int64)
        return state

    def _parse_state(self, d: Mapping[str, Any]) -> dict[str, Any]:
        state = super()._parse_state(d)
        alpha = state_scalar(d, "alpha", "f")
        if alpha != self._alpha:
            raise ValueError(
                f"state dict was saved with alpha={alpha}, but this memory has "
                f"alpha={self._alpha}; stored priorities depend on alpha, so it must match."
            )
        max_priority = state_scalar(d, "max_priority", "f")
        sample_calls = state_scalar(d, "sample_calls", "iu")
        priorities = np.asarray(d["priorities"])
        if priorities.shape != (state["size"],) or priorities.dtype.kind != "f":
            raise ValueError(
                f"state_dict['priorities'] must be a float array of shape ({state['size']},), got "
                f"shape {priorities.shape} and dtype {priorities.dtype}."
            )
        if not (np.all(np.isfinite(priorities)) and np.all(priorities > 0.0)):
            raise ValueError("state_dict['priorities'] must be finite and positive.")
        if not (np.isfinite(max_priority) and max_priority > 0.0) or sample_calls < 0:
            raise ValueError(
                f"state dict has invalid max_priority={max_priority} (must be finite and > 0) or "
                f"sample_calls={sample_calls} (must be >= 0)."
            )
        state.update(priorities=priorities, max_priority=max_priority, sample_calls=sample_calls)
        return state

    def _restore_state(self, state: dict[str, Any]) -> None:
        super()._restore_state(state)
        self._sum_tree = SumSegmentTree(self.capacity)
        self._min_tree = MinSegmentTree(self.capacity)
        slots = np.arange(state["size"])
        self._sum_tree.update(slots, state["priorities"])
        self._min_tree.update(slots, state["priorities"])
        self._max_priority = float(state["max_priority"])
        self._sample_calls = int(state["sample_calls"])
