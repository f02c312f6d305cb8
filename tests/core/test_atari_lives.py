"""Atari lives and serves on the real ALE (ale-py ships the ROMs; extra ``atari``): with
``terminal_on_life_loss`` a lost life ends the training episode and the vector env's reset goes on
with the same game (Stable-Baselines3's EpisodicLifeEnv; gymnasium's option of the same name
restarts the game), and Breakout's ball is served (FIRE) at a reset and after each lost life, so a
policy that never fires still ends its games (without it: ALE's 108,000-frame limit)."""

from __future__ import annotations

import numpy as np
import pytest

from rlgraph_core.config.sections import EnvConfig
from rlgraph_core.config.wrappers import resolve_wrappers
from rlgraph_core.envs import make_eval_env, make_vector_env
from rlgraph_core.plugins import PluginManager

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

#: Far more NOOP steps than a served game of Breakout lasts (5 lives of ~25-60 steps each), far
#: fewer than an unserved one (27,000 steps to ALE's frame limit at frame skip 4).
STEP_CAP = 2_000


def _breakout(**preprocessing) -> EnvConfig:
    wrappers = [{"type": "atari_preprocessing", "screen_size": 42, **preprocessing}]
    return EnvConfig.model_validate(
        {"id": "ALE/Breakout-v5", "num_envs": 1, "kwargs": {"frameskip": 1, "repeat_action_probability": 0.0},
         "wrappers": wrappers}
    )  # fmt: skip


def test_a_lost_life_ends_the_training_episode_and_the_same_game_goes_on():
    cfg = _breakout(terminal_on_life_loss=True)
    envs = make_vector_env(cfg, seed=0, wrappers=resolve_wrappers(PluginManager(), cfg.wrappers))
    try:
        _, info = envs.reset(seed=0)
        assert int(info["lives"][0]) == 5
        episodes = []  # (lives at the episode's end, lives and frame number after the reset that follows)
        for _ in range(STEP_CAP):
            # FIRE (1) every step: the lives are lost with or without the serve of the wrapper
            _, _, terminated, truncated, info = envs.step(np.ones(1, np.int64))
            assert not truncated[0]
            if terminated[0]:
                final = info["final_info"]
                episodes.append(
                    (int(final["lives"][0]), int(info["lives"][0]), int(final["episode_frame_number"][0]),
                     int(info["episode_frame_number"][0]))
                )  # fmt: skip
                if final["lives"][0] == 0:
                    break
    finally:
        envs.close()
    # one training episode per life; each reset continues the game where the life was lost
    assert [e[0] for e in episodes] == [4, 3, 2, 1, 0], episodes
    assert [e[1] for e in episodes[:-1]] == [4, 3, 2, 1], episodes
    assert all(after > before for _, _, before, after in episodes[:-1]), episodes
    assert episodes[-1][1] == 5 and episodes[-1][3] < episodes[-1][2]  # the game over starts a new game


def test_breakout_serves_after_reset_and_each_lost_life_so_games_end():
    cfg = _breakout()
    env = make_eval_env(cfg, wrappers=resolve_wrappers(PluginManager(), cfg.wrappers, evaluation=True))
    try:
        _, info = env.reset(seed=0)
        lives, steps, ended = [int(info["lives"])], 0, False
        while not ended and steps < STEP_CAP:
            _, _, terminated, truncated, info = env.step(0)  # NOOP only: the policy never fires
            steps += 1
            ended = terminated or truncated
            lives.append(int(info["lives"]))
    finally:
        env.close()
    assert ended and terminated and not truncated, (steps, lives[-1])
    assert sorted(set(lives), reverse=True) == [5, 4, 3, 2, 1, 0]


def test_fire_on_serve_false_leaves_the_ball_unserved():
    cfg = _breakout(fire_on_serve=False)
    env = make_eval_env(cfg, wrappers=resolve_wrappers(PluginManager(), cfg.wrappers, evaluation=True))
    try:
        env.reset(seed=0)
        infos = [env.step(0)[-1] for _ in range(300)]
    finally:
        env.close()
    assert {int(i["lives"]) for i in infos} == {5}
