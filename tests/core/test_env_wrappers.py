"""env.wrappers: a registry kind with settings models, gymnasium's own wrappers, optional extras."""

from __future__ import annotations

import re
import sys
import types

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import FrameStackObservation

from rlgraph_core import envs as envs_module
from rlgraph_core.config.sections import EnvConfig
from rlgraph_core.config.wrappers import resolve_wrappers, validate_wrappers
from rlgraph_core.envs import make_eval_env, make_vector_env, resolve_env_id
from rlgraph_core.errors import ConfigError
from rlgraph_core.install_hints import extra_install_command
from rlgraph_core.plugins import PluginManager, hookimpl
from rlgraph_core.wrappers import WrapperSettings

from image_envs import DictFlickerEnv, FlickerEnv


def _env(env: dict, pm) -> EnvConfig:
    """The env section as validate_config makes it (its wrappers through ``pm``), without a backend."""
    env = dict(env)
    env["wrappers"] = validate_wrappers(pm, env.get("wrappers"))
    return EnvConfig.model_validate(env)


@pytest.fixture(scope="module")
def pm():
    return PluginManager(load_entry_points=False)


def test_builtin_wrappers_are_registered_with_settings_models(pm):
    names = set(pm.names("wrappers"))
    assert {"atari_preprocessing", "frame_stack", "resize", "grayscale", "minigrid_image", "flatten"} <= names
    env = _env({"id": "CartPole-v1", "wrappers": [{"type": "frame_stack", "stack_size": 3}]}, pm)
    assert env.wrappers[0].stack_size == 3 and env.wrappers[0].channels_last
    # the validated config dumps and loads again (checkpoints store it)
    assert EnvConfig.model_validate(env.model_dump()).wrappers == env.wrappers


@pytest.mark.parametrize(
    "wrappers, expected",
    [
        (
            [{"type": "frame_stak"}],
            ["Unknown wrapper 'frame_stak'", "'env.wrappers.0.type'", "Did you mean 'frame_stack'?"],
        ),
        ([{"type": "frame_stack", "stak_size": 3}], ["'env.wrappers.0.stak_size' is not a known field", "stack_size"]),
        ([{"type": "flatten"}, {"type": "frame_stack", "stack_size": 0}], ["'env.wrappers.1.stack_size' = 0"]),
        ("frame_stack", ["'env.wrappers' = \"frame_stack\"", "ordered list"]),
        ([{"stack_size": 3}], ["'env.wrappers.0'", "'type'", "known wrappers: atari_preprocessing"]),
    ],
)
def test_bad_wrappers_fail_validation_in_one_paragraph(pm, wrappers, expected):
    with pytest.raises(ConfigError) as info:
        _env({"id": "CartPole-v1", "wrappers": wrappers}, pm)
    msg = str(info.value)
    assert "\n" not in msg and all(part in msg for part in expected), msg


def test_frame_stack_is_gymnasiums_stack_with_the_stack_axis_last(pm):
    settings = validate_wrappers(pm, [{"type": "frame_stack", "stack_size": 4}])
    ours = resolve_wrappers(pm, settings)[0](FlickerEnv())
    theirs = FrameStackObservation(FlickerEnv(), 4)
    assert ours.observation_space.shape == (6, 6, 4) and ours.observation_space.dtype == np.uint8
    a, _ = ours.reset(seed=1)
    b, _ = theirs.reset(seed=1)
    for _ in range(6):
        np.testing.assert_array_equal(a, np.moveaxis(b, 0, -1))
        a, *_ = ours.step(0)
        b, *_ = theirs.step(0)


def test_a_plugin_registers_a_wrapper_through_the_hook():
    class ScaleSettings(WrapperSettings):
        type: str = "halve_reward"
        factor: float = 0.5

    def halve(env, s):
        return gym.wrappers.TransformReward(env, lambda r: r * s.factor)

    plugin = types.SimpleNamespace(rlgraph_wrappers=hookimpl(lambda: {"halve_reward": (halve, ScaleSettings)}))
    pm = PluginManager(load_entry_points=False)
    pm.register(plugin, "rlgraph-halve")
    assert pm.names("wrappers")["halve_reward"].distribution == "rlgraph-halve"
    cfg = _env({"id": "CartPole-v1", "wrappers": [{"type": "halve_reward", "factor": 0.25}]}, pm)
    env = make_eval_env(cfg, wrappers=resolve_wrappers(pm, cfg.wrappers))
    env.reset(seed=0)
    assert env.step(0)[1] == 0.25
    env.close()
    with pytest.raises(ConfigError, match="'env.wrappers.0.factor' = \"x\""):
        _env({"id": "CartPole-v1", "wrappers": [{"type": "halve_reward", "factor": "x"}]}, pm)


def test_vector_env_applies_wrappers_to_every_copy(pm):
    env_cfg = EnvConfig(id="image_envs:FlickerEnv", num_envs=2, wrappers=[{"type": "frame_stack", "stack_size": 2}])
    with pytest.raises(ValueError, match="resolve_wrappers"):
        make_vector_env(env_cfg, 0)  # the names must be resolved by the caller's plugin manager
    envs = make_vector_env(env_cfg, 0, wrappers=resolve_wrappers(pm, env_cfg.wrappers))
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (2, 6, 6, 2) and obs.dtype == np.uint8
    envs.close()


def test_flatten_one_hots_a_discrete_observation_and_casts_it_to_float32_when_asked(pm):
    class CardEnv(gym.Env):
        observation_space, action_space = gym.spaces.Discrete(4), gym.spaces.Discrete(4)

        def reset(self, *, seed=None, options=None):
            return 2, {}

    cfg = _env({"id": "CartPole-v1", "wrappers": [{"type": "flatten"}, {"type": "flatten", "dtype": "float32"}]}, pm)
    plain, cast = (w(CardEnv()) for w in resolve_wrappers(pm, cfg.wrappers))
    assert plain.observation_space.dtype == np.int64  # gymnasium's one-hot of a Discrete keeps its dtype
    obs = cast.reset()[0]
    assert cast.observation_space == gym.spaces.Box(0, 1, (4,), np.float32)
    assert obs.dtype == np.float32 and obs.tolist() == [0.0, 0.0, 1.0, 0.0]


def test_an_unreadable_observation_space_names_the_wrapper_that_fixes_it():
    class TextEnv(DictFlickerEnv):
        observation_space = gym.spaces.Dict(
            {"image": FlickerEnv.observation_space, "mission": gym.spaces.Text(20), "direction": gym.spaces.Discrete(4)}
        )

    with pytest.raises(ConfigError) as info:
        envs_module.check_observation_space(TextEnv.observation_space, "MiniGrid-Empty-5x5-v0")
    msg = str(info.value)
    assert "\n" not in msg and "env.wrappers: [{type: minigrid_image}]" in msg and "filter_observation" in msg


@pytest.mark.parametrize(
    "env_id, module, extra",
    [
        ("ALE/Pong-v5", "ale_py", "atari"),
        ("MiniGrid-Empty-5x5-v0", "minigrid", "minigrid"),
        ("popgym-RepeatPreviousEasy-v0", "popgym", "popgym"),
    ],
)
def test_a_missing_env_family_names_its_extra(monkeypatch, env_id, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if it were not installed
    monkeypatch.setattr(envs_module, "_registered", lambda _id: False)
    with pytest.raises(ConfigError) as info:
        resolve_env_id(env_id)
    assert extra_install_command(extra) in str(info.value)


def test_missing_mujoco_box2d_and_wrapper_packages_name_their_extras(monkeypatch, pm):
    monkeypatch.setitem(sys.modules, "mujoco", None)
    with pytest.raises(ConfigError, match=re.escape(extra_install_command("mujoco"))):
        resolve_env_id("HalfCheetah-v5")
    monkeypatch.setitem(sys.modules, "Box2D", None)  # LunarLander: gymnasium registers it without Box2D
    with pytest.raises(ConfigError, match=re.escape(extra_install_command("box2d"))):
        resolve_env_id("LunarLander-v3")
    monkeypatch.setitem(sys.modules, "minigrid", None)
    with pytest.raises(ConfigError) as info:
        validate_wrappers(pm, [{"type": "minigrid_image"}])
    assert "'env.wrappers.0' = minigrid_image" in str(info.value) and extra_install_command("minigrid") in str(
        info.value
    )


def test_minigrid_with_the_image_wrapper_observes_uint8_images(pm):
    pytest.importorskip("minigrid")
    cfg = _env({"id": "MiniGrid-Empty-5x5-v0", "wrappers": [{"type": "minigrid_image"}]}, pm)
    envs = make_vector_env(cfg, 0, wrappers=resolve_wrappers(pm, cfg.wrappers))
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (4, 7, 7, 3) and obs.dtype == np.uint8
    envs.close()
    with pytest.raises(ConfigError, match=r"minigrid_image"):
        make_vector_env(_env({"id": "MiniGrid-Empty-5x5-v0"}, pm), 0, wrappers=[])


def test_pong_through_atari_preprocessing_and_frame_stack(pm):
    pytest.importorskip("ale_py")
    pytest.importorskip("cv2")
    cfg = _env(
        {
            "id": "ALE/Pong-v5",
            "num_envs": 1,
            "kwargs": {"frameskip": 1},
            "wrappers": [{"type": "atari_preprocessing"}, {"type": "frame_stack", "stack_size": 4}],
        },
        pm,
    )
    env = make_eval_env(cfg, wrappers=resolve_wrappers(pm, cfg.wrappers))
    obs, _ = env.reset(seed=0)
    assert obs.shape == (84, 84, 4) and obs.dtype == np.uint8
    env.close()


def test_an_observation_wrapper_before_one_that_reads_the_raw_screen_is_refused(pm):
    """Issue 35: frame_stack before atari_preprocessing validated and trained on single frames."""
    pytest.importorskip("cv2")
    with pytest.raises(ConfigError) as info:
        validate_wrappers(pm, [{"type": "frame_stack"}, {"type": "clip_reward"}, {"type": "atari_preprocessing"}])
    msg = str(info.value)
    assert "'env.wrappers.0' = frame_stack comes before 'env.wrappers.2' = atari_preprocessing" in msg, msg
    assert "single frames" in msg and "env.wrappers: [clip_reward, atari_preprocessing, frame_stack]" in msg
    validate_wrappers(pm, [{"type": "clip_reward"}, {"type": "atari_preprocessing"}, {"type": "frame_stack"}])


def test_reading_the_raw_screen_is_a_declared_property_of_a_wrapper_entry():
    """A plugin's wrapper that declares ``reads_raw_screen`` gets the same check (no list of names)."""

    class EmulatorSettings(WrapperSettings):
        reads_raw_screen = True
        type: str = "emulator_frames"

    plugin = types.SimpleNamespace(
        rlgraph_wrappers=hookimpl(lambda: {"emulator_frames": (lambda env, s: env, EmulatorSettings)})
    )
    pm = PluginManager(load_entry_points=False)
    pm.register(plugin, "rlgraph-emulator")
    with pytest.raises(
        ConfigError, match="'env.wrappers.0' = grayscale comes before 'env.wrappers.2' = emulator_frames"
    ):
        validate_wrappers(pm, [{"type": "grayscale"}, {"type": "time_limit", "max_episode_steps": 9},
                               {"type": "emulator_frames"}])  # fmt: skip
    validate_wrappers(pm, [{"type": "time_limit", "max_episode_steps": 9}, {"type": "emulator_frames"}])


@pytest.mark.parametrize("late", ["grayscale", "resize"])
def test_grayscale_or_resize_after_frame_stack_names_the_wrapper_not_env_kwargs(pm, late):
    """Issue 35: grayscale/resize in the wrong place failed with a message that blamed env.kwargs."""
    if late == "resize":
        pytest.importorskip("cv2")
    cfg = _env({"id": "image_envs:RgbFlickerEnv", "wrappers": [{"type": "frame_stack"}, {"type": late}]}, pm)
    with pytest.raises(ConfigError) as info:
        make_eval_env(cfg, wrappers=resolve_wrappers(pm, cfg.wrappers))
    msg = str(info.value)
    assert "\n" not in msg and "env.kwargs" not in msg, msg
    assert f"'env.wrappers.1' = {late} cannot be applied" in msg and "Box of shape (6, 6, 3, 4)" in msg
    assert "from 'env.wrappers.0'" in msg
    good = _env({"id": "image_envs:RgbFlickerEnv", "wrappers": [{"type": late}, {"type": "frame_stack"}]}, pm)
    make_eval_env(good, wrappers=resolve_wrappers(pm, good.wrappers)).close()


def test_frame_stack_of_a_dict_observation_with_a_text_mission_is_one_paragraph(pm):
    """Issue 35: frame_stack on MiniGrid's Dict observation (a text mission) was a gymnasium traceback."""

    class TextEnv(DictFlickerEnv):
        observation_space = gym.spaces.Dict({"image": FlickerEnv.observation_space, "mission": gym.spaces.Text(20)})

    wrap = resolve_wrappers(pm, validate_wrappers(pm, [{"type": "frame_stack"}]))[0]
    with pytest.raises(ConfigError) as info:
        wrap(TextEnv())
    msg = str(info.value)
    assert "\n" not in msg and "'env.wrappers.0' = frame_stack cannot be applied" in msg
    assert "a Dict observation (image (Box), mission (text))" in msg and "minigrid_image" in msg, msg
