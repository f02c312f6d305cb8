"""What benchmarks share about their workloads: the synthetic learner inputs of the fused-loop
benchmarks (one definition, so that ``bench_tf_fused_loop`` and ``bench_torch_fused_loop`` time
their backends on the same arrays), and how a benchmark's one settings table becomes keyword
arguments, so that rlgraph and the implementation it is compared with read the same values."""

from __future__ import annotations

import numpy as np

import argparse
import json
import subprocess
import sys
from typing import Any, Mapping

__all__ = [
    "PPO_ROLLOUT_KEYS",
    "comparison_parser",
    "ppo_samples",
    "rlgraph_ppo",
    "run_sb3_script",
    "settings_keywords",
]

#: The PPO settings every PPO benchmark passes to rlgraph under the same names.
PPO_ROLLOUT_KEYS = ("n_steps", "batch_size", "n_epochs", "gamma", "gae_lambda")


def settings_keywords(settings: Mapping[str, Any], *names: str) -> dict[str, Any]:
    """``{name: settings[name]}`` for each of ``names``: a benchmark's settings as keyword arguments."""
    return {name: settings[name] for name in names}


def ppo_samples(rng: np.random.Generator, n: int = 256) -> list[np.ndarray]:
    """``n`` CartPole PPO samples in the train step's order: observations, actions, old log-probs,
    old values, advantages and returns (random, of the right shapes and dtypes)."""
    return [
        rng.standard_normal((n, 4)).astype(np.float32),
        rng.integers(0, 2, n).astype(np.int64),
        (rng.standard_normal(n) * 0.1 - 0.7).astype(np.float32),
        rng.standard_normal(n).astype(np.float32),
        rng.standard_normal(n).astype(np.float32),
        rng.standard_normal(n).astype(np.float32),
    ]


def rlgraph_ppo(args, env: dict[str, Any], **settings: Any):
    """rlgraph's PPO as the sb3-contrib comparisons run it: on torch in ``args.mode`` with
    ``args.seed``, one thread, and no evaluation inside ``learn`` (``eval_episodes=0``: not even the
    final one a ``learn`` call ends with, which would be timed; the benchmark evaluates between its
    timed chunks); ``settings`` are the agent's."""
    import rlgraph_core as rl

    # no evaluation inside learn(), not even the one a run ends with: it would be timed
    settings = {"eval_interval": 10**9, "eval_episodes": 0, **settings}
    return rl.make("ppo", env=env, backend="torch", mode=args.mode, seed=args.seed, num_threads=1, **settings)


def comparison_parser(doc: str, *, steps: int, threshold: float, sb3_help: str) -> argparse.ArgumentParser:
    """The command line every sb3-contrib comparison takes (the interpreter that runs sb3-contrib,
    env steps, evaluation interval, return threshold, seed, rlgraph's mode); a benchmark adds its own."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--sb3-python", required=True, help=sb3_help)
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--eval-every", type=int, default=4096)
    p.add_argument("--threshold", type=float, default=threshold)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mode", default="eager", choices=["eager", "static"])
    return p


def run_sb3_script(args, script: str, settings: Mapping[str, Any]) -> dict | None:
    """The result row that ``script`` (Python source run by ``args.sb3_python`` with the command line
    and ``settings`` as JSON) prints as its last line; None after echoing its stderr when it fails."""
    payload = json.dumps({**vars(args), "settings": settings})
    done = subprocess.run([args.sb3_python, "-c", script, payload], capture_output=True, text=True, timeout=7200)
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])
