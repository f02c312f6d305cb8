"""Registers offline RL with rlgraph: the ``bc``, ``cql``, ``cql_sac`` and ``iql`` agents, their loss components and
the ``offline`` executor (entry point ``offline`` of the ``rlgraph`` group, like any plugin)."""

from rlgraph_core.agents.bc import BCAgent, BCConfig
from rlgraph_core.agents.cql import CQLAgent, CQLConfig
from rlgraph_core.agents.cql_sac import CQLSACAgent, CQLSACConfig
from rlgraph_core.agents.iql import IQLAgent, IQLConfig
from rlgraph_core.components.offline_losses import (
    AdvantageWeightedLoss,
    BCLoss,
    ContinuousCQLRegularizer,
    CQLRegularizer,
    ExpectileLoss,
)
from rlgraph_core.offline.executor import OfflineExecutor, OfflineExecutorSettings
from rlgraph_core.plugins import hookimpl


@hookimpl
def rlgraph_agents():
    """Behaviour cloning, discrete CQL (on DQN), continuous CQL (on SAC) and IQL, with their config models."""

    return {
        "bc": (BCAgent, BCConfig),
        "cql": (CQLAgent, CQLConfig),
        "cql_sac": (CQLSACAgent, CQLSACConfig),
        "iql": (IQLAgent, IQLConfig),
    }


@hookimpl
def rlgraph_components():
    """The behaviour-cloning loss, the CQL regularisers (discrete, continuous) and IQL's losses."""

    return {
        "bc_loss": BCLoss,
        "cql_regularizer": CQLRegularizer,
        "continuous_cql_regularizer": ContinuousCQLRegularizer,
        "expectile_loss": ExpectileLoss,
        "advantage_weighted_loss": AdvantageWeightedLoss,
    }


@hookimpl
def rlgraph_executors():
    """The executor that learns from a Minari dataset."""

    return {"offline": (OfflineExecutor, OfflineExecutorSettings)}
