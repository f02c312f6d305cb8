"""Image environments for the Ray image tests, importable by Ray workers (on their PYTHONPATH).

* :class:`SyntheticPong`: Atari's post-processed shapes (uint8 84x84 frames, a stack of 4, 6
  actions; no ROM needed): a bright square moves across a dark field, and an action whose
  parity matches the square's side pays 1. Episodes last 16 steps.
* :class:`ImageVectorPong`: the same game observed as a Dict of a small uint8 image and a float
  vector (the square's side), for Dict observations through the Ray executors.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

FRAME = (84, 84, 4)


class SyntheticPong(gym.Env):
    """uint8 84x84x4 observations, Discrete(6) actions, 16-step episodes (see the module docstring)."""

    observation_space = gym.spaces.Box(0, 255, FRAME, np.uint8)
    action_space = gym.spaces.Discrete(6)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.pos = 0, int(self.np_random.integers(0, 76))
        return self._obs(), {}

    def _frame(self, shape):
        frame = np.full(shape, 20, np.uint8)
        scale = shape[1] / 84
        lo = int(self.pos * scale)
        frame[int(30 * scale) : int(38 * scale) + 1, lo : lo + max(1, int(8 * scale)), ...] = 236
        return frame

    def _obs(self):
        return self._frame(FRAME)

    def step(self, action):
        reward = float((int(action) % 2) == (self.pos >= 38))
        self.t += 1
        self.pos = (self.pos + 5) % 76
        return self._obs(), reward, False, self.t >= 16, {}


class ImageVectorPong(SyntheticPong):
    """SyntheticPong observed as ``{"image": uint8 16x16x2, "vector": float32 (2,)}``."""

    observation_space = gym.spaces.Dict(
        {
            "image": gym.spaces.Box(0, 255, (16, 16, 2), np.uint8),
            "vector": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
        }
    )

    def _obs(self):
        side = 1.0 if self.pos >= 38 else -1.0
        return {"image": self._frame((16, 16, 2)), "vector": np.array([side, self.t / 16], np.float32)}
