"""``RankFaultyCartPole-v0``: a CartPole whose ``step`` raises after ``fail_after`` steps, on rank 1 only;
``RankDyingCartPole-v0``: one whose process is killed after ``die_after`` steps, on rank 1 only.

Importing this module registers it with gymnasium; the rank comes from the launcher's
environment, so rank 0's copy of the env never fails.
"""

import os
import signal

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class RankFaultyCartPole(CartPoleEnv):
    """CartPole that raises ``RuntimeError`` on step ``fail_after`` when ``HOROVOD_RANK`` is 1."""

    def __init__(self, fail_after: int = 300, **kwargs):
        super().__init__(**kwargs)
        self.fail_after = fail_after if os.environ.get("HOROVOD_RANK") == "1" else None
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.fail_after is not None and self.steps >= self.fail_after:
            raise RuntimeError(f"simulated simulator crash on rank 1 at step {self.steps}")
        return super().step(action)


if "RankFaultyCartPole-v0" not in gym.registry:
    gym.register("RankFaultyCartPole-v0", entry_point=RankFaultyCartPole, max_episode_steps=500)


class RankDyingCartPole(CartPoleEnv):
    """CartPole whose process is SIGKILLed on step ``die_after`` when ``HOROVOD_RANK`` is ``rank``
    (default 1): a lost rank, with no exception and no cleanup, as when a machine goes away."""

    def __init__(self, die_after: int = 300, rank: int = 1, **kwargs):
        super().__init__(**kwargs)
        self.die_after = die_after if os.environ.get("HOROVOD_RANK") == str(rank) else None
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.die_after is not None and self.steps >= self.die_after:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().step(action)


if "RankDyingCartPole-v0" not in gym.registry:
    gym.register("RankDyingCartPole-v0", entry_point=RankDyingCartPole, max_episode_steps=500)
