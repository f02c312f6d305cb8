"""One rollout of an on-policy agent, collected the way every executor collects it (tests' helper)."""

from __future__ import annotations

from typing import Any

from rlgraph_core.envs import make_vector_env
from rlgraph_core.execution.env_runner import EnvRunner

__all__ = ["collect_rollout"]


def collect_rollout(algo: Any) -> dict:
    """Step ``algo``'s agent on fresh envs of its config (seed 0, no wrappers) through the
    :class:`~rlgraph_core.execution.env_runner.EnvRunner` until its rollout buffer is full, and
    return ``agent.rollout()`` (the envs are closed afterwards).

    Args:
        algo: an :class:`~rlgraph_core.api.Algorithm` whose agent keeps a rollout buffer (PPO, A2C,
            IMPALA and their recurrent variants).
    """
    agent = algo.agent
    envs = make_vector_env(algo.config.env, 0, wrappers=[])
    try:
        runner = EnvRunner(agent, envs, seed=0)
        while not agent.buffer.full:
            runner.step()
        return agent.rollout()
    finally:
        envs.close()
