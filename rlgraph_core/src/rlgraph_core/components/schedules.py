"""Parameter schedules (epsilon, learning rate, PER beta): plain Python, evaluated per step.

Every schedule field must be a finite number: NaN and infinity are refused when a config is
validated (``allow_inf_nan=False``), as are values outside what the scheduled parameter allows
(see :func:`check_schedule_range`).
"""

from __future__ import annotations

import math
from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field


class ConstantSchedule(BaseModel):
    """A constant value."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    type: Literal["constant"] = "constant"
    value: float

    def __call__(self, step: int) -> float:
        return self.value


class LinearSchedule(BaseModel):
    """Linear interpolation from ``start`` to ``end`` over ``steps``, then constant ``end``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    type: Literal["linear"] = "linear"
    start: float
    end: float
    steps: int = Field(gt=0)

    def __call__(self, step: int) -> float:
        frac = min(max(step, 0) / self.steps, 1.0)
        return self.start + frac * (self.end - self.start)


class ExponentialSchedule(BaseModel):
    """``max(end, start * decay ** (step / steps))``: exponential decay towards ``end``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    type: Literal["exponential"] = "exponential"
    start: float
    end: float
    decay: float = Field(0.1, gt=0, lt=1)
    steps: int = Field(gt=0)

    def __call__(self, step: int) -> float:
        value = self.start * self.decay ** (max(step, 0) / self.steps)
        return max(self.end, value) if self.start >= self.end else min(self.end, value)


Schedule = Union[ConstantSchedule, LinearSchedule, ExponentialSchedule]
#: A config field holding a float or a schedule of it.
ScheduleOrFloat = Union[float, ConstantSchedule, LinearSchedule, ExponentialSchedule]
SCHEDULE_FIELD = Field(discriminator="type")


def as_schedule(value: "float | Schedule") -> Schedule:
    """A float becomes a constant schedule; schedules pass through."""
    return ConstantSchedule(value=float(value)) if isinstance(value, (int, float)) else value


def schedule_values(value: "float | Schedule") -> tuple[float, ...]:
    """The values a float or a schedule starts from and settles at.

    A constant (or a plain float) gives one value, a linear or exponential schedule its
    ``(start, end)``: every value in between lies between those two, so checking them checks
    every value the schedule can take.
    """
    if isinstance(value, (int, float)):
        return (float(value),)
    if isinstance(value, ConstantSchedule):
        return (value.value,)
    return (value.start, value.end)


def check_schedule_range(
    value: "float | Schedule",
    what: str,
    low: float,
    high: float = math.inf,
    positive_float: bool = False,
) -> "float | Schedule":
    """Raise ValueError unless every value ``value`` can take is finite and lies in ``[low, high]``.

    Args:
        value: a float or a schedule.
        what: the parameter's name in the message (e.g. ``"the learning rate"``).
        low / high: inclusive bounds of every scheduled value.
        positive_float: a plain float or a constant schedule must be > ``low``; a linear or
            exponential schedule may reach ``low`` (e.g. a learning rate decaying to 0) but must
            exceed it somewhere (an exponential one at its start, since it decays from there).

    Returns:
        ``value`` unchanged (for use in pydantic field validators).
    """
    values = schedule_values(value)
    if math.isfinite(high):
        allowed = f"between {low:g} and {high:g}"
    else:
        allowed = f"> {low:g}" if positive_float else f">= {low:g}"
    if len(values) == 1:
        v = values[0]
        if not math.isfinite(v) or not low <= v <= high or (positive_float and v <= low):
            raise ValueError(f"{what} must be a finite number {allowed}, got {v:g}")
        return value
    kind = f"a {value.type} schedule"  # type: ignore[union-attr]
    if not all(math.isfinite(v) and low <= v <= high for v in values):
        bounds = f"in [{low:g}, {high:g}]" if math.isfinite(high) else f">= {low:g}"
        raise ValueError(
            f"every value of {kind} of {what} must be finite and {bounds}, but it goes from "
            f"{values[0]:g} to {values[-1]:g}"
        )
    if positive_float and isinstance(value, ExponentialSchedule) and value.start <= low:
        raise ValueError(
            f"{kind} of {what} must start above {low:g}: it decays from its start, so with "
            f"start={value.start:g} it would never rise above it"
        )
    if positive_float and all(v <= low for v in values):
        raise ValueError(f"{kind} of {what} must rise above {low:g} somewhere; it stays at {values[0]:g}")
    return value
