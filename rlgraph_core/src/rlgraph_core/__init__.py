"""rlgraph core: compose an RL algorithm once, run it on any backend and any executor.

Importing this package imports no deep-learning framework; backends are plugins. The public
API is importable from here (each name is imported on first use, so ``import rlgraph_core``
stays cheap):

* the facade: :func:`make`, :func:`load`, :class:`Algorithm` (:mod:`rlgraph_core.api`);
* callbacks: :class:`Callback`, :class:`EarlyStopping`, :class:`StopOnRewardThreshold`,
  :class:`CheckpointEvery` (:mod:`rlgraph_core.callbacks`);
* agents and their configs: :class:`DQNAgent`/:class:`DQNConfig`, PPO, A2C, SAC, IMPALA, the base
  :class:`Agent` (:mod:`rlgraph_core.agents`);
* configs: :class:`RunConfig`, :func:`validate_config`, :func:`load_config_file`, :func:`shipped_configs`;
* spaces: :func:`from_gym`, :class:`Space`, :class:`FloatBox`, :class:`Discrete`, :class:`Dict` ...
  (:mod:`rlgraph_core.spaces`);
* errors: :class:`RLGraphError`, :class:`ConfigError`; training: :func:`run_training`,
  :func:`get_plugin_manager`, :func:`hookimpl`.
"""

from __future__ import annotations

from rlgraph_core.lazy import lazy_exports

__version__ = "0.1.0"

#: public name -> the module that defines it
_EXPORTS = {
    "make": "rlgraph_core.api",
    "load": "rlgraph_core.api",
    "Algorithm": "rlgraph_core.api",
    "Callback": "rlgraph_core.callbacks",
    "EarlyStopping": "rlgraph_core.callbacks",
    "StopOnRewardThreshold": "rlgraph_core.callbacks",
    "CheckpointEvery": "rlgraph_core.callbacks",
    "Agent": "rlgraph_core.agents",
    "Component": "rlgraph_core.graph.component",
    "DQNAgent": "rlgraph_core.agents",
    "DQNConfig": "rlgraph_core.agents",
    "PPOAgent": "rlgraph_core.agents",
    "PPOConfig": "rlgraph_core.agents",
    "A2CAgent": "rlgraph_core.agents",
    "A2CConfig": "rlgraph_core.agents",
    "SACAgent": "rlgraph_core.agents",
    "SACConfig": "rlgraph_core.agents",
    "ImpalaAgent": "rlgraph_core.agents",
    "ImpalaConfig": "rlgraph_core.agents",
    "RunConfig": "rlgraph_core.config.run",
    "validate_config": "rlgraph_core.config.run",
    "load_config_file": "rlgraph_core.config.run",
    "shipped_configs": "rlgraph_core.config.run",
    "EnvConfig": "rlgraph_core.config.sections",
    "TrainConfig": "rlgraph_core.config.sections",
    "Space": "rlgraph_core.spaces",
    "FloatBox": "rlgraph_core.spaces",
    "IntBox": "rlgraph_core.spaces",
    "BoolBox": "rlgraph_core.spaces",
    "Discrete": "rlgraph_core.spaces",
    "Dict": "rlgraph_core.spaces",
    "Tuple": "rlgraph_core.spaces",
    "from_gym": "rlgraph_core.spaces",
    "to_gym": "rlgraph_core.spaces",
    "RLGraphError": "rlgraph_core.errors",
    "ConfigError": "rlgraph_core.errors",
    "run_training": "rlgraph_core.training",
    "get_plugin_manager": "rlgraph_core.plugins",
    "hookimpl": "rlgraph_core.plugins",
}

__all__ = ["__version__", *_EXPORTS]


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS, __all__)
