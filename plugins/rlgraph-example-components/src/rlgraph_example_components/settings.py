"""The settings model of ``fifo_replay``: what ``agent.memory`` may hold for it.

Kept apart from the memory class so that registering and validating never import it.
"""

from __future__ import annotations

from typing import Optional

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from rlgraph_core.memories.settings import MemorySettings

__all__ = ["FifoReplaySettings"]


class FifoReplaySettings(MemorySettings):
    """``{type: fifo_replay, capacity: N, window: W}``: FIFO replay sampled among its newest ``W``.

    ``window`` is at least 1 and at most ``capacity``; null (the default) means
    ``max(1, capacity // 10)``.
    """

    type: str = "fifo_replay"
    window: Optional[int] = Field(None, ge=1, description="newest records sampled from; null: capacity // 10")

    @model_validator(mode="after")
    def _window_fits(self) -> "FifoReplaySettings":
        if self.window is not None and self.window > self.capacity:
            raise PydanticCustomError(
                "window_exceeds_capacity",
                "window ({window}) must not exceed capacity ({capacity})",
                {"window": self.window, "capacity": self.capacity},
            )
        return self
