"""Callbacks without a framework: the built-ins' stopping rules, the ``callbacks`` registry kind,
``train.callbacks`` validation, and the public package faces."""

from __future__ import annotations

import pytest

import rlgraph_core
from rlgraph_core.callbacks import Callback, CheckpointEvery, EarlyStopping, StopOnRewardThreshold, make_callbacks
from rlgraph_core.config.run import apply_overrides, validate_config
from rlgraph_core.errors import ConfigError
from rlgraph_core.plugins import KINDS, PluginManager, hookimpl

from core_backend import DEFAULT_CONFIG, NumpyBackendPlugin


class _Run:
    """What a callback reads from a run (the recorder), for the rules alone."""

    def __init__(self, timesteps=0, out_dir=None):
        self.timesteps, self.out_dir, self.saved = timesteps, out_dir, []

    def save_checkpoint(self, path):
        self.saved.append(path)
        return path


def _evals(callback, returns):
    return [callback.on_evaluation(_Run(), {"eval_return_mean": r, "eval_return_std": 0.0}) for r in returns]


def test_early_stopping_counts_evaluations_without_improvement():
    assert _evals(EarlyStopping(patience=2, min_delta=1.0), [10, 10.5, 11.5, 11.0, 12.0]) == [
        True,
        True,  # 10.5 is not > 10 + 1: one without improvement
        True,  # 11.5 improves on 10 by more than 1: the count starts again
        True,
        False,  # 11.0 and 12.0 (not > 11.5 + 1): two without improvement
    ]
    with pytest.raises(ValueError, match="patience must be >= 1"):
        EarlyStopping(patience=0)


def test_stop_on_reward_threshold():
    assert _evals(StopOnRewardThreshold(5.0), [4.9, 5.0]) == [True, False]


def test_checkpoint_every_writes_every_n_steps(tmp_path):
    cb, run = CheckpointEvery(100, path=tmp_path), _Run(timesteps=0)
    cb.on_training_start(run)
    for t in (50, 100, 150, 320, 399, 400):
        run.timesteps = t
        cb.on_step(run)
    assert run.saved == [tmp_path / "step-100", tmp_path / "step-320", tmp_path / "step-400"]
    with pytest.raises(ConfigError, match="nowhere to write"):
        CheckpointEvery(10).on_training_start(_Run())


class _PluginCallback(Callback):
    def __init__(self, level: int = 1):
        self.level = level


class _CallbackPlugin:
    @hookimpl
    def rlgraph_callbacks(self):
        return {"plugin_cb": _PluginCallback}


def test_callbacks_are_a_registry_kind_selected_and_validated_by_the_config():
    pm = PluginManager()
    pm.register(_CallbackPlugin(), "callback-plugin")
    pm.register(NumpyBackendPlugin(), "rlgraph-core-tests", name="numpy-test-backend")  # where torch is absent
    assert "callbacks" in KINDS
    assert {"early_stopping", "stop_on_reward_threshold", "checkpoint_every", "plugin_cb"} <= set(pm.names("callbacks"))
    raw = apply_overrides(
        DEFAULT_CONFIG, ["train.callbacks=[{type: early_stopping, patience: 3}, {type: plugin_cb, level: 2}]"]
    )
    config = validate_config(raw, pm)
    made = make_callbacks(pm, config.train.callbacks)
    assert isinstance(made[0], EarlyStopping) and made[0].patience == 3 and made[1].level == 2
    bad = [
        ("[{type: early_stoping}]", "Unknown callback 'early_stoping'.*Did you mean 'early_stopping'"),
        ("[{type: early_stopping, patience: 0}]", "train.callbacks.0.patience"),
        ("[{type: plugin_cb, levle: 2}]", "unknown setting.*levle.*it takes level"),
        ("[early_stopping]", "'train.callbacks.0' = \"early_stopping\": Input should be a valid dictionary"),
        ("[{patience: 3}]", "each callback entry is a mapping with a 'type'"),
    ]
    for value, message in bad:
        with pytest.raises(ConfigError, match=message):
            validate_config(apply_overrides(DEFAULT_CONFIG, [f"train.callbacks={value}"]), pm)


def test_the_public_api_is_importable_from_the_package():
    assert rlgraph_core.EarlyStopping is EarlyStopping and rlgraph_core.Callback is Callback
    for name in rlgraph_core.__all__:
        assert getattr(rlgraph_core, name) is not None, name
    from rlgraph_core.agents import DQNConfig, PPOAgent
    from rlgraph_core.components import MLP, ScheduleOrFloat

    assert DQNConfig and PPOAgent and MLP and ScheduleOrFloat
    with pytest.raises(AttributeError):
        rlgraph_core.not_a_name  # noqa: B018


def test_run_failed_copies_and_pickles_with_its_summary():
    """Issue 35 §2: Ray copies a failed trial's error; RunFailed(message) hid the cause behind an AttributeError."""
    import copy
    import pickle

    from rlgraph_core.execution.stopping import RunFailed

    failed = RunFailed({"error": "NonFiniteError: the loss became nan", "timesteps": 300})
    for again in (copy.copy(failed), copy.deepcopy(failed), pickle.loads(pickle.dumps(failed))):
        assert type(again) is RunFailed and again.summary == failed.summary
        assert str(again) == "NonFiniteError: the loss became nan"
