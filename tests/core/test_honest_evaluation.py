"""Evaluation measures the task itself: training-only wrappers stay out of evaluation envs, a run
ends with an evaluation, and the final checkpoint and summary.json agree on the run's wall time."""

from __future__ import annotations

import json
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

from rlgraph_core.assemble import assemble
from rlgraph_core.config.run import apply_overrides, validate_config
from rlgraph_core.config.wrappers import evaluation_wrappers
from rlgraph_core.errors import ConfigError
from rlgraph_core.execution import recorder as recorder_module
from rlgraph_core.execution.recorder import RunRecorder
from rlgraph_core.plugins import get_plugin_manager
from rlgraph_core.wrappers import AtariPreprocessingSettings, ClipRewardSettings, FrameStackSettings

from core_backend import DEFAULT_CONFIG
from test_checkpoint import LinearAgent

STEPS_PER_LIFE, LIVES, POINTS = 3, 3, 5.0


class ScoredLivesEnv(gym.Env):
    """A game of ``LIVES`` lives of ``STEPS_PER_LIFE`` steps, each step scoring ``POINTS`` (> 1, so
    clipping changes the return); ``info["lives"]`` counts down like the ALE's."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {"lives": LIVES}

    def step(self, action):
        self.t += 1
        lives = LIVES - self.t // STEPS_PER_LIFE
        return np.full(2, self.t / 10, np.float32), POINTS, lives == 0, False, {"lives": lives}


def _config(*overrides):
    raw = apply_overrides(
        DEFAULT_CONFIG,
        [
            f"env.id={__name__}:ScoredLivesEnv",
            "env.num_envs=1",
            "env.vectorization=sync",
            "train.loggers=[jsonl]",
            "train.progress_bar=false",
            "train.eval_episodes=2",
            "train.target_return=null",
            *overrides,
        ],
    )
    raw["env"]["wrappers"] = [{"type": "clip_reward", "min_reward": -1.0, "max_reward": 1.0}]
    return validate_config(raw)


def _game_return(env, seed=0) -> tuple[float, int]:
    env.reset(seed=seed)
    total, steps, done = 0.0, 0, False
    while not done:
        _, r, term, trunc, _ = env.step(0)
        total, steps, done = total + float(r), steps + 1, term or trunc
    env.close()
    return total, steps


def test_training_only_wrappers_are_declared_by_their_registry_entry():
    pm = get_plugin_manager()
    clip = pm.get("wrappers", "clip_reward", field="t")[1]
    assert clip.training_only and not pm.get("wrappers", "frame_stack", field="t")[1].training_only
    atari = AtariPreprocessingSettings(terminal_on_life_loss=True, noop_max=7)
    kept = evaluation_wrappers([atari, ClipRewardSettings(), FrameStackSettings(stack_size=2)])
    assert [w.type for w in kept] == ["atari_preprocessing", "frame_stack"]
    assert kept[0].terminal_on_life_loss is False and kept[0].noop_max == 7 and atari.terminal_on_life_loss


def test_the_eval_env_scores_the_game_the_training_env_clips():
    assembly = assemble(_config(), get_plugin_manager())
    trained_on = ScoredLivesEnv()
    for wrap in assembly.env_wrappers:
        trained_on = wrap(trained_on)
    assert _game_return(trained_on) == (LIVES * STEPS_PER_LIFE * 1.0, LIVES * STEPS_PER_LIFE)
    assert _game_return(assembly.make_eval_env()) == (LIVES * STEPS_PER_LIFE * POINTS, LIVES * STEPS_PER_LIFE)


def _recorder(tmp_path, *overrides):
    config = _config(*overrides)
    assembly = assemble(config, get_plugin_manager())
    agent = LinearAgent(*_spaces(), seed=0)
    agent.build_report = SimpleNamespace(build_seconds=0.0)
    return RunRecorder(config, tmp_path / "run", assembly=assembly, agent=agent)


def _spaces():
    from rlgraph_core.spaces import from_gym

    return from_gym(ScoredLivesEnv.observation_space), from_gym(ScoredLivesEnv.action_space)


def _loop(steps):
    def loop(rec, stop):
        while not rec.done(stop):
            rec.step(new_steps=steps)

    return loop


def test_a_run_shorter_than_eval_interval_ends_with_an_evaluation_of_the_game_score(tmp_path):
    rec = _recorder(tmp_path, "train.total_timesteps=40", "train.eval_interval=1000", "train.log_interval=20")
    summary = rec.run(_loop(10))
    assert summary["ended_by"] == "total_timesteps"
    assert summary["eval_return_mean"] == summary["best_eval_return"] == LIVES * STEPS_PER_LIFE * POINTS
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    # the final evaluation at step 40 goes to the summary: a row was logged at 40 already
    assert [r["timesteps"] for r in rows] == [20, 40] and rows[-1]["eval_return_mean"] is None
    rec = _recorder(tmp_path / "b", "train.total_timesteps=40", "train.eval_interval=1000", "train.log_interval=30")
    rec.run(_loop(10))
    rows = [json.loads(line) for line in (tmp_path / "b" / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["timesteps"] for r in rows] == [30, 40] and rows[-1]["eval_return_mean"] == 45.0
    assert (tmp_path / "run" / "checkpoint_best").is_dir()


def test_no_second_evaluation_at_the_step_of_the_last_and_none_when_switched_off(tmp_path):
    rec = _recorder(tmp_path, "train.total_timesteps=40", "train.eval_interval=20", "train.log_interval=1000")
    rec.run(_loop(10))
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["timesteps"] for r in rows] == [20, 40]
    off = _recorder(tmp_path / "off", "train.total_timesteps=40", "train.eval_episodes=0", "train.log_interval=1000")
    assert off.run(_loop(10))["eval_return_mean"] is None
    assert not (tmp_path / "off" / "run" / "checkpoint_best").exists()
    with pytest.raises(ConfigError, match="eval_episodes = 0 switches them off"):
        _config("train.eval_episodes=0", "train.target_return=1")


def test_the_final_checkpoint_and_summary_share_one_wall_time_reading(tmp_path, monkeypatch):
    rec = _recorder(tmp_path, "train.total_timesteps=10", "train.eval_episodes=0")
    clock = iter(np.arange(1000.0, 2000.0, 0.25))
    monkeypatch.setattr(recorder_module.time, "perf_counter", lambda: float(next(clock)))
    summary = rec.run(_loop(10))
    from rlgraph_core.checkpoint import read_meta

    stored = read_meta(tmp_path / "run" / "checkpoint")[0]["run_state"]["wall_time"]
    assert stored == summary["wall_time"] > 0
