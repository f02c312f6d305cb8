"""The built-in agents and their config models: DQN, PPO, A2C, SAC, IMPALA, and the bases
(:class:`Agent`, the off- and on-policy families) a plugin agent builds on.

``from rlgraph_core.agents import PPOAgent, PPOConfig``; each name is imported on first use."""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> the module (below this package) that defines it
_EXPORTS = {
    "Agent": "base",
    "LearnResult": "base",
    "VersionedWeights": "base",
    "DQNAgent": "dqn",
    "DQNConfig": "dqn",
    "PPOAgent": "ppo",
    "PPOConfig": "ppo",
    "A2CAgent": "a2c",
    "A2CConfig": "a2c",
    "SACAgent": "sac",
    "SACConfig": "sac",
    "ImpalaAgent": "impala",
    "ImpalaConfig": "impala",
    "OffPolicyAgent": "off_policy",
    "OffPolicyConfig": "off_policy",
    "OnPolicyAgent": "on_policy",
    "OnPolicyConfig": "on_policy",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562), so importing one module of this
    package does not import all of them."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
