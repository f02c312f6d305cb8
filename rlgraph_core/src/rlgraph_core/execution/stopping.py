"""How a run ends: stop requests from signals, the reasons a run ends, and their exit codes."""

from __future__ import annotations

import contextlib
import signal
import threading
from types import FrameType
from typing import Iterator

#: Why a run ended, and the exit code ``rlgraph train`` returns for it (128 + signal number
#: for signals, as shells report them).
EXIT_CODES = {
    "total_timesteps": 0,  # the step budget is used up
    "target_return": 0,  # the evaluation reached train.target_return
    "callback": 0,  # a callback returned False (summary["stopped_by"] names it)
    "sigint": 130,  # Ctrl-C
    "sigterm": 143,  # SIGTERM (e.g. a scheduler or `kill`)
    "error": 1,  # the environment, the agent or a plugin raised
}


class RunFailed(Exception):
    """A run ended because the environment, the agent or a plugin raised.

    Raised after the final checkpoint, ``summary.json`` and the plot were written; ``summary``
    holds them (``summary["error"]`` names the exception) and ``__cause__`` is the original error.
    """

    def __init__(self, summary: dict):
        self.summary = summary
        super().__init__(summary.get("error", "the run failed"))

    def __reduce__(self):
        # Copied and pickled with its summary (Ray sends a failed trial's error between processes;
        # the default would call RunFailed(message) and hide the real cause behind an AttributeError).
        return (type(self), (self.summary,))


#: Handlers to restore once a held final phase ends (see :func:`final_phase_held`).
_held: dict[int, object] = {}
#: How many callers hold the final phase beyond the run (e.g. the CLI, until its last line).
_holders = 0


def _ignore(signum: int, frame: FrameType | None) -> None:
    """The final phase's handler: the run is writing what it ends with; nothing may cut it short."""


@contextlib.contextmanager
def final_phase_held() -> Iterator[None]:
    """Keep SIGINT/SIGTERM ignored from a run's final phase until this block ends.

    A run's final phase (closing the loggers, the final checkpoint, ``summary.json``, the plot)
    ignores further signals; inside this block they stay ignored after the run returns, so that
    what the caller writes last (the CLI's "done"/"stopped" line) is written too. The handlers
    from before the run are restored when the block ends.
    """
    global _holders
    _holders += 1
    try:
        yield
    finally:
        _holders -= 1
        if not _holders:
            for signum, handler in _held.items():
                signal.signal(signum, handler)
            _held.clear()


class StopRequest:
    """Turns SIGINT and SIGTERM into a request to stop at the next safe point of the loop.

    Use as a context manager around a training loop and check :attr:`reason` once per step:
    the loop then ends cleanly (final checkpoint, summary, plot). A second Ctrl-C while the
    loop is stopping raises KeyboardInterrupt at once (checkpoint saves are atomic, so that
    loses at most the checkpoint being written). Once the loop has ended, :meth:`hold` starts
    the final phase: every further signal is ignored until everything is written (until the
    block ends, or, inside :func:`final_phase_held`, until that ends). Outside the main thread
    signals cannot be handled and the request only ever comes from :meth:`request`.
    """

    SIGNALS = {signal.SIGINT: "sigint", signal.SIGTERM: "sigterm"}

    def __init__(self) -> None:
        self.reason: str | None = None
        self._previous: dict[int, object] = {}
        self._holding = False

    def hold(self) -> None:
        """Start the final phase: SIGINT and SIGTERM are ignored from now on (see the class)."""
        self._holding = True
        for signum in self._previous:
            signal.signal(signum, _ignore)

    def requested(self) -> bool:
        """Whether a stop was requested (for loops that cannot see :attr:`reason`, e.g. an evaluation)."""
        return self.reason is not None

    def request(self, reason: str) -> None:
        """Ask the loop to stop (the first reason given is kept)."""
        if self.reason is None:
            self.reason = reason

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.reason is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.request(self.SIGNALS[signum])

    def __enter__(self) -> "StopRequest":
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        if self._holding and _holders:
            for signum, handler in self._previous.items():
                _held.setdefault(signum, handler)  # restored when final_phase_held ends
        else:
            for signum, handler in self._previous.items():
                signal.signal(signum, handler)
        self._previous.clear()
