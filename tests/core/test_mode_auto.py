"""``train.mode: auto``: static for a run long enough to win back the compile, eager for a short try."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlgraph_core.config.run import apply_overrides, load_config_file
from rlgraph_core.config.sections import TrainConfig

ROOT = Path(__file__).resolve().parents[2]


def _mode(**train):
    return TrainConfig.model_validate(train).mode


@pytest.mark.parametrize(
    "train,mode",
    [
        ({"mode": "auto", "total_timesteps": 5_000}, "eager"),
        ({"mode": "auto", "total_timesteps": 199_999}, "eager"),
        ({"mode": "auto", "total_timesteps": 200_000}, "static"),
        ({"mode": "auto"}, "eager"),  # the default budget, 100k, is below the default threshold
        ({"mode": "auto", "total_timesteps": 5_000, "static_from_timesteps": 4_096}, "static"),
        ({"mode": "static", "total_timesteps": 5_000}, "static"),  # an explicit mode is kept
        ({"mode": "eager", "total_timesteps": 10_000_000}, "eager"),
    ],
)
def test_auto_resolves_from_the_budget(train, mode):
    assert _mode(**train) == mode


@pytest.mark.parametrize("name", ["ppo_atari", "dqn_pong", "impala_pong", "apex_pong"])
def test_the_atari_configs_compile_their_full_run_and_not_a_short_try(name):
    raw = load_config_file(ROOT / "configs" / f"{name}.yaml")
    assert raw["train"]["mode"] == "auto"
    # the train section alone: the envs and executors of these configs need extras the core session lacks
    assert TrainConfig.model_validate(raw["train"]).mode == "static"
    short = apply_overrides(raw, ["train.total_timesteps=2048"])
    assert TrainConfig.model_validate(short["train"]).mode == "eager"
