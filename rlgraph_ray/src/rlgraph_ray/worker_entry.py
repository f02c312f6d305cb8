"""The application layer of a Ray worker process: validate the run config and assemble its parts.

A worker (or replay shard) actor is a process of its own, so it resolves the config's registry
names itself, once, here, with the process's plugin manager (the driver's
``RLGRAPH_DISABLE_PLUGINS`` is passed on). This is the only module of rlgraph-ray that calls
``get_plugin_manager()``; everything else receives an :class:`~rlgraph_core.assemble.Assembly`.
"""

from __future__ import annotations

import copy
from typing import Any

from rlgraph_core.assemble import Assembly, assemble
from rlgraph_core.config.memory import make_memory
from rlgraph_core.config.run import validate_config
from rlgraph_core.plugins import get_plugin_manager


def worker_assembly(config_dict: dict, *, num_envs: int | None = None, agent_update: dict | None = None) -> Assembly:
    """Validate ``config_dict`` (a run config's ``to_dict()``) and assemble it in this process.

    Args:
        config_dict: the driver's validated run config as a plain dict.
        num_envs: the envs this worker steps (replaces ``env.num_envs`` after validation, so the
            run's checks, e.g. PPO's batch size against the whole round, stay the driver's).
        agent_update: agent fields this worker sets differently (Ape-X: ``exploration``), for every
            policy of a multi-agent run too.
    """
    raw = copy.deepcopy(config_dict)
    raw["agent"].update(agent_update or {})
    # a policy's own change of such a field would win over the agent section's: the worker's wins
    for changes in ((raw.get("multi_agent") or {}).get("policies") or {}).values():
        for key, value in (agent_update or {}).items():
            if changes and key in changes:
                changes[key] = value
    pm = get_plugin_manager()
    config = validate_config(raw, pm)
    if num_envs is not None:
        config.env = config.env.model_copy(update={"num_envs": int(num_envs)})
    return assemble(config, pm)


def shard_memory(memory_settings: dict, seed: int) -> Any:
    """The replay memory ``memory_settings`` (``agent.memory`` as a dict) names, built in this process."""
    return make_memory(get_plugin_manager(), memory_settings, seed=seed)
