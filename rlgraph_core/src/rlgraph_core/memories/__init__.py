"""Replay memories: segment trees, uniform and prioritized replay, n-step assembly, and the
on-policy rollout buffer; the memory protocol, settings models, and building a memory by name.

Everything here is plain vectorised numpy, independent of any deep-learning backend.
"""

from rlgraph_core.memories.nstep import NStepAssembler
from rlgraph_core.memories.prioritized_replay import PrioritizedReplay
from rlgraph_core.memories.protocol import Memory, PrioritizedMemory
from rlgraph_core.memories.replay_memory import ReplayMemory
from rlgraph_core.memories.rollout_buffer import RolloutBuffer, iterate_minibatches, minibatch_indices
from rlgraph_core.memories.segment_tree import MinSegmentTree, SumSegmentTree
from rlgraph_core.memories.settings import MemorySettings, PrioritizedReplaySettings, ReplaySettings

__all__ = [
    "Memory",
    "MemorySettings",
    "MinSegmentTree",
    "NStepAssembler",
    "PrioritizedMemory",
    "PrioritizedReplay",
    "PrioritizedReplaySettings",
    "ReplayMemory",
    "ReplaySettings",
    "RolloutBuffer",
    "iterate_minibatches",
    "minibatch_indices",
    "SumSegmentTree",
]
