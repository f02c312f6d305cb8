"""A tiny custom environment for rlgraph: walk right along a corridor to reach the goal.

rlgraph makes it from a config without a wrapper script, in either of two ways:

* ``env: {id: "my_env:Corridor"}``: the class itself (``module:ClassName``); its constructor
  takes ``env.kwargs`` (e.g. ``{length: 8}``);
* ``env: {id: "my_env:Corridor-v0"}``: the id this module registers with gymnasium on import
  (``module:EnvId``), which adds a 50-step time limit.

The module must be importable: run rlgraph from this folder, or add it to PYTHONPATH.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class Corridor(gym.Env):
    """Cells ``0 .. length-1``; start in cell 0, reach the last cell for a reward of 1.

    Actions: 0 steps left, 1 steps right. Each step costs 0.01. Observations are the one-hot
    position (float32). Episodes are truncated after ``max_steps`` steps.
    """

    metadata = {"render_modes": []}

    def __init__(self, length: int = 5, max_steps: int = 50) -> None:
        if length < 2:
            raise ValueError(f"length must be at least 2, got {length}")
        self.length = int(length)
        self.max_steps = int(max_steps)
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(self.length,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._pos = 0
        self._steps = 0

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.length, dtype=np.float32)
        obs[self._pos] = 1.0
        return obs

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start again in cell 0."""
        super().reset(seed=seed)
        self._pos, self._steps = 0, 0
        return self._obs(), {}

    def step(self, action):
        """Move one cell left or right; the episode ends at the last cell."""
        self._pos = int(np.clip(self._pos + (1 if int(action) == 1 else -1), 0, self.length - 1))
        self._steps += 1
        terminated = self._pos == self.length - 1
        reward = 1.0 if terminated else -0.01
        truncated = not terminated and self._steps >= self.max_steps
        return self._obs(), reward, terminated, truncated, {}


gym.register(id="Corridor-v0", entry_point=Corridor, max_episode_steps=50)
