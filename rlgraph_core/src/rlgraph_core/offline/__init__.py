"""Offline RL: training from a fixed dataset instead of env steps.

* :class:`OfflineExecutor` (``train.executor: offline``, settings ``executor: {dataset: PATH}``)
  is an executor whose source of transitions is a Minari dataset
  (:class:`~rlgraph_core.datasets.DatasetSource`) instead of an env runner: updates only,
  periodic evaluation on the env, checkpoints, resume, metrics, loggers, callbacks.
* The agents that learn offline, ``bc`` (:mod:`rlgraph_core.agents.bc`) and ``cql``
  (:mod:`rlgraph_core.agents.cql`), are registered by :mod:`rlgraph_core.offline.plugin`, an
  ordinary plugin of the ``rlgraph`` entry-point group.
"""

from rlgraph_core.offline.executor import OfflineExecutor, OfflineExecutorSettings

__all__ = ["OfflineExecutor", "OfflineExecutorSettings"]
