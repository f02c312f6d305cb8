"""Executor settings: what the run config's ``executor:`` section may hold for each executor.

Every executor registered through the ``rlgraph_executors`` hook may come with a settings model
(``{name: (executor_class, settings_model)}``); a plain executor class means "no settings" and
gets :class:`ExecutorSettings` itself, which has no fields. The run config's ``executor``
section is validated against the model of the executor ``train.executor`` names, so unknown
fields and bad values fail before anything runs, and the executor receives the validated
instance as ``config.executor``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from rlgraph_core.registration import entry_problem

__all__ = [
    "ExecutorSettings",
    "LocalExecutorSettings",
    "executor_entry",
    "executor_entry_problem",
]


class ExecutorSettings(BaseModel):
    """Base of every executor's settings model (and the settings of executors without any).

    Subclasses add their executor's knobs as fields with defaults, so that an empty (or missing)
    ``executor:`` section is valid. Unknown fields, NaN and infinity are errors.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    #: Whether the executor runs a multi-agent agent (a PolicySet over a PettingZoo env's rows);
    #: a PettingZoo config naming an executor without it is refused at validation.
    runs_several_policies: ClassVar[bool] = False


class LocalExecutorSettings(ExecutorSettings):
    """The local executor has no settings of its own (``train`` holds the budget, evaluation ...)."""

    runs_several_policies: ClassVar[bool] = True


def executor_entry(obj: Any) -> tuple[Any, type[ExecutorSettings]]:
    """``(executor class or LazyObject, settings model)`` of one ``rlgraph_executors`` entry.

    A plain class (the older registration format) has no settings: :class:`ExecutorSettings`.
    """
    if isinstance(obj, tuple):
        return obj[0], obj[1]
    return obj, ExecutorSettings


def executor_entry_problem(obj: Any) -> str | None:
    """Why an ``rlgraph_executors`` entry does not fit the registration format (None: it fits)."""
    return entry_problem(obj, kind="executor", base=ExecutorSettings)
