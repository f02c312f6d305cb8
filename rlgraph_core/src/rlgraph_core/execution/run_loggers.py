"""The loggers of one run, as one: every metrics row to each, weights to those that want them.

A logger's failure never costs the run or its final checkpoint: one that raises is warned about
once, dropped from the run and closed quietly (:func:`~rlgraph_core.execution.loggers.call_logger`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from rlgraph_core.execution.loggers import call_logger, close_quietly

__all__ = ["RunLoggers"]


class RunLoggers:
    """The run's loggers: the configured ones with an output folder, else those that write no files.

    Args:
        assembly: the run's :class:`~rlgraph_core.assemble.Assembly` (its loggers).
        out_dir: the run's output folder, or None (only the loggers that write no files start).
        histogram_interval: hand the weights over every this many rows (the first included);
            0 or None: never.
    """

    def __init__(self, assembly, out_dir: Path | None, histogram_interval: int | None):
        self.loggers: list = (
            assembly.make_loggers(out_dir)
            if out_dir is not None
            else [cls(None) for cls in assembly.logger_classes if getattr(cls, "writes_files", True) is False]
        )
        self.histogram_interval = histogram_interval
        self._rows_logged = 0

    def log(self, row: dict, weights: Callable[[], dict], timesteps: int) -> None:
        """``row`` to every logger; every ``histogram_interval`` rows, ``weights()`` (called once,
        shared by all of them) to the loggers that want them."""
        self._call(self.loggers, "log", row)
        self._rows_logged += 1
        wanting = [lg for lg in self.loggers if getattr(lg, "wants_weights", False)]
        interval = self.histogram_interval
        if not wanting or not interval or (self._rows_logged - 1) % interval:
            return
        self._call(wanting, "log_weights", weights(), timesteps)

    def close(self) -> None:
        """Close every logger; one that cannot close is warned about (the final artifacts come first)."""
        for lg in self.loggers:
            call_logger(lg, "close")

    def close_quietly(self) -> None:
        """Close every logger without a word (the run did not start)."""
        for lg in self.loggers:
            close_quietly(lg)

    def _call(self, loggers: list, method: str, *args) -> None:
        """``method(*args)`` on each of ``loggers``; one that raises is dropped from the run (closed quietly)."""
        for lg in loggers:
            if not call_logger(lg, method, *args):
                self.loggers = [other for other in self.loggers if other is not lg]
                close_quietly(lg)
