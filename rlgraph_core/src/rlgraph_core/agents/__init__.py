"""The built-in agents and their config models: DQN, PPO, A2C, SAC, IMPALA, and the bases
(:class:`Agent`, the off- and on-policy families) a plugin agent builds on.

``from rlgraph_core.agents import PPOAgent, PPOConfig``; each name is imported on first use."""

from __future__ import annotations

from rlgraph_core.lazy import lazy_exports

#: public name -> the module (below this package) that defines it
_EXPORTS = {
    "Agent": "base",
    "LearnResult": "base",
    "VersionedWeights": "base",
    "DQNAgent": "dqn",
    "DQNConfig": "dqn",
    "PPOAgent": "ppo",
    "PPOConfig": "ppo",
    "PPOLoss": "ppo",
    "RecurrentDQNAgent": "recurrent_dqn",
    "RecurrentPPOAgent": "recurrent_ppo",
    "A2CAgent": "a2c",
    "A2CConfig": "a2c",
    "RecurrentA2CAgent": "recurrent_a2c",
    "SACAgent": "sac",
    "SACConfig": "sac",
    "ImpalaAgent": "impala",
    "ImpalaConfig": "impala",
    "RecurrentImpalaAgent": "recurrent_impala",
    "OffPolicyAgent": "off_policy",
    "OffPolicyConfig": "off_policy",
    "OnPolicyAgent": "on_policy",
    "OnPolicyConfig": "on_policy",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(
    globals(), {name: f"{__name__}.{module}" for name, module in _EXPORTS.items()}, __all__
)
