"""A tiny PettingZoo Parallel env for the multi-agent tests (``env.id: pettingzoo:ma_envs``).

Agents ``a_0`` and ``a_1`` start; ``late`` joins at step 2; ``a_1`` dies (terminated) at step 3;
the episode is truncated at step ``length`` (default 6). Each agent observes
``[step, index, alive, 1]`` and is rewarded its action plus ``0.1 * index``.
"""

import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv

AGENTS = ["a_0", "a_1", "late"]


class JoinLeaveEnv(ParallelEnv):
    metadata = {"name": "join_leave_v0"}

    def __init__(self, length: int = 6, bad_reward_at: int | None = None):
        self.possible_agents = list(AGENTS)
        self.length = length
        self.bad_reward_at = bad_reward_at
        self._obs = gym.spaces.Box(-100, 100, (4,), np.float32)
        self._act = gym.spaces.Discrete(2)

    def observation_space(self, agent):
        return self._obs

    def action_space(self, agent):
        return self._act

    def _observe(self, agent):
        return np.array([self.t, AGENTS.index(agent), 1.0, 1.0], np.float32)

    def reset(self, seed=None, options=None):
        self.t = 0
        self.agents = ["a_0", "a_1"]
        return {a: self._observe(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        assert set(actions) == set(self.agents), (sorted(actions), self.agents)
        self.t += 1
        rewards = {a: float(actions[a]) + 0.1 * AGENTS.index(a) for a in self.agents}
        if self.bad_reward_at == self.t:
            rewards["a_0"] = float("nan")
        terms = {a: a == "a_1" and self.t == 3 for a in self.agents}
        truncs = {a: self.t >= self.length for a in self.agents}
        if self.t == 2:
            self.agents.append("late")
        self.agents = [a for a in self.agents if not (terms.get(a) or truncs.get(a))]
        obs = {a: self._observe(a) for a in rewards if a in self.agents or terms.get(a) or truncs.get(a)}
        if "late" in self.agents and "late" not in obs:
            obs["late"] = self._observe("late")
        return obs, rewards, terms, truncs, {a: {} for a in rewards}


def parallel_env(**kwargs):
    return JoinLeaveEnv(**kwargs)
