"""Reproducibility on the tf backend, like Stable-Baselines3's determinism test: two runs with the
same seed and config (one CPU thread) give bit-identical metrics rows (minus clock fields) and
weights; another seed gives other weights, so the check can fail; a run stopped half-way and
resumed matches an uninterrupted one. ``docs/reproducibility.md``
says which combinations hold and why.
"""

from __future__ import annotations

import pytest

import rlgraph_core as rl
from rlgraph_core.plugins import get_plugin_manager
from rlgraph_core.testing.determinism import check_resume_determinism, check_seed_determinism

if "tf" not in get_plugin_manager().names("backends"):
    pytest.skip("the tf backend (rlgraph-tf) is not installed", allow_module_level=True)


@pytest.mark.parametrize(("algo", "mode"), [("dqn", "eager"), ("ppo", "eager"), ("dqn", "static")])
def test_same_seed_gives_bit_identical_metrics_and_weights(algo, mode, tmp_path):
    check_seed_determinism(rl.make, algo, "tf", mode, tmp_path)


def test_a_stopped_and_resumed_ppo_run_matches_an_uninterrupted_one(tmp_path):
    """PPO stopped at 96 of 192 steps (half-way through a rollout), resumed from its final
    checkpoint and from save/load: the uninterrupted run's rows and weights (episodes in progress
    replayed, the partial rollout continued)."""
    check_resume_determinism(rl.make, rl.load, "ppo", "tf", "eager", tmp_path, 192)
