"""Helpers of the optional-tools tests: the CLI in-process, installed backends, a tiny DQN run."""

from __future__ import annotations

import contextlib
import io

from rlgraph_core.cli import main
from rlgraph_core.plugins import get_plugin_manager


def run_cli(*argv: str) -> tuple[int, str, str]:
    """``rlgraph ARGV`` in-process; returns (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse usage errors
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def has_backend(name: str) -> bool:
    """Whether the backend plugin ``name`` is installed."""
    return name in get_plugin_manager().names("backends")


#: A real but tiny DQN run: updates from step 100, a report every 100 steps, evaluations every 200.
TINY_DQN = [
    "--no-progress",
    "--set",
    "agent.network.hidden=[8]",
    "--set",
    "agent.learning_starts=100",
    "--set",
    "agent.train_freq=50",
    "--set",
    "agent.batch_size=16",
    "--set",
    "agent.memory.capacity=1000",
    "--set",
    "env.num_envs=1",
    "--set",
    "train.total_timesteps=400",
    "--set",
    "train.log_interval=100",
    "--set",
    "train.eval_interval=200",
    "--set",
    "train.eval_episodes=1",
]
