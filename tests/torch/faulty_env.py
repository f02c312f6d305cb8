"""A CartPole whose ``step`` raises after a number of steps: the env error of the run-safety tests.

Importing this module registers ``FaultyCartPole-v0`` with gymnasium (``fail_after`` steps, 600
by default, counted over the life of the env object).
"""

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class FaultyCartPole(CartPoleEnv):
    """CartPole that raises ``RuntimeError`` on step number ``fail_after``."""

    def __init__(self, fail_after: int = 600, **kwargs):
        super().__init__(**kwargs)
        self.fail_after = fail_after
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.steps >= self.fail_after:
            raise RuntimeError(f"simulated simulator crash at step {self.steps}")
        return super().step(action)


if "FaultyCartPole-v0" not in gym.registry:
    gym.register("FaultyCartPole-v0", entry_point=FaultyCartPole, max_episode_steps=500)
