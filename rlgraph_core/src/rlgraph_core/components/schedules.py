"""Parameter schedules (epsilon, learning rate, PER beta): plain Python, evaluated per step."""

from __future__ import annotations

from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field


class ConstantSchedule(BaseModel):
    """A constant value."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["constant"] = "constant"
    value: float

    def __call__(self, step: int) -> float:
        return self.value


class LinearSchedule(BaseModel):
    """Linear interpolation from ``start`` to ``end`` over ``steps``, then constant ``end``."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["linear"] = "linear"
    start: float
    end: float
    steps: int = Field(gt=0)

    def __call__(self, step: int) -> float:
        frac = min(max(step, 0) / self.steps, 1.0)
        return self.start + frac * (self.end - self.start)


class ExponentialSchedule(BaseModel):
    """``max(end, start * decay ** (step / steps))``: exponential decay towards ``end``."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["exponential"] = "exponential"
    start: float
    end: float
    decay: float = Field(0.1, gt=0, lt=1)
    steps: int = Field(gt=0)

    def __call__(self, step: int) -> float:
        value = self.start * self.decay ** (max(step, 0) / self.steps)
        return max(self.end, value) if self.start >= self.end else min(self.end, value)


Schedule = Union[ConstantSchedule, LinearSchedule, ExponentialSchedule]
SCHEDULE_FIELD = Field(discriminator="type")


def as_schedule(value: "float | Schedule") -> Schedule:
    """A float becomes a constant schedule; schedules pass through."""
    return ConstantSchedule(value=float(value)) if isinstance(value, (int, float)) else value
