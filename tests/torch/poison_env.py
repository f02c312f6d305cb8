"""A CartPole that returns one bad value (NaN/inf observation, NaN/None/"1.0" reward) from a given step on.

Named in configs as ``poison_env:PoisonCartPole`` (``env.kwargs: {bad: obs_nan, after: 300}``).
"""

import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv


class PoisonCartPole(CartPoleEnv):
    """CartPole whose step number ``after`` (counted over the env's life) and later return ``bad``."""

    def __init__(self, bad: str = "obs_nan", after: int = 300, **kwargs):
        super().__init__(**kwargs)
        self.bad, self.after, self.steps = bad, after, 0

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        self.steps += 1
        if self.steps >= self.after:
            if self.bad == "obs_nan":
                obs = np.array(obs, copy=True)
                obs[2] = np.nan
            elif self.bad == "obs_inf":
                obs = np.array(obs, copy=True)
                obs[3] = np.inf
            else:
                reward = {"reward_nan": float("nan"), "reward_inf": float("inf"), "reward_none": None,
                          "reward_str": "1.0"}[self.bad]  # fmt: skip
        return obs, reward, terminated, truncated, info
