"""Replay memories: segment trees, uniform and prioritized replay, n-step assembly, and the
on-policy rollout buffer.

Everything here is plain vectorised numpy, independent of any deep-learning backend.
"""

from rlgraph_core.memories.nstep import NStepAssembler
from rlgraph_core.memories.prioritized_replay import PrioritizedReplay
from rlgraph_core.memories.replay_memory import ReplayMemory
from rlgraph_core.memories.rollout_buffer import RolloutBuffer, iterate_minibatches
from rlgraph_core.memories.segment_tree import MinSegmentTree, SumSegmentTree

__all__ = [
    "MinSegmentTree",
    "NStepAssembler",
    "PrioritizedReplay",
    "ReplayMemory",
    "RolloutBuffer",
    "iterate_minibatches",
    "SumSegmentTree",
]
