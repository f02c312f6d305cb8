"""Callbacks: user code that takes part in a training run and may stop it.

A callback is any object with some of the methods of :class:`Callback` (subclassing it is the
easy way: every method is optional and does nothing). The run calls them in this order::

    on_training_start(run)                 once, before the first env step
    on_step(run)                           after every batch of env steps (a vector-env step
                                           locally, a worker's rollout in a distributed run)
    on_update(run)                         after a step during which the learner updated
    on_evaluation(run, result)             after each periodic greedy evaluation
    on_checkpoint(run, path)               after each checkpoint written during the run
    on_training_end(run, summary)          once, however the run ended

Any of ``on_step``, ``on_update``, ``on_evaluation`` and ``on_checkpoint`` may return ``False``
to stop the run at the next safe point: the run then ends like one that used its budget (final
checkpoint and summary where an output folder is given), with ``ended_by: callback`` and
``stopped_by`` naming the callback. ``None`` (no return) and ``True`` carry on.

``run`` is the run's :class:`~rlgraph_core.execution.recorder.RunRecorder`; callbacks read
``run.timesteps``, ``run.updates``, ``run.agent``, ``run.config``, ``run.out_dir`` (None when the
run writes nothing), ``run.last_eval_return``, ``run.best_eval_return`` and ``run.last_row`` (the
latest metrics row), and may call ``run.save_checkpoint(path)``.

Callbacks come from Python (``algo.learn(..., callbacks=[...])``) or from the config
(``train.callbacks: [{type: early_stopping, patience: 5}]``): the ``type`` is a name registered
through the ``rlgraph_callbacks`` plugin hook (``{name: callback_class}`` or ``{name:
(callback_class, settings_model)}``), so a plugin publishes callbacks as it publishes loggers.
The other keys are the class's keyword arguments, checked before the run starts.

The pluggy lifecycle hooks (``rlgraph_on_train_start``, ``rlgraph_on_iteration``,
``rlgraph_on_train_end``) keep working for plugins; callbacks are the per-run, per-object
counterpart that can also stop a run.
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rlgraph_core.errors import ConfigError, PluginError

__all__ = [
    "Callback",
    "CallbackSettings",
    "CheckpointEvery",
    "EarlyStopping",
    "StopOnRewardThreshold",
    "callback_entry",
    "callback_entry_problem",
    "callback_name",
    "make_callbacks",
    "validate_callbacks",
]


class Callback:
    """Base class of callbacks: override the methods you need; return False from one to stop.

    See the module docstring for when each method is called and what ``run`` offers.
    """

    def on_training_start(self, run) -> None:
        """The run is about to take its first env step (``run.timesteps`` may be > 0 on resume)."""

    def on_step(self, run) -> bool | None:
        """A batch of env steps was taken (``run.timesteps`` counts them); False stops the run."""

    def on_update(self, run) -> bool | None:
        """The learner made one or more gradient updates since the last step; False stops the run."""

    def on_evaluation(self, run, result: dict) -> bool | None:
        """A periodic evaluation ended; ``result`` has ``eval_return_mean`` and ``eval_return_std``."""

    def on_checkpoint(self, run, path: Path) -> bool | None:
        """A checkpoint was written to ``path`` during the run."""

    def on_training_end(self, run, summary: dict) -> None:
        """The run ended; ``summary`` is what ``learn``/``rlgraph train`` return (``ended_by`` ...)."""


def callback_name(callback: Any) -> str:
    """A short name for ``callback`` in ``stopped_by`` and messages (its class name)."""
    return type(callback).__name__


class CallbackSettings(BaseModel):
    """Base of a callback's settings model (optional): validates a ``train.callbacks`` entry.

    Fields are the callback class's keyword arguments; ``type`` is added by the registry.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


# --------------------------------------------------------------------------- built-ins
class StopOnRewardThreshold(Callback):
    """Stop once an evaluation's mean return reaches ``threshold`` (``reward_threshold`` in SB3).

    Args:
        threshold: the mean evaluation return that ends the run.
    """

    def __init__(self, threshold: float):
        self.threshold = float(threshold)

    def on_evaluation(self, run, result):
        """Stop when ``result['eval_return_mean'] >= threshold``."""
        return not result["eval_return_mean"] >= self.threshold


class StopOnRewardThresholdSettings(CallbackSettings):
    """Settings of ``stop_on_reward_threshold``."""

    threshold: float


class EarlyStopping(Callback):
    """Stop when ``patience`` evaluations in a row did not beat the best by more than ``min_delta``.

    Args:
        patience: evaluations without improvement tolerated before stopping (>= 1).
        min_delta: how much an evaluation must exceed the best so far to count as improvement.
    """

    def __init__(self, patience: int = 5, min_delta: float = 0.0):
        if patience < 1:
            raise ValueError(f"EarlyStopping: patience must be >= 1, got {patience}")
        self.patience = int(patience)
        self.min_delta = float(min_delta)
        self.best = -math.inf
        self.without_improvement = 0

    def on_evaluation(self, run, result):
        """Count evaluations that do not improve on the best; stop after ``patience`` of them."""
        value = result["eval_return_mean"]
        if value > self.best + self.min_delta:
            self.best = value
            self.without_improvement = 0
            return True
        self.without_improvement += 1
        return self.without_improvement < self.patience


class EarlyStoppingSettings(CallbackSettings):
    """Settings of ``early_stopping``."""

    patience: int = Field(5, ge=1)
    min_delta: float = Field(0.0, ge=0)


class CheckpointEvery(Callback):
    """Write a checkpoint every ``every`` env steps to ``path/step-<timesteps>`` (SB3's CheckpointCallback).

    Args:
        every: env steps between checkpoints.
        path: the folder that holds them; default ``<out>/callback_checkpoints`` (a run without an
            output folder then needs ``path``).
    """

    def __init__(self, every: int, path: str | Path | None = None):
        if every < 1:
            raise ValueError(f"CheckpointEvery: every must be >= 1 env step, got {every}")
        self.every = int(every)
        self.path = None if path is None else Path(path)
        self.written: list[Path] = []
        self._next: int | None = None

    def _folder(self, run) -> Path:
        if self.path is not None:
            return self.path
        if run.out_dir is None:
            raise ConfigError(
                "CheckpointEvery has nowhere to write: the run has no output folder. Pass path=FOLDER to "
                "CheckpointEvery (or 'path' in its train.callbacks entry), or give the run an output folder."
            )
        return Path(run.out_dir) / "callback_checkpoints"

    def on_training_start(self, run):
        """Check the folder and schedule the first checkpoint."""
        self._folder(run)
        self._next = run.timesteps + self.every

    def on_step(self, run):
        """Write a checkpoint when ``every`` more env steps were taken."""
        if self._next is None:
            self.on_training_start(run)
        if run.timesteps >= self._next:
            while self._next <= run.timesteps:
                self._next += self.every
            self.written.append(run.save_checkpoint(self._folder(run) / f"step-{run.timesteps}"))
        return True


class CheckpointEverySettings(CallbackSettings):
    """Settings of ``checkpoint_every``."""

    every: int = Field(..., ge=1)
    path: str | None = None


#: The built-in callbacks with their settings models (registered by :mod:`rlgraph_core.builtins`).
BUILTIN_CALLBACKS = {
    "stop_on_reward_threshold": (StopOnRewardThreshold, StopOnRewardThresholdSettings),
    "early_stopping": (EarlyStopping, EarlyStoppingSettings),
    "checkpoint_every": (CheckpointEvery, CheckpointEverySettings),
}


# --------------------------------------------------------------------------- registry
def callback_entry(obj: Any) -> tuple[Any, type[BaseModel] | None]:
    """``(callback class, settings model or None)`` of one ``rlgraph_callbacks`` entry."""
    if isinstance(obj, tuple):
        return obj[0], obj[1]
    return obj, None


def callback_entry_problem(obj: Any) -> str | None:
    """Why an ``rlgraph_callbacks`` entry does not fit the registration format (None: it fits)."""
    cls, model = callback_entry(obj)
    if isinstance(obj, tuple) and len(obj) != 2:
        return "expected a callback class or a (callback_class, settings_model) tuple"
    if not callable(cls):
        return f"the callback class {cls!r} is not callable"
    if model is not None and not (isinstance(model, type) and issubclass(model, BaseModel)):
        return f"the settings model {model!r} is not a pydantic model"
    return None


def _resolved(cls):
    return cls.resolve() if hasattr(cls, "resolve") else cls


def _entry_kwargs(plugin_manager, entry: Any, index: int) -> tuple[Any, dict]:
    """Validate one ``train.callbacks`` entry; return (callback class or LazyObject, kwargs)."""

    where = f"train.callbacks.{index}"
    if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
        shown = repr(entry)[:60]
        raise ConfigError(
            f"'{where}' = {shown}: each callback entry is a mapping with a 'type' naming a registered callback "
            f"and its settings, e.g. {{type: early_stopping, patience: 5}}."
        )
    try:
        obj = plugin_manager.get("callbacks", entry["type"], field=f"{where}.type")
    except PluginError as exc:
        raise ConfigError(str(exc)) from None
    cls, model = callback_entry(obj)
    kwargs = {k: v for k, v in entry.items() if k != "type"}
    if model is not None:
        try:
            kwargs = model.model_validate(kwargs).model_dump(exclude_unset=False)
        except ValidationError as exc:
            problems = "; ".join(
                f"'{where}.{'.'.join(str(p) for p in e['loc'])}': {e['msg']}" for e in exc.errors(include_url=False)
            )
            raise ConfigError(
                f"Invalid callback '{entry['type']}' in {where}: {problems}. Its settings: "
                f"{', '.join(model.model_fields) or '(none)'}."
            ) from None
    else:
        params = inspect.signature(_resolved(cls)).parameters
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            unknown = sorted(set(kwargs) - set(params))
            if unknown:
                raise ConfigError(
                    f"Invalid callback '{entry['type']}' in {where}: unknown setting(s) {', '.join(unknown)}; "
                    f"it takes {', '.join(params) or 'no settings'}."
                )
    return cls, kwargs


def validate_callbacks(plugin_manager, entries: Iterable[Any]) -> None:
    """Check every ``train.callbacks`` entry names a registered callback with valid settings."""
    for index, entry in enumerate(entries or ()):
        _entry_kwargs(plugin_manager, entry, index)


def make_callbacks(plugin_manager, entries: Iterable[Any]) -> list:
    """Instances of the callbacks ``train.callbacks`` lists, in order."""
    out = []
    for index, entry in enumerate(entries or ()):
        cls, kwargs = _entry_kwargs(plugin_manager, entry, index)
        try:
            out.append(_resolved(cls)(**kwargs))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"Invalid callback '{entry['type']}' in train.callbacks.{index}: {exc}") from None
    return out
