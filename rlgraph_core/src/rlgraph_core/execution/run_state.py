"""What a run carries across its checkpoints besides the agent: :class:`RunState`.

The run recorder (:mod:`rlgraph_core.execution.recorder`) keeps one for the run it records; it
is stored in every checkpoint's meta (``run_state``) and read back when a run resumes, and the
Python facade keeps one across repeated ``learn`` calls.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RECENT_EPISODES", "RunState"]


#: how many of the latest training episodes a row's ``episode_return_mean`` averages
RECENT_EPISODES = 20


@dataclass
class RunState:
    """What a run carries across checkpoints besides the agent: evaluations and how it ended."""

    best_eval_return: float | None = None
    last_eval_return: float | None = None
    target_reached: bool = False
    #: the run this one resumes already ended by reaching the target: it trains on to its budget
    target_passed: bool = False
    #: seconds of training before this session (carried across resumes)
    wall_time: float = 0.0
    ended_by: str | None = None
    stopped_by: str | None = None
    error: str | None = None
    traceback: str | None = None
    cause: BaseException | None = field(default=None, repr=False)
    #: the returns and lengths of the latest training episodes (up to 20: the rows'
    #: ``episode_return_mean``/``episode_length_mean``), carried across resumes
    recent_returns: deque = field(default_factory=lambda: deque(maxlen=RECENT_EPISODES))
    recent_lengths: deque = field(default_factory=lambda: deque(maxlen=RECENT_EPISODES))
    #: the training envs' episodes in progress where the run stopped, ``(arrays, info)`` of
    #: :func:`~rlgraph_core.execution.env_resume.snapshot` (the facade's next ``learn`` replays them);
    #: stored as the checkpoint attachment ``env_runner``, not in the meta
    env_runner: tuple | None = field(default=None, repr=False)

    def to_json(self, wall_time: float | None = None) -> dict:
        """The JSON stored in every checkpoint's meta (``run_state``); ``wall_time`` is the total so far."""
        return {
            "best_eval_return": self.best_eval_return,
            "last_eval_return": self.last_eval_return,
            "wall_time": self.wall_time if wall_time is None else wall_time,
            "target_passed": self.target_passed,
            "recent_returns": [float(r) for r in self.recent_returns],
            "recent_lengths": [int(n) for n in self.recent_lengths],
        }

    @classmethod
    def from_meta(cls, meta: dict) -> "RunState":
        """The run state a checkpoint's meta recorded (empty for checkpoints without one)."""
        stored = meta.get("run_state") or {}
        return cls(
            best_eval_return=stored.get("best_eval_return"),
            last_eval_return=stored.get("last_eval_return"),
            wall_time=float(stored.get("wall_time") or 0.0),
            target_passed=bool(stored.get("target_passed")) or meta.get("ended_by") == "target_return",
            recent_returns=_recent(stored.get("recent_returns"), float),
            recent_lengths=_recent(stored.get("recent_lengths"), int),
        )


def _recent(values: Any, kind: type) -> deque:
    """A checkpoint's recent episode returns or lengths as a deque; empty unless a list of at most
    :data:`RECENT_EPISODES` finite numbers (display values of the rows: an odd one is dropped, not fatal)."""
    ok = (
        isinstance(values, list)
        and len(values) <= RECENT_EPISODES
        and all(
            isinstance(v, (int, float))
            and not isinstance(v, bool)
            and math.isfinite(v)
            and (kind is float or v == int(v))
            for v in values
        )
    )
    return deque((kind(v) for v in values) if ok else (), maxlen=RECENT_EPISODES)
