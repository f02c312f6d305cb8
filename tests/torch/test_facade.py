"""The Python facade (``rlgraph_core.make`` / ``load``) on the torch backend: learn, predict,
evaluate, save/load, callbacks from Python and from the config, env instances and factories, the
shared training path's folder refusal, and a learning threshold on a custom env.

Budgets are a few hundred env steps (evaluation of 1-2 episodes) except the learning test.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import rlgraph_core as rl
from rlgraph_core.errors import ConfigError
from rlgraph_core.execution.run_dir import RunDirError, read_metrics
from rlgraph_core.plugins import get_plugin_manager

if "torch" not in get_plugin_manager().names("backends"):
    pytest.skip("the torch backend (rlgraph-torch) is not installed", allow_module_level=True)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "custom_env"
#: a small, quick PPO: 2 envs x 32 steps per rollout, evaluation every 128 steps on one episode
PPO_FAST = dict(num_envs=2, n_steps=32, batch_size=32, n_epochs=1, eval_interval=128, eval_episodes=1)


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run in an empty folder, to see that nothing is written there."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_learn_twice_carries_counters_predict_evaluate_and_writes_nothing(in_tmp):
    algo = rl.make("ppo", env="CartPole-v1", backend="torch", **PPO_FAST)
    assert algo.timesteps == 0 and algo.config.agent.type == "ppo" and algo.config.env.num_envs == 2
    assert algo.learn(128) is algo
    assert algo.timesteps == 128 and algo.last_summary["ended_by"] == "total_timesteps"
    first_updates, first_wall = algo.updates, algo.last_summary["wall_time"]
    assert first_updates > 0 and algo.last_summary["checkpoint"] is None
    algo.learn(128)
    assert algo.timesteps == 256 and algo.updates > first_updates
    assert algo.last_summary["wall_time"] > first_wall  # carried over, like the counters
    obs, _ = gym.make("CartPole-v1").reset(seed=0)
    single = algo.predict(obs)
    batch = algo.predict(np.stack([obs, obs, obs]))
    assert np.shape(single) == () and batch.shape == (3,) and int(batch[0]) == int(single)
    assert algo.action_space.contains(single)
    ev = algo.evaluate(episodes=2)
    assert ev["eval_episodes"] == 2 and ev["eval_return_mean"] >= 1
    assert list(in_tmp.iterdir()) == []  # no output folder given: nothing written


def test_save_load_round_trip_gives_the_same_policy_and_trains_on(in_tmp):
    algo = rl.make("ppo", env="CartPole-v1", **PPO_FAST)
    algo.learn(64)
    algo.save(in_tmp / "ckpt")
    again = rl.load(in_tmp / "ckpt")
    assert again.timesteps == algo.timesteps == 64 and again.config == algo.config
    obs = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
    np.testing.assert_array_equal(again.predict(obs), algo.predict(obs))
    again.learn(64)
    assert again.timesteps == 128


def test_a_python_callback_stops_the_run_and_sees_every_event(in_tmp):
    seen = []

    class StopAfter(rl.Callback):
        def on_training_start(self, run):
            seen.append("start")

        def on_update(self, run):
            seen.append("update")

        def on_evaluation(self, run, result):
            seen.append("evaluation")

        def on_step(self, run):
            return run.timesteps < 160

        def on_training_end(self, run, summary):
            seen.append(summary["ended_by"])

    algo = rl.make("ppo", env="CartPole-v1", **PPO_FAST)
    algo.learn(10_000, callbacks=StopAfter())
    assert algo.last_summary["ended_by"] == "callback" and algo.last_summary["stopped_by"] == "StopAfter"
    assert algo.timesteps == 160
    assert seen[0] == "start" and seen[-1] == "callback" and {"update", "evaluation"} <= set(seen)


def test_config_callbacks_stop_on_threshold_and_are_validated(in_tmp):
    algo = rl.make(
        "ppo", env="CartPole-v1", callbacks=[{"type": "stop_on_reward_threshold", "threshold": 1.0}], **PPO_FAST
    )
    algo.learn(10_000)
    assert algo.last_summary["ended_by"] == "callback" and algo.timesteps == 128  # the first evaluation
    assert algo.last_summary["stopped_by"] == "StopOnRewardThreshold"
    with pytest.raises(ConfigError, match="Unknown callback 'early_stoping'.*early_stopping"):
        rl.make("ppo", callbacks=[{"type": "early_stoping"}])
    with pytest.raises(ConfigError, match="train.callbacks.0.patience"):
        rl.make("ppo", callbacks=[{"type": "early_stopping", "patience": 0}])


def test_checkpoint_every_and_early_stopping(in_tmp):
    saver = rl.CheckpointEvery(64, path=in_tmp / "ck")
    stopper = rl.EarlyStopping(patience=1, min_delta=1e9)  # the second evaluation cannot improve by 1e9
    algo = rl.make("ppo", env="CartPole-v1", **PPO_FAST)
    algo.learn(10_000, callbacks=[saver, stopper])
    assert algo.last_summary["stopped_by"] == "EarlyStopping" and algo.timesteps == 256
    assert [p.name for p in saver.written] == ["step-64", "step-128", "step-192", "step-256"]
    assert rl.load(saver.written[1]).timesteps == 128
    with pytest.raises(ConfigError, match="CheckpointEvery has nowhere to write"):
        algo.learn(64, callbacks=rl.CheckpointEvery(10))


def test_learn_into_a_folder_is_refused_like_the_cli(in_tmp):
    out = in_tmp / "run"
    algo = rl.make("ppo", env="CartPole-v1", **PPO_FAST)
    algo.learn(128, out=out)
    assert (out / "checkpoint" / "meta.json").is_file() and (out / "summary.json").is_file()
    algo.learn(128, out=out)  # the same object continues its own run
    steps = [row["timesteps"] for row in read_metrics(out / "metrics.jsonl")]
    assert steps == sorted(steps) and steps[-1] == 256
    with pytest.raises(RunDirError, match="already holds") as refused:  # a notebook re-run: a new object
        rl.make("ppo", env="CartPole-v1", **PPO_FAST).learn(128, out=out)
    # said in the caller's terms: the arguments of learn, not the CLI's flags
    assert "overwrite=True" in str(refused.value) and "out=" in str(refused.value)
    assert "--out" not in str(refused.value) and "--overwrite" not in str(refused.value)
    rl.make("ppo", env="CartPole-v1", **PPO_FAST).learn(128, out=out, overwrite=True)
    assert [row["timesteps"] for row in read_metrics(out / "metrics.jsonl")] == [128]


def test_env_instance_factory_and_custom_class(in_tmp, monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    from my_env import Corridor

    made = []

    def factory():
        made.append(1)
        return Corridor(length=4)

    for env in (Corridor(length=4), factory):
        algo = rl.make("dqn", env=env, num_envs=1, learning_starts=16, eval_interval=64, eval_episodes=1)
        assert algo.config.env.id == "my_env:Corridor" and algo.observation_space.shape == (4,)
        algo.learn(64)
        assert algo.timesteps == 64
    assert len(made) >= 3  # probe, training env, evaluation env
    sys.modules.pop("my_env", None)


def test_make_errors_name_what_is_wrong():
    with pytest.raises(ConfigError, match="Did you mean 'ppo'"):
        rl.make("ppp")
    with pytest.raises(ConfigError, match="agent.n_stepz"):
        rl.make("ppo", n_stepz=3)
    algo_env = object()
    with pytest.raises(ConfigError, match="pass a gymnasium id"):
        rl.make("ppo", env=algo_env)


def test_facade_learns_the_corridor(in_tmp, monkeypatch):
    """Learning test: the optimum is 0.97 (four steps right); judged by env steps (3000)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    algo = rl.make(os.fspath(EXAMPLES / "config.yaml"), total_timesteps=3000)
    algo.learn(3000)
    assert algo.evaluate(episodes=5)["eval_return_mean"] >= 0.95
    sys.modules.pop("my_env", None)


def test_predict_and_save_refuse_bad_input_in_one_paragraph(in_tmp, read_only_dir):
    """Issue 35 §5: predict raised torch's shape error, returned action 0 for NaN, and save() raised OSError."""
    algo = rl.make("ppo", env="CartPole-v1", backend="torch", **PPO_FAST)
    obs, _ = gym.make("CartPole-v1").reset(seed=0)
    assert algo.predict(obs).shape == () and algo.predict(np.stack([obs, obs])).shape == (2,)
    for bad, said in (
        (
            np.zeros(3, np.float32),
            "the observation has shape (3,), but the policy takes (4,) (one observation) or (batch, 4,)",
        ),
        (np.zeros((2, 5)), "has shape (2, 5)"),
        (np.array([0.1, np.nan, 0.0, 0.0]), "holds NaN or infinite values"),
        (np.array([[0.1, 0.0, np.inf, 0.0]]), "holds NaN or infinite values"),
        (["a", "b", "c", "d"], "holds <U1 values (['a', 'b', 'c', 'd']), not numbers"),
    ):
        with pytest.raises(ConfigError) as exc:
            algo.predict(bad)
        assert said in str(exc.value) and "Box(" in str(exc.value) or "NaN" in said, str(exc.value)
    for path, said in (
        ("/proc/rlgraph-checkpoint", "it would be created in '/proc', which is not writable"),
        (read_only_dir / "ckpt", "which is not writable"),
    ):
        with pytest.raises(ConfigError) as exc:
            algo.save(path)
        assert str(exc.value).startswith(f"save(path) '{path}' cannot be used") and said in str(exc.value)

    class NoActionSpace(gym.Env):  # a custom env class that forgot its action space
        observation_space = gym.spaces.Box(-1, 1, (4,), np.float32)

    with pytest.raises(ConfigError, match="the environment defines no action_space.*Set self.action_space"):
        rl.make("ppo", env=NoActionSpace, backend="torch")


class SigtermInEvaluation(gym.Env):
    """Endless episodes; an evaluation episode (reset with a seed >= 10000) sends this process
    SIGTERM at its 20th step and counts the steps it is asked for after that."""

    observation_space = gym.spaces.Box(-1, 1, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)
    steps_after_sigterm = 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.evaluating, self.t = seed is not None and seed >= 10_000, 0
        return np.zeros(4, np.float32), {}

    def step(self, action):
        self.t += 1
        if self.evaluating and self.t == 20:
            import signal

            os.kill(os.getpid(), signal.SIGTERM)
        elif self.evaluating and self.t > 20:
            SigtermInEvaluation.steps_after_sigterm += 1
        return np.zeros(4, np.float32), 1.0, False, self.t >= 100_000, {}


def test_sigterm_during_an_evaluation_stops_at_the_next_step(in_tmp):
    """Issue 35 §4: SIGTERM during an evaluation waited for it to end (13.8 s seen; unbounded)."""
    algo = rl.make("ppo", env=SigtermInEvaluation, backend="torch", **{**PPO_FAST, "eval_episodes": 3})
    algo.learn(10_000, out=in_tmp / "run")
    assert algo.last_summary["ended_by"] == "sigterm" and algo.last_summary["timesteps"] == 128
    assert SigtermInEvaluation.steps_after_sigterm == 0
    assert (in_tmp / "run" / "checkpoint" / "meta.json").is_file() and algo.last_summary["eval_return_mean"] is None
