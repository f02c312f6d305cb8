"""A tiny turn-based PettingZoo (AEC) game with vector observations and no mask
(``env.id: pettingzoo:aec_envs``): two players take turns adding 1 or 2 to a count; whoever brings
it to ``target`` or past wins (+1, the other -1). Each observes ``[count / target, own index]``."""

import gymnasium as gym
import numpy as np
from pettingzoo import AECEnv
from pettingzoo.utils import AgentSelector


class CountTo(AECEnv):
    metadata = {"name": "count_to_v0", "is_parallelizable": False}

    def __init__(self, target: int = 5):
        self.possible_agents = ["first", "second"]
        self.target = target
        self._obs = gym.spaces.Box(0, 2, (2,), np.float32)
        self._act = gym.spaces.Discrete(2)

    def observation_space(self, agent):
        return self._obs

    def action_space(self, agent):
        return self._act

    def observe(self, agent):
        return np.array([self.count / self.target, self.possible_agents.index(agent)], np.float32)

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.count = 0
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {a: {} for a in self.agents}
        self._selector = AgentSelector(self.agents)
        self.agent_selection = self._selector.reset()

    def step(self, action):
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self.count += int(action) + 1
        if self.count >= self.target:
            other = [a for a in self.agents if a != agent][0]
            self.rewards[agent], self.rewards[other] = 1.0, -1.0
            self.terminations = dict.fromkeys(self.agents, True)
        self._accumulate_rewards()
        self.agent_selection = self._selector.next()


def env(**kwargs):
    return CountTo(**kwargs)
