"""The memory contract: what an agent needs from a replay memory, built-in or from a plugin."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = ["Memory", "PrioritizedMemory"]


@runtime_checkable
class Memory(Protocol):
    """A replay memory as agents, executors and checkpoints use it.

    **Registration.** A plugin's ``rlgraph_memories()`` hook returns
    ``{name: (memory_class, settings_model)}``; ``settings_model`` subclasses
    :class:`rlgraph_core.memories.settings.MemorySettings` and ``memory_class`` may be a
    :class:`~rlgraph_core.plugins.LazyObject` so that listing and validating never import it.

    **Construction.** ``memory_class(**settings.model_dump(exclude={"type"}), seed=seed)``:
    every settings field but ``type`` is a keyword argument (``capacity`` always), and ``seed``
    (an int, or None for fresh entropy) seeds the memory's sampling generator.
    :func:`rlgraph_core.config.memory.make_memory` does exactly this.

    **Behaviour.**

    * ``prioritized`` (bool): False for uniform memories. True means the memory implements
      :class:`PrioritizedMemory` as well: ``sample`` returns ``"weights"`` and the agent feeds
      new priorities back through ``update_priorities``.
    * ``len(memory)``: the number of records stored.
    * ``insert(batch)``: ``batch`` maps field names (``"obs"``, ``"actions"`` ...) to arrays
      with a leading batch dimension, all equally long; the first insert fixes fields, per-record
      shapes and dtypes. The names ``"indices"`` and ``"weights"`` are reserved. Built-in
      memories return the int64 slots written; callers must not rely on a return value.
    * ``sample(batch_size)``: one array per field, plus ``"indices"`` (int64, the slots drawn,
      as passed back to ``update_priorities``) and, for prioritized memories, ``"weights"``
      (float32 importance weights). Raises RuntimeError when the memory is empty.
    * ``state_dict()``: the whole state as numpy arrays only (saved with ``np.savez``, no
      pickling), so that a restored memory continues identically (contents, counters, generator).
    * ``load_state_dict(state)``: the inverse; accepts an ``np.load`` result too. It checks
      everything before changing anything and raises ValueError on a mismatch.
    """

    prioritized: bool

    def __len__(self) -> int: ...

    def insert(self, batch: Mapping[str, np.ndarray]) -> Any: ...

    def sample(self, batch_size: int) -> dict[str, np.ndarray]: ...

    def state_dict(self) -> dict[str, np.ndarray]: ...

    def load_state_dict(self, state: Mapping[str, np.ndarray]) -> None: ...


@runtime_checkable
class PrioritizedMemory(Memory, Protocol):
    """A :class:`Memory` with ``prioritized = True``: samples by priority and takes updates.

    ``update_priorities(indices, priorities)``: ``indices`` are slots returned in a sample's
    ``"indices"``; ``priorities`` (same 1-d shape, finite, >= 0) are the new |TD errors| of those
    records. The memory decides how they become sampling priorities (the built-in
    :class:`~rlgraph_core.memories.PrioritizedReplay` stores ``(|td| + epsilon) ** alpha``).
    """

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None: ...
