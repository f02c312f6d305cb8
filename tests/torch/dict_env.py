"""A Dict-observation environment (uint8 image + float vector) for the Dict smoke tests."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class ImageVectorEnv(gym.Env):
    """Observes ``{"image": uint8 8x8x3, "vector": float32 (3,)}``; action 1 pays when vector[0] > 0.

    Episodes last 20 steps. The image is a random frame with a bright row where vector[0] > 0, so
    either key tells the right action.
    """

    observation_space = gym.spaces.Dict(
        {
            "image": gym.spaces.Box(0, 255, (8, 8, 3), np.uint8),
            "vector": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
        }
    )
    action_space = gym.spaces.Discrete(2)

    def _obs(self):
        self.vec = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        image = self.np_random.integers(0, 64, (8, 8, 3), dtype=np.uint8)
        if self.vec[0] > 0:
            image[0] = 255
        return {"image": image, "vector": self.vec}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        reward = 1.0 if (int(action) == 1) == bool(self.vec[0] > 0) else 0.0
        self.t += 1
        return self._obs(), reward, False, self.t >= 20, {}
