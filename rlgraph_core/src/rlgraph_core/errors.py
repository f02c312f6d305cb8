"""Exception types raised for user mistakes; each carries a one-paragraph explanation.

:func:`shorten` and :func:`prefix` quote a value in such a paragraph: at most a short prefix of it.
"""

import json
from typing import Any


class RLGraphError(Exception):
    """Base class of every error rlgraph raises for a user mistake (shown without traceback)."""


class ConfigError(RLGraphError, ValueError):
    """A configuration names an unknown part or holds a bad value."""


class PluginError(RLGraphError):
    """A plugin is missing, failed to load, or registers a name another plugin already took."""


class BuildError(RLGraphError):
    """A component graph could not be built: wiring, space or shape mismatch."""


class CheckpointError(RLGraphError):
    """A checkpoint is missing, corrupt, or does not match the agent it is loaded into."""


class EnvDataError(RLGraphError):
    """An environment returned an observation or reward that is not a finite number."""


class NonFiniteError(RLGraphError):
    """A loss, gradient or weight became NaN or infinite; nothing non-finite is applied or saved.

    ``what``: for an update a train step refused, what was non-finite (e.g. ``"the loss is nan"``);
    None where the error comes from elsewhere (a loaded checkpoint, the recorder's loss check).
    """

    def __init__(self, message: str = "", what: str | None = None):
        super().__init__(message)
        self.what = what


class DiskFullError(CheckpointError):
    """A checkpoint could not be written: no space left (or the quota is used up) where it goes."""


def shorten(value: Any, limit: int = 60) -> str:
    """``value`` as JSON (or ``repr``), cut to ``limit`` characters and marked as cut."""
    if isinstance(value, str) and len(value) > 4 * limit:
        value = value[: 4 * limit]  # never serialise a huge string just to cut it
        long = True
    else:
        long = False
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    if len(text) <= limit and not long:
        return text
    return f"{text[:limit]}... (cut)"


def prefix(text: str, limit: int = 300) -> str:
    """``text`` itself, or its first ``limit`` characters marked as cut."""
    return text if len(text) <= limit else f"{text[:limit]}... (cut, {len(text):,} characters)"
