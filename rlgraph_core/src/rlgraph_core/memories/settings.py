"""Settings models of replay memories: what ``agent.memory`` may hold for each memory type.

Every memory registered through the ``rlgraph_memories`` hook comes with a settings model that
subclasses :class:`MemorySettings`; configs are validated against the model registered for
their ``type``, so unknown fields and bad values fail before anything runs.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MemorySettings", "PrioritizedReplaySettings", "ReplaySettings"]


class MemorySettings(BaseModel):
    """Base of every memory's settings: the registry ``type`` and the ``capacity`` (records).

    Subclasses add their memory's own keyword arguments as fields: the memory is built as
    ``memory_class(**settings.model_dump(exclude={"type"}), seed=seed)``. Unknown fields are
    errors.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    type: str = Field(description="registry name of the memory, e.g. replay")
    capacity: int = Field(100_000, gt=0, description="maximum number of records held")


#: The ``frames`` setting of the built-in replays.
FRAMES_DESCRIPTION = (
    "auto: uint8 observations (images) are stored as shared frames, each distinct frame once (next_obs "
    "and overlapping frame stacks are no copies); off: every field stored as given"
)


class ReplaySettings(MemorySettings):
    """Uniform replay (:class:`rlgraph_core.memories.ReplayMemory`): a capacity and how frames are stored."""

    type: str = "replay"
    frames: Literal["auto", "off"] = Field("auto", description=FRAMES_DESCRIPTION)


class PrioritizedReplaySettings(MemorySettings):
    """Proportional prioritized replay (:class:`rlgraph_core.memories.PrioritizedReplay`)."""

    type: str = "prioritized_replay"
    alpha: float = Field(0.6, ge=0, description="priority exponent; 0 samples uniformly")
    beta: float = Field(0.4, ge=0, le=1, description="initial importance-sampling exponent")
    beta_final: float = Field(1.0, ge=0, le=1, description="importance-sampling exponent after annealing")
    beta_annealing_steps: int = Field(100_000, gt=0, description="sample() calls to anneal beta over")
    frames: Literal["auto", "off"] = Field("auto", description=FRAMES_DESCRIPTION)
