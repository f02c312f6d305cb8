"""benchmarks/bench_marl.py without RLlib: its rlgraph side trains the config it claims (the
benchmark's settings applied to configs/ppo_mpe_spread.yaml) and counts env steps as agent steps / N."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("mpe2")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_marl  # noqa: E402


def test_the_rlgraph_side_runs_the_benchmark_settings():
    s = bench_marl.SETTINGS
    config = bench_marl.rlgraph_config("local", 1, seed=0, steps=256)
    agent = config.agent
    assert (agent.n_steps, agent.batch_size, agent.n_epochs) == (s["n_steps"], s["minibatch"], s["epochs"])
    assert (agent.gamma, agent.gae_lambda, agent.ent_coef, agent.vf_coef) == (
        s["gamma"],
        s["lam"],
        s["ent"],
        s["vf_coef"],
    )
    assert agent.network.activation == "tanh" and list(agent.network.hidden) == s["hidden"]
    assert config.env.num_envs == s["envs"] and config.env.kwargs["N"] == bench_marl.N_AGENTS
    rows = s["envs"] * bench_marl.N_AGENTS * s["n_steps"]
    assert config.train.total_timesteps == 256 * bench_marl.N_AGENTS + rows  # the first round is outside the window
    r = bench_marl.run_rlgraph("local", 1, seed=0, steps=256)
    assert r["env_steps"] == 256 and r["seconds"] > 0 and r["return"] is not None
    ast.parse(bench_marl.RLLIB)  # the RLlib side is at least Python
