"""The backend-neutral component library: networks, heads, losses, exploration, GAE, V-trace,
schedules, preprocessors, and the settings bases (:class:`NetworkSettings`,
:class:`ExplorationSettings`) a plugin component registers its config section with.

``from rlgraph_core.components import MLP, ScheduleOrFloat``; each name is imported on first use."""

from __future__ import annotations

from rlgraph_core.lazy import lazy_exports

#: public name -> the module (below this package) that defines it
_EXPORTS = {
    "ActorCritic": "actor_critic",
    "RunningObsNormalizer": "actor_critic",
    "Categorical": "distributions",
    "DiagGaussian": "distributions",
    "SquashedGaussian": "distributions",
    "DQNLoss": "dqn_loss",
    "Exploration": "exploration",
    "EpsilonGreedy": "exploration",
    "EpsilonGreedySettings": "exploration",
    "GAE": "gae",
    "NetworkSpec": "network",
    "DenseLayer": "network",
    "MLP": "network",
    "SlotNetwork": "network",
    "A2CLoss": "pg_losses",
    "ImpalaLoss": "pg_losses",
    "PolicyGradientLoss": "pg_losses",
    "BoxNormalizer": "preprocessors",
    "QValueHead": "q_head",
    "QNetwork": "q_head",
    "SACLoss": "sac_loss",
    "ConstantSchedule": "schedules",
    "LinearSchedule": "schedules",
    "ExponentialSchedule": "schedules",
    "ScheduleOrFloat": "schedules",
    "ComponentSettings": "settings",
    "ComponentSpec": "settings",
    "NetworkSettings": "settings",
    "ExplorationSettings": "settings",
    "TargetSync": "target_sync",
    "ContinuousQNetwork": "twin_q",
    "TwinQNetwork": "twin_q",
    "VTrace": "vtrace",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(
    globals(), {name: f"{__name__}.{module}" for name, module in _EXPORTS.items()}, __all__
)
