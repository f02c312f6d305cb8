"""Elastic mode (``executor.elastic: true``): the run survives losing ranks.

Horovod's elastic API keeps a :class:`horovod.common.elastic.State` in host memory and re-runs
the function wrapped by ``hvd.elastic.run`` whenever a collective fails because a peer died
(``HorovodInternalError``): the survivors restore the last commit, shut Horovod down, meet the
launcher again (new ranks and size) and sync the state from the new rank 0 before training on.

:class:`AgentState` is that state for an rlgraph agent: its weights, optimizer/replay state and
counters as numpy arrays plus JSON counters (the same pieces ``state_sync`` broadcasts at the
start, nothing pickled), committed every ``executor.commit_interval`` updates. It also counts
resets and lost ranks for the run's metrics.

Needs Horovod; imported only when elastic mode runs under ``horovodrun``.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import numpy as np
from horovod.common.elastic import State
from horovod.runner.elastic.worker import HostUpdateResult

from rlgraph_horovod.collectives import Collectives
from rlgraph_horovod.state_sync import broadcast_agent


class AgentState(State):
    """The agent's committed state, restored on every rank after a lost peer and synced from rank 0.

    Args:
        coll: the run's collectives (rank and size are read live: they change at a reset).
        agent: the rank's agent.
        seed: this process's seed (its own exploration after each sync, as at the start).
    """

    def __init__(self, coll: Collectives, agent, seed: int):
        self.coll, self.agent, self.seed = coll, agent, seed
        #: resets survived, ranks lost over all of them, commits made, size after the last reset
        self.resets = 0
        self.ranks_lost = 0
        self.commits = 0
        self.ranks_at_start = coll.size
        self._size = coll.size
        self._saved: tuple[dict, dict, dict, Any] | None = None
        super().__init__(bcast_object=self._broadcast_host_update, get_rank=lambda: coll.rank)
        self.save()

    def _broadcast_host_update(self, update: tuple) -> tuple:
        """Rank 0's ``(previous timestamp, last timestamp, HostUpdateResult)`` on every rank.

        Horovod's own ``broadcast_object`` would pickle; three numbers travel as float64.
        """
        prev, last, result = update
        got = self.coll.broadcast(np.array([prev, last, int(result)], np.float64), root=0, name="rlgraph.elastic.hosts")
        return got[0], got[1], HostUpdateResult(int(got[2]))

    def save(self) -> None:
        """Copy the agent's weights, state arrays and counters to host memory (the commit)."""
        arrays, counters = self.agent.get_state()
        weights = self.agent.get_weights()
        self._saved = (
            {k: np.array(v, copy=True) for k, v in arrays.items()},
            copy.deepcopy(counters),
            {k: np.array(v, copy=True) for k, v in weights.items()},
            self.agent.weights_version,
        )
        self.commits += 1

    def restore(self) -> None:
        """Undo everything since the last commit (the survivors' in-flight update is lost)."""
        assert self._saved is not None
        arrays, counters, weights, version = self._saved
        self.agent.set_state({k: v.copy() for k, v in arrays.items()}, copy.deepcopy(counters))
        self.agent.set_weights({k: v.copy() for k, v in weights.items()}, version=version)

    def sync(self) -> None:
        """Rank 0's state on every rank (at the start and after each reset), committed at once: a
        rank lost before the first commit then restores this state, not the pre-``--resume`` one."""
        broadcast_agent(self.coll, self.agent, self.seed)
        self.save()

    def reset(self) -> None:
        """After Horovod re-initialised with the surviving ranks: count the reset and the ranks lost."""
        self.resets += 1
        self.ranks_lost += max(0, self._size - self.coll.size)
        self._size = self.coll.size

    def metrics(self) -> dict:
        """``elastic_resets``, ``ranks_lost``, ``ranks_at_start`` and ``elastic_commits`` for summaries."""
        return {
            "elastic_resets": self.resets,
            "ranks_lost": self.ranks_lost,
            "ranks_at_start": self.ranks_at_start,
            "elastic_commits": self.commits,
        }


def run_elastic(coll: Collectives, state: AgentState, train: Callable[[], None]) -> None:
    """Run ``train()`` under ``hvd.elastic.run`` of the backend's Horovod module.

    ``train`` must start from the agent's (synced) state each time: it is called again after
    every reset.
    """
    coll.elastic_run(lambda _state: train())(state)
