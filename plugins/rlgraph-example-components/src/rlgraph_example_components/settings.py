"""The settings models of this package: what a config may hold for each of its names.

``fifo_replay`` (``agent.memory``), ``layer_norm_mlp`` (a network slot) and ``boltzmann`` (DQN's
exploration slot). Kept apart from the classes so that registering and validating never import
them.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from rlgraph_core.components.network import ACTIVATIONS, check_activation
from rlgraph_core.components.schedules import ScheduleOrFloat, schedule_values
from rlgraph_core.components.settings import ExplorationSettings, NetworkSettings
from rlgraph_core.memories.settings import MemorySettings

__all__ = ["BoltzmannSettings", "FifoReplaySettings", "LayerNormMLPSettings"]


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


class LayerNormMLPSettings(NetworkSettings):
    """``{type: layer_norm_mlp, hidden: [64, 64], activation: relu, eps: 1e-5, initializer: ...}``.

    The settings of :class:`~rlgraph_example_components.layer_norm_mlp.LayerNormMLP`, for any
    network slot (``agent.network``, SAC's ``actor_network`` / ``critic_network``).
    """

    type: Literal["layer_norm_mlp"] = "layer_norm_mlp"
    hidden: list[int] = Field(default_factory=lambda: [64, 64], description="hidden layer sizes")
    activation: str = Field("relu", description=f"applied after each normalisation; one of {', '.join(ACTIVATIONS)}")
    eps: float = Field(1e-5, gt=0, description="added to the variance inside the layer norm")

    @field_validator("hidden")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if not v or any(h <= 0 for h in v):
            raise ValueError(f"hidden sizes must be a non-empty list of positive integers, got {v}")
        return v

    @field_validator("activation")
    @classmethod
    def _activation(cls, v: str) -> str:
        return check_activation(v)


class BoltzmannSettings(ExplorationSettings):
    """``{type: boltzmann, temperature: <float or schedule>}``: sample actions from softmax(Q / temperature).

    The settings of :class:`~rlgraph_example_components.boltzmann.Boltzmann`, for DQN's
    ``exploration`` slot. Every value the temperature takes must be > 0.
    """

    type: Literal["boltzmann"] = "boltzmann"
    temperature: ScheduleOrFloat = Field(1.0, description="softmax temperature: a float or a schedule over env steps")

    @field_validator("temperature")
    @classmethod
    def _positive(cls, v: ScheduleOrFloat) -> ScheduleOrFloat:
        if min(schedule_values(v)) <= 0:
            raise ValueError(f"the temperature must stay > 0, but it takes the value {min(schedule_values(v)):g}")
        return v
