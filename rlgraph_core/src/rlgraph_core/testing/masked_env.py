"""Small environments with legal-action masks, for tests, docs, configs and benchmarks.

:class:`PickLegalMax`: each step shows ``n`` values and a random set of legal actions; picking the
legal action of the largest value pays 1, any other legal one 0, and an illegal one *raises*
:class:`IllegalActionError` (the way a board-game engine refuses a move), so a run that trains
through it never took an illegal action. A uniformly random legal policy earns about a third of
the episode length (with the defaults); one that reads the values and the mask earns all of it.

Both mask conventions: ``mask_in="observation"`` (default) observes PettingZoo classic's
``{"observation", "action_mask"}`` Dict; ``mask_in="method"`` observes the values alone and answers
sb3-contrib's ``action_masks()``. The final observation of an episode has an all-false mask (as a
finished PettingZoo board game does): nothing is legal once it is over.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

__all__ = ["IllegalActionError", "PickLegalMax"]


class IllegalActionError(ValueError):
    """An action the current mask forbids was taken."""


class PickLegalMax(gym.Env):
    """Pick the legal action of the largest value; illegal actions raise.

    Args:
        n: number of actions (and values).
        length: steps per episode (it then terminates).
        p_legal: probability that each action is legal (at least one always is).
        mask_in: ``"observation"`` (a Dict key ``action_mask``) or ``"method"`` (``action_masks()``).
    """

    metadata = {"render_modes": []}

    def __init__(self, n: int = 6, length: int = 16, p_legal: float = 0.5, mask_in: str = "observation"):
        if mask_in not in ("observation", "method"):
            raise ValueError(f"mask_in must be 'observation' or 'method', not {mask_in!r}")
        self.n, self.length, self.p_legal, self.mask_in = int(n), int(length), float(p_legal), mask_in
        values = gym.spaces.Box(0.0, 1.0, (self.n,), np.float32)
        self.action_space = gym.spaces.Discrete(self.n)
        if mask_in == "observation":
            self.observation_space = gym.spaces.Dict(
                {"observation": values, "action_mask": gym.spaces.Box(0, 1, (self.n,), np.int8)}
            )
        else:
            self.observation_space = values
        self._values = np.zeros(self.n, np.float32)
        self._mask = np.zeros(self.n, np.int8)
        self._t = 0

    def _draw(self) -> None:
        self._values = self.np_random.uniform(0.0, 1.0, self.n).astype(np.float32)
        mask = (self.np_random.uniform(size=self.n) < self.p_legal).astype(np.int8)
        mask[self.np_random.integers(self.n)] = 1
        self._mask = mask

    def _obs(self):
        if self.mask_in == "observation":
            return {"observation": self._values.copy(), "action_mask": self._mask.copy()}
        return self._values.copy()

    def action_masks(self) -> np.ndarray:
        """The legal actions now (sb3-contrib's convention): a bool per action."""
        return self._mask.astype(bool)

    def reset(self, *, seed=None, options=None):
        """A new episode."""
        super().reset(seed=seed)
        self._t = 0
        self._draw()
        return self._obs(), {}

    def step(self, action):
        """Raises :class:`IllegalActionError` for an illegal action; else pays 1 for the best legal one."""
        a = int(action)
        if not (0 <= a < self.n) or not self._mask[a]:
            raise IllegalActionError(
                f"action {a} is illegal at step {self._t} (legal: {np.flatnonzero(self._mask).tolist()})"
            )
        legal_values = np.where(self._mask != 0, self._values, -np.inf)
        reward = 1.0 if a == int(np.argmax(legal_values)) else 0.0
        self._t += 1
        terminated = self._t >= self.length
        if terminated:
            self._values = np.zeros(self.n, np.float32)
            self._mask = np.zeros(self.n, np.int8)  # nothing is legal once it is over
        else:
            self._draw()
        return self._obs(), reward, terminated, False, {}
