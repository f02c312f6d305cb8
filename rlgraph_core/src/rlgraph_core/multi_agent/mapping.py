"""Which policy acts for which agent: ordered name patterns (``fnmatch``), first match wins."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Mapping, Sequence

from rlgraph_core.errors import ConfigError

__all__ = ["PolicyMapping"]


class PolicyMapping:
    """``{pattern: policy}`` in order; an agent gets the policy of the first pattern its name matches.

    ``agent_*`` matches ``agent_0`` and ``agent_1``; ``*`` matches every agent (one shared policy);
    exact names give independent policies; a few patterns give groups.

    Args:
        patterns: the config's ``multi_agent.policy_mapping`` (insertion order is the match order).
        policies: the policy names the run defines (every pattern must name one of them).
    """

    def __init__(self, patterns: Mapping[str, str], policies: Sequence[str]):
        self.patterns = dict(patterns)
        self.policies = list(policies)
        unknown = {p: name for p, name in self.patterns.items() if name not in self.policies}
        if unknown:
            pattern, name = next(iter(unknown.items()))
            raise ConfigError(
                f"multi_agent.policy_mapping maps '{pattern}' to the policy '{name}', which multi_agent.policies "
                f"does not define (it defines {self.policies}). Map every pattern to one of those, or add "
                f"'{name}' to multi_agent.policies."
            )

    def policy_of(self, agent: str) -> str | None:
        """The policy acting for ``agent``, or None when no pattern matches it."""
        for pattern, policy in self.patterns.items():
            if fnmatchcase(agent, pattern):
                return policy
        return None

    def assign(self, agents: Sequence[str], env_id: str = "?") -> dict[str, str]:
        """``{agent: policy}`` for every one of ``agents`` (the env's ``possible_agents``).

        Raises:
            ConfigError: one paragraph naming the first agent no pattern matches, the patterns,
                and what would map it.
        """
        out: dict[str, str] = {}
        for agent in agents:
            policy = self.policy_of(agent)
            if policy is None:
                raise ConfigError(
                    f"The agent '{agent}' of env '{env_id}' has no policy: no pattern of multi_agent.policy_mapping "
                    f"({list(self.patterns)}) matches its name (the env's agents are {list(agents)[:8]}"
                    f"{' ...' if len(agents) > 8 else ''}). Add a pattern that matches it, e.g. '{agent}: "
                    f"{self.policies[0]}', or '*: {self.policies[0]}' to give every agent one shared policy."
                )
            out[agent] = policy
        unused = [p for p in self.policies if p not in out.values()]
        if unused:
            raise ConfigError(
                f"The policy '{unused[0]}' of multi_agent.policies acts for no agent of env '{env_id}': no agent "
                f"name ({list(agents)[:8]}) is mapped to it by multi_agent.policy_mapping ({self.patterns}). Map "
                f"an agent to it, or remove it from multi_agent.policies."
            )
        return out
