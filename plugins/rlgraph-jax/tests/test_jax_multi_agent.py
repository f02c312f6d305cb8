"""Multi-agent runs on the jax backend (issue 32, 'done when': torch, tf and jax): masked PPO self-play
on tic-tac-toe with a pool, and two independent PPO policies on MPE simple_spread, train, save,
load (weights, pool and counters equal; equal greedy evaluations) and train on after the load
(:mod:`rlgraph_core.testing.multi_agent`). Static in CI (7.8 s and 3.4 s at load ~2 with a warm
compilation cache; 57 s cold under load ~8); eager heavy (every op its own program: 8.6 s and 4.4 s at
load ~2, 23-63 s under load ~8)."""

from __future__ import annotations

import pytest

import rlgraph_core as rl
from rlgraph_core.plugins import get_plugin_manager

pytest.importorskip("jax")
pytest.importorskip("pettingzoo")
pytest.importorskip("mpe2")

from rlgraph_core.testing.multi_agent import check_parallel_run, check_self_play_run  # noqa: E402

if "jax" not in get_plugin_manager().names("backends"):
    pytest.skip("the jax backend (rlgraph-jax) is not installed", allow_module_level=True)


@pytest.mark.parametrize("mode", ["static", pytest.param("eager", marks=pytest.mark.heavy)])
def test_self_play_trains_evaluates_saves_loads_and_resumes(mode, tmp_path):
    check_self_play_run(rl.make, rl.load, "jax", mode, tmp_path)


@pytest.mark.parametrize("mode", ["static", pytest.param("eager", marks=pytest.mark.heavy)])
def test_independent_policies_on_a_parallel_env_train_save_load_and_resume(mode, tmp_path):
    check_parallel_run(rl.make, rl.load, "jax", mode, tmp_path)
