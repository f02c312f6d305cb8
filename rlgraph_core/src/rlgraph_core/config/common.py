"""The agents' config vocabulary: the strict base model, the optimizer section, component slots and
schedules. The run's own sections (``env``, ``train``) are in :mod:`rlgraph_core.config.sections`."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, field_validator

from rlgraph_core.components.schedules import ScheduleOrFloat, check_schedule_range
from rlgraph_core.components.settings import ComponentSettings, ComponentSpec, Slot

__all__ = [
    "ComponentSettings",
    "ComponentSlot",
    "ComponentSpec",
    "OptimizerConfig",
    "ScheduleOrFloat",
    "Slot",
    "StrictModel",
]


class StrictModel(BaseModel):
    """Base of every config model: unknown fields are errors, assignments are validated, and
    every float field must be finite (NaN and infinity are refused)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class OptimizerConfig(StrictModel):
    """Optimizer: type, learning rate (constant or schedule), gradient-norm clipping."""

    type: Literal["adam", "rmsprop", "sgd"] = "adam"
    learning_rate: ScheduleOrFloat = Field(1e-3, description="float or a schedule")
    max_grad_norm: Optional[float] = Field(10.0, gt=0, description="global gradient-norm clip; null disables")
    eps: float = Field(1e-8, gt=0)
    betas: tuple[float, float] = (0.9, 0.999)
    alpha: float = Field(0.99, gt=0, lt=1, description="RMSprop smoothing")
    momentum: float = Field(0.0, ge=0)

    @field_validator("learning_rate")
    @classmethod
    def _learning_rate_positive(cls, v: ScheduleOrFloat) -> ScheduleOrFloat:
        """A float learning rate is > 0; a schedule may decay to 0 but never goes negative."""
        return check_schedule_range(v, "the learning rate", low=0.0, positive_float=True)

    def backend_spec(self, learning_rate: float) -> dict:
        """The plain dict handed to ``Backend.train_step``."""
        spec = self.model_dump()
        spec["learning_rate"] = float(learning_rate)
        return spec


#: A config field holding an optional swappable component (string shorthand accepted; ``none``
#: empties it): the settings of the component its ``type`` names (see
#: :mod:`rlgraph_core.components.settings`).
ComponentSlot = Annotated[Optional[SerializeAsAny[ComponentSettings]], Slot("component")]
