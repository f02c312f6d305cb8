"""Array-backed segment trees with batched updates and queries.

The tree over ``capacity`` leaves is padded to ``size``, the next power of two, and stored in one
float64 array of length ``2 * size``: node 1 is the root, node ``k`` has children ``2k`` and
``2k + 1``, and leaf ``i`` lives at ``size + i``. Padding leaves hold the reduction's neutral
element, so they never change a result. Every operation is vectorised over the batch and loops
only over the ``log2(size)`` tree levels.
"""

from __future__ import annotations

import numpy as np

from rlgraph_core.readonly import ReadOnly
from rlgraph_core.memories._checks import as_index_array, check_int

__all__ = ["SumSegmentTree", "MinSegmentTree"]

# Up to this many leaves per update, ancestors are refreshed via one precomputed index matrix;
# beyond it, per-level deduplication is faster (measured with numpy 2.4 on a 2^20-leaf tree).
_DENSE_PROPAGATION_MAX = 512


def _last_write_wins(indices: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the sorted unique indices and, for each, the value of its last occurrence."""
    if indices.size < 2 or np.all(indices[1:] > indices[:-1]):
        return indices, values  # already sorted and unique: the common contiguous-insert case
    # np.unique reports the first occurrence; on the reversed arrays that is the last write.
    unique, first_in_reversed = np.unique(indices[::-1], return_index=True)
    return unique, values[::-1][first_in_reversed]


class _SegmentTree:
    """Shared storage and update logic; subclasses pick the reduction and its neutral element."""

    _neutral: float
    _reduce: np.ufunc

    def __init__(self, capacity: int) -> None:
        self._capacity = check_int("capacity", capacity, minimum=1)
        self._depth = (self._capacity - 1).bit_length()
        self._size = 1 << self._depth
        self._tree = np.full(2 * self._size, self._neutral, dtype=np.float64)
        self._levels = np.arange(1, self._depth + 1, dtype=np.int64)[:, None]

    capacity = ReadOnly[int]("_capacity", "Number of usable leaves (the value passed to the constructor).")

    def _check_values(self, values: np.ndarray) -> None:
        """Raise ValueError if ``values`` cannot be stored; subclasses may tighten this."""
        if not np.all(np.isfinite(values)):
            raise ValueError("values must all be finite; got NaN or infinity.")

    def update(self, indices: np.ndarray, values: np.ndarray) -> None:
        """Set leaf ``indices[k]`` to ``values[k]`` for every k and refresh the affected parents.

        When an index repeats, the value at its last position wins. Both arguments must be 1-d
        (or scalars) of equal length; indices must lie in ``[0, capacity)``.
        """
        idx = as_index_array("indices", indices, self._capacity, "the tree capacity")
        vals = np.atleast_1d(np.asarray(values, dtype=np.float64))
        if vals.shape != idx.shape:
            raise ValueError(f"indices and values must have the same 1-d shape, got {idx.shape} and {vals.shape}.")
        self._check_values(vals)
        if idx.size == 0:
            return
        self._assign_unique(*_last_write_wins(idx, vals))

    def _assign_unique(self, indices: np.ndarray, values: np.ndarray) -> None:
        """Write leaves and refresh their ancestors; indices must be valid and unique, any order.

        Skips argument checks: for callers in this package that produce the indices themselves.
        """
        tree, reduce = self._tree, self._reduce
        nodes = indices + self._size
        tree[nodes] = values
        if self._depth == 0:
            return
        # Parents are always recomputed from both children, so sums never drift.
        if nodes.size <= _DENSE_PROPAGATION_MAX:
            # Few leaves: fewest numpy calls wins. Row l holds every leaf's ancestor l + 1 levels
            # up; a parent shared by several leaves is written repeatedly with the same value.
            parents = nodes >> self._levels
            lefts = parents << 1
            rights = lefts + 1
            for parent, left, right in zip(parents, lefts, rights):
                tree[parent] = reduce(tree[left], tree[right])
            return
        # Many leaves: deduplicate each level so the work shrinks towards the root.
        nodes = np.sort(nodes)
        while nodes[0] > 1:
            nodes = nodes >> 1
            nodes = nodes[np.concatenate(([True], nodes[1:] != nodes[:-1]))]
            tree[nodes] = reduce(tree[2 * nodes], tree[2 * nodes + 1])

    def __getitem__(self, indices: int | np.ndarray) -> float | np.ndarray:
        """Return the leaf value(s): a float for a scalar index, a float64 array otherwise."""
        idx = as_index_array("indices", indices, self._capacity, "the tree capacity")
        leaves = self._tree[idx + self._size]
        return float(leaves[0]) if np.ndim(indices) == 0 else leaves

    def __len__(self) -> int:
        return self._capacity


class SumSegmentTree(_SegmentTree):
    """Segment tree whose nodes hold the sum of their leaves; leaves must be non-negative.

    Supports O(1) ``total()`` and batched prefix-sum search, the two operations proportional
    prioritized sampling needs.
    """

    _neutral = 0.0
    _reduce = np.add

    def _check_values(self, values: np.ndarray) -> None:
        super()._check_values(values)
        if np.any(values < 0):
            raise ValueError(f"SumSegmentTree values must be non-negative; got {values[values < 0][0]}.")

    def total(self) -> float:
        """Return the sum of all leaves."""
        return float(self._tree[1])

    def find_prefixsum_index(self, prefixes: np.ndarray) -> np.ndarray:
        """For each prefix ``p``, return the smallest index ``i`` with ``sum(leaves[:i + 1]) > p``.

        Prefixes must lie in ``[0, total()]``. The result has the shape of ``prefixes`` and dtype
        int64. A prefix at (or rounded onto) the upper end maps to the last non-zero leaf, so the
        returned leaves always hold a positive value.
        """
        p = np.asarray(prefixes, dtype=np.float64)
        shape = p.shape
        p = p.ravel()
        total = self._tree[1]
        if total <= 0.0:
            raise ValueError("find_prefixsum_index needs a positive total, but all leaves are 0.")
        if p.size and not (np.all(np.isfinite(p)) and p.min() >= 0.0 and p.max() <= total):
            raise ValueError(f"prefixes must lie in [0, total] = [0, {total}]; got values from {p.min()} to {p.max()}.")
        found = self._descend(p.copy(), avoid_empty=False)
        # With exact arithmetic the plain descent never ends on an empty leaf; when round-off
        # pushed a prefix past a subtree's sum it does, and those few are redone carefully.
        empty = self._tree[found + self._size] == 0.0
        if np.any(empty):
            found[empty] = self._descend(p[empty], avoid_empty=True)
        return found.reshape(shape)

    def _descend(self, p: np.ndarray, avoid_empty: bool) -> np.ndarray:
        """Walk from the root to the leaf holding each prefix; consumes ``p`` in place.

        With ``avoid_empty`` the walk never enters a right subtree whose sum is 0, so it ends on
        the last non-empty leaf when ``p`` exceeds the remaining mass.
        """
        tree = self._tree
        node = np.ones(p.size, dtype=np.int64)
        for _ in range(self._depth):
            node <<= 1
            left_sum = tree[node]
            go_right = p >= left_sum
            if avoid_empty:
                go_right &= tree[node + 1] > 0.0
            np.subtract(p, left_sum, out=p, where=go_right)
            node += go_right
        return node - self._size


class MinSegmentTree(_SegmentTree):
    """Segment tree whose nodes hold the minimum of their leaves; unset leaves count as +inf."""

    _neutral = np.inf
    _reduce = np.minimum

    def min(self) -> float:
        """Return the smallest leaf value (+inf while no leaf has been set)."""
        return float(self._tree[1])
