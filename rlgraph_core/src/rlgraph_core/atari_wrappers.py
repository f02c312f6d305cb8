"""Atari life and serve handling that gymnasium does not ship: the ``atari_preprocessing`` wrapper
(:mod:`rlgraph_core.wrappers`) puts these around gymnasium's ``AtariPreprocessing``.

* :class:`EpisodicLife`: a lost life ends the *training* episode while the game goes on, the
  protocol of DQN (Mnih et al. 2015) as OpenAI Baselines and Stable-Baselines3 (``EpisodicLifeEnv``)
  implement it. gymnasium's ``AtariPreprocessing(terminal_on_life_loss=True)`` ends the episode too,
  but the vector env's autoreset then resets the whole game, so the agent would only ever see the
  first life of every game.
* :class:`FireOnServe`: presses FIRE where a game waits for it, at a reset and after a lost life
  (Breakout serves the ball only then). Without it a policy that has not learnt to fire plays
  nothing until ALE's frame limit (108,000 frames, 27,000 steps at frame skip 4). Stable-Baselines3's
  ``FireResetEnv`` presses it at every reset, and through ``EpisodicLifeEnv`` at every life; the
  same here, so evaluation (which plays whole games) serves after each life as RL-Zoo's does.

Both read the lives from ale-py's ``info["lives"]``; the game's end is the wrapped env's own
``terminated`` / ``truncated``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

__all__ = ["EpisodicLife", "FireOnServe", "has_fire_action"]

#: ALE's minimal action sets start with NOOP; gymnasium's AtariPreprocessing relies on it too.
NOOP = 0


def has_fire_action(env: gym.Env) -> bool:
    """Whether the ALE game under ``env`` has a FIRE action (Stable-Baselines3's rule for FireReset)."""
    meanings = getattr(env.unwrapped, "get_action_meanings", None)
    return meanings is not None and "FIRE" in meanings()


class FireOnServe(gym.Wrapper):
    """Steps FIRE after each reset and after each lost life that does not end the game; the FIRE
    step's reward counts to the step that lost the life."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._fire = list(env.unwrapped.get_action_meanings()).index("FIRE")
        self._lives = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        obs, _, terminated, truncated, info = self.env.step(self._fire)
        if terminated or truncated:  # a game over at the serve itself: start once more
            obs, info = self.env.reset(options=options)
        self._lives = int(info.get("lives", 0))
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        lives = int(info.get("lives", 0))
        if lives < self._lives and not (terminated or truncated):
            obs, more, terminated, truncated, info = self.env.step(self._fire)
            reward = float(reward) + float(more)
            lives = int(info.get("lives", 0))
        self._lives = lives
        return obs, reward, terminated, truncated, info


class EpisodicLife(gym.Wrapper):
    """A lost life is ``terminated`` for the agent; the following ``reset()`` continues the same
    game (one NOOP step) unless the game itself ended, or a seed or options ask for a new one."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._lives = 0
        self._game_over = True

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._game_over = bool(terminated or truncated)
        lives = int(info.get("lives", 0))
        # lives > 0: some games show 0 lives for a few frames before the game-over signal
        if 0 < lives < self._lives:
            terminated = True
        self._lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if self._game_over or seed is not None or options is not None:
            obs, info = self.env.reset(seed=seed, options=options)
        else:
            obs, _, terminated, truncated, info = self.env.step(NOOP)
            if terminated or truncated:
                obs, info = self.env.reset()
        self._game_over = False
        self._lives = int(info.get("lives", 0))
        return obs, info
