"""Multi-agent runs on the tf backend (issue 32, 'done when': torch, tf and jax): masked PPO self-play
on tic-tac-toe with a pool, and two independent PPO policies on MPE simple_spread, train, save,
load (weights, pool and counters equal; equal greedy evaluations) and train on after the load
(:mod:`rlgraph_core.testing.multi_agent`). Eager in CI (3.2 s and 2.5 s at load ~2; 35 s and 29 s
under load ~8, mostly tracing each build's train step); static heavy (9.7 s and 13.4 s at load ~2)."""

from __future__ import annotations

import pytest

import rlgraph_core as rl
from rlgraph_core.plugins import get_plugin_manager

pytest.importorskip("pettingzoo")
pytest.importorskip("mpe2")

from rlgraph_core.testing.multi_agent import check_parallel_run, check_self_play_run  # noqa: E402

if "tf" not in get_plugin_manager().names("backends"):
    pytest.skip("the tf backend (rlgraph-tf) is not installed", allow_module_level=True)


@pytest.mark.parametrize("mode", ["eager", pytest.param("static", marks=pytest.mark.heavy)])
def test_self_play_trains_evaluates_saves_loads_and_resumes(mode, tmp_path):
    check_self_play_run(rl.make, rl.load, "tf", mode, tmp_path)


@pytest.mark.parametrize("mode", ["eager", pytest.param("static", marks=pytest.mark.heavy)])
def test_independent_policies_on_a_parallel_env_train_save_load_and_resume(mode, tmp_path):
    check_parallel_run(rl.make, rl.load, "tf", mode, tmp_path)
