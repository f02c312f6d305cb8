"""Several agents in one env, several policies in one run (PettingZoo).

* :mod:`~rlgraph_core.multi_agent.pettingzoo_env`: a PettingZoo Parallel env (``env.id:
  pettingzoo:MODULE``) as a gymnasium vector env whose rows are ``(copy, agent)`` pairs, so the
  one env runner steps it unchanged;
* :mod:`~rlgraph_core.multi_agent.turn_based`: a turn-based game (AEC, PettingZoo's classic
  games) as the same rows, each row a game of its own seat against opponents (self-play);
* :mod:`~rlgraph_core.multi_agent.mapping`: which policy acts for which agent (name patterns);
* :class:`rlgraph_core.agents.policy_set.PolicySet` (a floor up): one ordinary agent per policy
  behind the agent API, each acting and learning on its own rows.

See docs/multi_agent.md.
"""

from rlgraph_core.multi_agent.mapping import PolicyMapping
from rlgraph_core.multi_agent.pettingzoo_env import (
    PETTINGZOO_PREFIX,
    PettingZooVectorEnv,
    is_pettingzoo_id,
    game_factory,
    is_turn_based,
    make_pettingzoo_vector_env,
    padded_observation_space,
    pettingzoo_agents,
    pettingzoo_action_spaces,
    pettingzoo_observation_spaces,
    widest_action_space,
)
from rlgraph_core.multi_agent.turn_based import RandomOpponent, TurnBasedVectorEnv, load_scripted_opponent

__all__ = [
    "PETTINGZOO_PREFIX",
    "PettingZooVectorEnv",
    "PolicyMapping",
    "RandomOpponent",
    "TurnBasedVectorEnv",
    "game_factory",
    "is_pettingzoo_id",
    "is_turn_based",
    "load_scripted_opponent",
    "make_pettingzoo_vector_env",
    "padded_observation_space",
    "pettingzoo_agents",
    "pettingzoo_action_spaces",
    "pettingzoo_observation_spaces",
    "widest_action_space",
]
