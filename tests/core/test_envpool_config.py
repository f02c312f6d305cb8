"""env.vectorization: envpool without EnvPool itself: the config, the translation of the Atari
wrappers into EnvPool's arguments, and the errors (a missing package names its pip command)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from rlgraph_core.config.sections import EnvConfig
from rlgraph_core.config.wrappers import validate_wrappers
from rlgraph_core.envpool_envs import envpool_id, envpool_kwargs
from rlgraph_core.envs import make_vector_env
from rlgraph_core.errors import ConfigError
from rlgraph_core.plugins import PluginManager

ATARI = [
    {"type": "atari_preprocessing", "noop_max": 10, "frame_skip": 4, "screen_size": 64},
    {"type": "clip_reward"},
    {"type": "frame_stack", "stack_size": 3},
]


#: gymnasium's AtariPreprocessing (the atari_preprocessing wrapper) needs OpenCV: the torch
#: session installs the atari extra; the core session has none of the env extras.
needs_atari = pytest.mark.skipif(
    importlib.util.find_spec("cv2") is None, reason="the atari extra (opencv-python-headless) is not installed"
)


@pytest.fixture(scope="module")
def pm():
    return PluginManager(load_entry_points=False)


def _env(pm, **env) -> EnvConfig:
    env["wrappers"] = validate_wrappers(pm, env.get("wrappers"))
    return EnvConfig.model_validate({"vectorization": "envpool", **env})


@needs_atari
def test_atari_wrappers_become_envpool_arguments(pm):
    cfg = _env(pm, id="ALE/Pong-v5", kwargs={"frameskip": 1, "repeat_action_probability": 0.0}, wrappers=ATARI)
    assert envpool_id(cfg.id) == "Pong-v5" and envpool_id("HalfCheetah-v5") == "HalfCheetah-v5"
    assert envpool_kwargs(cfg) == {
        "stack_num": 3,
        "reward_clip": True,
        "episodic_life": False,
        "use_fire_reset": True,
        "repeat_action_probability": 0.0,
        "noop_max": 10,
        "frame_skip": 4,
        "img_height": 64,
        "img_width": 64,
        "gray_scale": True,
    }
    assert envpool_kwargs(_env(pm, id="HalfCheetah-v5")) == {}


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"id": "ALE/Pong-v5"}, "needs the atari_preprocessing wrapper"),
        pytest.param(
            {"id": "ALE/Pong-v5", "kwargs": {"frameskip": 4}, "wrappers": ATARI}, "set frameskip: 1", marks=needs_atari
        ),
        pytest.param(
            {"id": "ALE/Pong-v5", "wrappers": [*ATARI, {"type": "grayscale"}]}, "holds 'grayscale'", marks=needs_atari
        ),
        ({"id": "HalfCheetah-v5", "wrappers": [{"type": "frame_stack"}]}, "holds 'frame_stack'"),
        pytest.param(
            {"id": "ALE/Pong-v5", "wrappers": [*ATARI[:1], {"type": "clip_reward", "max_reward": 2.0}]},
            "sign only",
            marks=needs_atari,
        ),
    ],
)
def test_what_envpool_cannot_do_is_refused_in_one_paragraph(pm, env, expected):
    with pytest.raises(ConfigError, match=expected) as info:
        envpool_kwargs(_env(pm, **env))
    assert "\n" not in str(info.value)


def test_a_missing_envpool_names_the_pip_command(pm, monkeypatch):
    monkeypatch.setitem(sys.modules, "envpool", None)  # import envpool -> ImportError
    cfg = _env(pm, id="HalfCheetah-v5", num_envs=2)
    with pytest.raises(ConfigError, match=r'pip install "rlgraph-core\[envpool\]"'):
        make_vector_env(cfg, seed=0)


def test_an_unknown_vectorization_is_refused():
    with pytest.raises(Exception, match="envpool"):
        EnvConfig.model_validate({"vectorization": "threads"})
