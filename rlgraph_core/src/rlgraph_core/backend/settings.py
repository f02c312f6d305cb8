"""Backend settings: what the run config's ``backend:`` section may hold for each backend.

Every backend registered through the ``rlgraph_backends`` hook may come with a settings model
(``{name: (factory, settings_model)}``); a plain factory means "no settings" and gets
:class:`BackendSettings` itself, which has no fields. The run config's ``backend`` section is
validated against the model of the backend ``train.backend`` names, so a backend's compile
options and flags live in its own plugin, never in core, and unknown fields and bad values fail
before anything runs. The backend receives the validated instance as ``settings=`` when it
registered a model.

The neutral knobs every backend has stay in ``train`` (``train.device``, ``train.num_threads``),
so one command line switches backends; the *form* of a device name is checked by the settings
model of the backend that will resolve it (:meth:`BackendSettings.device_problem`), so a new
backend brings its own device names (``tpu``, ``mps`` ...) without a core edit.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from rlgraph_core.registration import entry_problem

__all__ = ["BackendSettings", "backend_entry", "backend_entry_problem"]


class BackendSettings(BaseModel):
    """Base of every backend's settings model (and the settings of backends without any).

    Subclasses add their backend's options as fields with defaults, so that an empty (or missing)
    ``backend:`` section is valid, and may set :attr:`DEVICES` (a regular expression of the
    device names they accept) and :attr:`DEVICE_HINT` (how to write one) so that a bad
    ``train.device`` fails at validation rather than when the backend is built.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    #: The device names (lower-cased, stripped) this backend accepts; None: any, checked when built.
    DEVICES: ClassVar[str | None] = None
    #: The accepted device names in words, for the error message.
    DEVICE_HINT: ClassVar[str] = "auto or cpu"

    @classmethod
    def device_problem(cls, device: str) -> str | None:
        """Why ``device`` is not a device name of this backend (None: its form is fine).

        Whether the device exists on this machine is the backend's check when it is built.
        """
        if cls.DEVICES is None or re.fullmatch(cls.DEVICES, device.strip().lower()):
            return None
        return f"unknown device {device[:40]!r}; use {cls.DEVICE_HINT}"


def backend_entry(obj: Any) -> tuple[Any, type[BackendSettings] | None]:
    """``(factory or LazyObject, settings model or None)`` of one ``rlgraph_backends`` entry.

    A plain factory (the older registration format) has no settings model: ``None``, and it is
    then made without a ``settings=`` argument.
    """
    if isinstance(obj, tuple):
        return obj[0], obj[1]
    return obj, None


def backend_entry_problem(obj: Any) -> str | None:
    """Why an ``rlgraph_backends`` entry does not fit the registration format (None: it fits)."""
    return entry_problem(obj, kind="backend", base=BackendSettings, made_by="factory")
