"""Shared pieces of the ``rlgraph tune`` tests: their skip marks and DQN's tiny trial settings."""

from __future__ import annotations

import importlib.util

import pytest

from rlgraph_core.plugins import get_plugin_manager

#: The ``pytestmark`` of every tune test module: Tune (with pandas) installed, and trials train on torch.
TUNE_MARKS = [
    pytest.mark.skipif(importlib.util.find_spec("ray.tune") is None, reason="ray[tune] is not installed"),
    pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="ray[tune] is not installed"),
    pytest.mark.skipif("torch" not in get_plugin_manager().names("backends"), reason="trials train on torch"),
]

#: ``--set`` overrides that make a ``dqn_cartpole`` trial take seconds; each test sets its own
#: ``train.total_timesteps``.
TINY = [
    "train.eval_interval=250",
    "train.eval_episodes=1",
    "train.log_interval=250",
    "agent.network.hidden=[8]",
    "agent.learning_starts=100",
    "agent.train_freq=50",
    "agent.memory.capacity=1000",
    "env.num_envs=1",
]
