"""Multi-agent runs on the jax backend (issue 32, 'done when': torch, tf and jax): masked PPO self-play
on tic-tac-toe with a pool, and two independent PPO policies on MPE simple_spread, train, save,
load (weights, pool and counters equal; equal greedy evaluations) and train on after the load
(:mod:`rlgraph_core.testing.multi_agent`). Self-play static in CI (11 s with a warm compilation
cache, 57 s cold, under load ~8); eager (every op its own program: 23-63 s) and the Parallel env are heavy."""

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


@pytest.mark.heavy
@pytest.mark.parametrize("mode", ["eager", "static"])
def test_independent_policies_on_a_parallel_env_train_save_load_and_resume(mode, tmp_path):
    check_parallel_run(rl.make, rl.load, "jax", mode, tmp_path)
