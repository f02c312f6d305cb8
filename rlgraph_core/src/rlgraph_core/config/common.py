"""Config models shared by agents: optimizer, memory, environment and training settings."""

from __future__ import annotations

from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from rlgraph_core.components.schedules import ConstantSchedule, ExponentialSchedule, LinearSchedule

ScheduleOrFloat = Union[float, ConstantSchedule, LinearSchedule, ExponentialSchedule]


class StrictModel(BaseModel):
    """Base of every config model: unknown fields are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class OptimizerConfig(StrictModel):
    """Optimizer: type, learning rate (constant or schedule), gradient-norm clipping."""

    type: Literal["adam", "rmsprop", "sgd"] = "adam"
    learning_rate: ScheduleOrFloat = Field(1e-3, description="float or a schedule")
    max_grad_norm: Optional[float] = Field(10.0, gt=0, description="global gradient-norm clip; null disables")
    eps: float = Field(1e-8, gt=0)
    betas: tuple[float, float] = (0.9, 0.999)
    alpha: float = Field(0.99, gt=0, lt=1, description="RMSprop smoothing")
    momentum: float = Field(0.0, ge=0)

    def backend_spec(self, learning_rate: float) -> dict:
        """The plain dict handed to ``Backend.train_step``."""
        spec = self.model_dump()
        spec["learning_rate"] = float(learning_rate)
        return spec


class EnvConfig(StrictModel):
    """A gymnasium environment id, how many copies to step at once, and how."""

    id: str = "CartPole-v1"
    num_envs: int = Field(4, gt=0)
    vectorization: Literal["sync", "async"] = "sync"
    kwargs: dict = Field(default_factory=dict, description="passed to gymnasium.make")


class TrainConfig(StrictModel):
    """How a run is executed: backend, mode, executor, budget, evaluation and logging."""

    backend: str = "torch"
    mode: Literal["eager", "static"] = "eager"
    device: str = "auto"
    num_threads: Optional[int] = Field(
        1, gt=0, description="CPU threads of the backend; 1 suits small networks, null keeps the framework default"
    )
    executor: str = "local"
    seed: int = 0
    total_timesteps: int = Field(100_000, gt=0)
    target_return: Optional[float] = Field(None, description="stop once mean eval return reaches it")
    eval_interval: int = Field(5_000, gt=0, description="env steps between evaluations")
    eval_episodes: int = Field(10, gt=0)
    log_interval: int = Field(2_000, gt=0, description="env steps between metric lines")
    checkpoint_interval: Optional[int] = Field(
        None, gt=0, description="env steps between periodic checkpoints; null = every eval_interval"
    )
    keep_checkpoints: int = Field(3, ge=1, description="periodic checkpoints kept (the newest)")
    loggers: list[str] = Field(default_factory=lambda: ["console", "jsonl"])
    progress_bar: bool = True


class ComponentSpec(BaseModel):
    """A swappable component chosen by registry name: ``{type: name, <its settings>...}``.

    A plain string is shorthand for ``{type: name}``; ``none`` (or null) leaves the slot empty.
    The settings are passed to the component's ``from_space`` constructor; the assembly checks
    that ``type`` names a registered component.
    """

    model_config = ConfigDict(extra="allow")
    type: str

    def settings(self) -> dict:
        """The settings beyond ``type``, as keyword arguments."""
        return dict(self.model_extra or {})


def _component_slot(value):
    if value is None or value == "none":
        return None
    if isinstance(value, str):
        return {"type": value}
    return value


#: A config field holding an optional :class:`ComponentSpec` (string shorthand accepted).
ComponentSlot = Annotated[Optional[ComponentSpec], BeforeValidator(_component_slot)]
