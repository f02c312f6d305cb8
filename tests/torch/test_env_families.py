"""Env families behind the optional extras, through the CLI: MuJoCo (SAC smoke), MiniGrid (errors)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("rlgraph_torch")

from cli_helpers import assert_user_error, run_cli  # noqa: E402


def test_halfcheetah_sac_smoke(tmp_path):
    """The shipped sac_halfcheetah config runs a few hundred steps (updates, evaluation, checkpoint)."""
    pytest.importorskip("mujoco")
    out = tmp_path / "hc"
    code, _, stderr = run_cli(
        "train",
        "sac_halfcheetah",
        "--no-progress",
        "--out",
        str(out),
        "--set",
        "train.total_timesteps=200",
        "--set",
        "agent.learning_starts=100",
        "--set",
        "agent.batch_size=32",
        "--set",
        "agent.memory.capacity=1000",
        "--set",
        "agent.actor_network.hidden=[32]",
        "--set",
        "agent.critic_network.hidden=[32]",
        "--set",
        "train.eval_interval=200",
        "--set",
        "train.eval_episodes=1",
        "--set",
        "env.wrappers=[{type: time_limit, max_episode_steps: 50}]",
    )
    assert code == 0, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["timesteps"] >= 200 and summary["updates"] >= 90, summary
    assert (out / "checkpoint").is_dir()


def test_minigrid_without_the_image_wrapper_is_a_clear_error(tmp_path):
    pytest.importorskip("minigrid")
    code, _, stderr = run_cli(
        "train", "ppo_cartpole", "--no-progress", "--out", str(tmp_path / "o"), "--set", "env.id=MiniGrid-Empty-5x5-v0"
    )
    assert_user_error(code, stderr, "MiniGrid-Empty-5x5-v0", "mission", "env.wrappers: [{type: minigrid_image}]")


@pytest.mark.parametrize(
    ("name", "env_id", "module"),
    [
        ("dqn_acrobot", "Acrobot-v1", None),
        ("dqn_mountaincar", "MountainCar-v0", None),
        ("dqn_lunarlander", "LunarLander-v3", "Box2D"),
    ],
)
def test_zoo_configs_validate_and_build(name, env_id, module):
    """The config zoo's classic-control and Box2D configs validate, build their envs and agent (--dry-run)."""
    if module is not None:
        pytest.importorskip(module, reason='needs the box2d extra: pip install "rlgraph-core[box2d]"')
    code, stdout, stderr = run_cli("train", name, "--dry-run")
    assert code == 0, stderr
    assert env_id in stdout and "dqn" in stdout


def test_atari_evaluation_plays_whole_games_while_training_ends_at_a_lost_life():
    """ppo_atari trains on one life with clipped rewards; its evaluation env plays the whole game
    (all five lives of Breakout) for its unclipped score: a random policy's episode is longer."""
    pytest.importorskip("ale_py")
    pytest.importorskip("cv2")
    import gymnasium as gym
    import numpy as np

    from rlgraph_core.assemble import assemble
    from rlgraph_core.config.run import load_shipped_config, validate_config
    from rlgraph_core.envs import register_env_family
    from rlgraph_core.plugins import get_plugin_manager

    config = validate_config(load_shipped_config("ppo_atari"))
    assembly = assemble(config, get_plugin_manager())
    register_env_family(config.env.id)
    trained_on = gym.make(config.env.id, **config.env.kwargs)
    for wrap in assembly.env_wrappers:
        trained_on = wrap(trained_on)

    def episode(env):
        rng = np.random.default_rng(0)
        env.reset(seed=3)
        steps, done, info = 0, False, {}
        while not done:
            _, _, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
            steps, done = steps + 1, terminated or truncated
        env.close()
        return steps, info["lives"]

    train_steps, train_lives = episode(trained_on)
    eval_steps, eval_lives = episode(assembly.make_eval_env())
    assert train_lives == 4 and eval_lives == 0 and eval_steps > train_steps, (train_steps, eval_steps)
