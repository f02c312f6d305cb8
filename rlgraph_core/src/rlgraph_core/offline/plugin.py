"""Registers offline RL with rlgraph: the ``bc`` and ``cql`` agents, their loss components and
the ``offline`` executor (entry point ``offline`` of the ``rlgraph`` group, like any plugin)."""

from rlgraph_core.agents.bc import BCAgent, BCConfig
from rlgraph_core.agents.cql import CQLAgent, CQLConfig
from rlgraph_core.components.offline_losses import BCLoss, CQLRegularizer
from rlgraph_core.offline.executor import OfflineExecutor, OfflineExecutorSettings
from rlgraph_core.plugins import hookimpl


@hookimpl
def rlgraph_agents():
    """Behaviour cloning and discrete CQL, with their config models."""

    return {"bc": (BCAgent, BCConfig), "cql": (CQLAgent, CQLConfig)}


@hookimpl
def rlgraph_components():
    """The behaviour-cloning loss and the CQL regulariser."""

    return {"bc_loss": BCLoss, "cql_regularizer": CQLRegularizer}


@hookimpl
def rlgraph_executors():
    """The executor that learns from a Minari dataset."""

    return {"offline": (OfflineExecutor, OfflineExecutorSettings)}
