"""Static mode's compile cost, said where the user waits for it.

A static-mode backend compiles its train step (or fused update round) when it is first called:
the first update of a process can take tens of seconds (torch static on an Atari CNN: ~40 CPU-s
with a cold compile cache) while the progress bar stands still. :class:`FirstUpdateClock` puts
"compiling at the first update" on the bar until that update is done, then times it, so the
first metrics row (``first_update_s``, shown by the console line), ``summary.json`` and the
closing line say what it cost. A resumed run compiles again: the clock counts the first update of
this process, whatever the agent's update counter was.
"""

from __future__ import annotations

import time

__all__ = ["FirstUpdateClock"]

#: The progress bar's note while the first update of a static-mode run is pending.
PENDING_NOTE = "static mode: the first update compiles"


class FirstUpdateClock:
    """Times the first update of this process in static mode (inactive in eager mode)."""

    def __init__(self, static: bool, updates: int):
        self.active = static
        self._updates = updates
        self._mark = time.perf_counter()
        #: seconds the first update took (compilation included), once it happened
        self.seconds: float | None = None
        #: the value for the next metrics row (handed out once)
        self._unreported: float | None = None

    def show_pending(self, bar) -> None:
        """Put :data:`PENDING_NOTE` on the progress bar ``bar`` (None: no bar)."""
        if self.active and bar is not None:
            bar.set_postfix_str(PENDING_NOTE, refresh=True)

    def before_update(self) -> None:
        """Env steps were counted and an update may follow: the clock starts here."""
        if self.active:
            self._mark = time.perf_counter()

    def after_step(self, updates: int, bar) -> None:
        """After the executor's update call: if this was the first update, take its time."""
        if not self.active or updates == self._updates:
            return
        self.active = False
        self.seconds = self._unreported = time.perf_counter() - self._mark
        if bar is not None:
            bar.set_postfix_str("", refresh=True)

    def row_metrics(self) -> dict:
        """``{"first_update_s": seconds}`` for the first row after the first update, else ``{}``."""
        if self._unreported is None:
            return {}
        seconds, self._unreported = self._unreported, None
        return {"first_update_s": seconds}
