"""Tiny image environments for the storage and wrapper tests (uint8 frames, Dict observations)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

H = W = 6


class FlickerEnv(gym.Env):
    """A fresh random uint8 frame every step; episodes end at random (terminated) or at 9 steps (truncated)."""

    observation_space = gym.spaces.Box(0, 255, (H, W), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def _frame(self):
        return self.np_random.integers(0, 256, (H, W), dtype=np.uint8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._frame(), {}

    def step(self, action):
        self.t += 1
        return self._frame(), 1.0, bool(self.np_random.random() < 0.15), self.t >= 9, {}


class DictFlickerEnv(FlickerEnv):
    """FlickerEnv observed as a Dict of its image and a float vector (the step count)."""

    observation_space = gym.spaces.Dict(
        {"image": FlickerEnv.observation_space, "vector": gym.spaces.Box(0, 9, (1,), np.float32)}
    )

    def reset(self, *, seed=None, options=None):
        frame, info = super().reset(seed=seed)
        return {"image": frame, "vector": np.zeros(1, np.float32)}, info

    def step(self, action):
        frame, *rest = super().step(action)
        return ({"image": frame, "vector": np.array([self.t], np.float32)}, *rest)


class RgbFlickerEnv(FlickerEnv):
    """FlickerEnv with H x W x 3 RGB frames."""

    observation_space = gym.spaces.Box(0, 255, (H, W, 3), np.uint8)

    def _frame(self):
        return self.np_random.integers(0, 256, (H, W, 3), dtype=np.uint8)
