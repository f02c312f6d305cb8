"""A tiny memory task for recurrent policies: recall at the end of an episode a cue shown at its start.

:class:`RecallCue`: step 0 shows one of two cues (``[1, 0, 0]`` or ``[0, 1, 0]``), the next
``delay`` steps show nothing (``[0, 0, 0]``), and the last step asks (``[0, 0, 1]``): action ``k``
there pays 1 if it names the cue shown (``k`` = 0 for the first, 1 for the second), else 0; the
actions before it pay nothing. The episode then terminates (``delay + 2`` steps).

Only a policy that remembers the cue earns more than 0.5 per episode on average: the question
looks the same whichever cue was shown, so a feed-forward policy guesses. A recurrent one can
earn 1. Small enough to learn in a few thousand env steps, for tests, docs and benchmarks.

:class:`RecallCueImage` is the same task seen in pixels: a small uint8 image (``[size, size, 1]``)
with the cue as a bright square in the top-left or top-right corner and the question as a bright
bottom row, for a CNN in front of the recurrent core.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

__all__ = ["RecallCue", "RecallCueImage", "r2d2_recall_settings"]


class RecallCue(gym.Env):
    """Name at the last step the cue shown at the first (module docstring).

    Args:
        delay: blank steps between the cue and the question (>= 0).
    """

    metadata = {"render_modes": []}

    def __init__(self, delay: int = 2):
        if int(delay) < 0:
            raise ValueError(f"delay is the number of blank steps between cue and question, >= 0; got {delay}.")
        self.delay = int(delay)
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(3,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._cue = 0
        self._t = 0

    def _obs(self) -> np.ndarray:
        obs = np.zeros(3, np.float32)
        if self._t == 0:
            obs[self._cue] = 1.0
        elif self._t == self.delay + 1:
            obs[2] = 1.0
        return obs

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        self._cue = int(self.np_random.integers(2))
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        asked = self._t == self.delay + 1
        reward = float(int(action) == self._cue) if asked else 0.0
        self._t += 1
        return self._obs(), reward, asked, False, {}


class RecallCueImage(RecallCue):
    """:class:`RecallCue` in uint8 pixels ``[size, size, 1]`` (module docstring).

    Args:
        delay: blank steps between the cue and the question (>= 0).
        size: the image's height and width (>= 4).
        channel: False gives 2-d frames ``[size, size]`` (as gymnasium's AtariPreprocessing does).
    """

    def __init__(self, delay: int = 2, size: int = 6, channel: bool = True):
        super().__init__(delay)
        if int(size) < 4:
            raise ValueError(f"size is the image's height and width, >= 4; got {size}.")
        self.size = int(size)
        self.channel = bool(channel)
        shape = (self.size, self.size, 1) if self.channel else (self.size, self.size)
        self.observation_space = gym.spaces.Box(0, 255, shape=shape, dtype=np.uint8)

    def _obs(self) -> np.ndarray:
        image = np.zeros((self.size, self.size, 1), np.uint8)
        half = self.size // 2
        if self._t == 0:
            (image[:half, :half] if self._cue == 0 else image[:half, self.size - half :])[:] = 255
        elif self._t == self.delay + 1:
            image[-1] = 255
        return image if self.channel else image[..., 0]


def r2d2_recall_settings() -> dict:
    """The R2D2-style recurrent DQN agent settings that learn :class:`RecallCue` (delay 2) to 1.0 in
    about 1,000 env steps of 8 envs: a 16-unit LSTM straight on the observation, windows of 8
    steps with 2 of burn-in, prioritized sequence replay. One copy for the tests of every backend
    and executor (a fresh dict each call: callers add their exploration or override a key)."""
    return {
        "type": "dqn",
        "network": {"type": "lstm", "units": 16, "encoder": {"hidden": []}, "seq_len": 8},
        "burn_in": 2,
        "batch_size": 16,
        "learning_starts": 200,
        "train_freq": 16,
        "gradient_steps": 2,
        "target_update_interval": 20,
        "gamma": 0.9,
        "memory": {"type": "prioritized_replay", "capacity": 1000, "alpha": 0.9, "beta": 0.6},
        "optimizer": {"learning_rate": 3e-3},
    }
