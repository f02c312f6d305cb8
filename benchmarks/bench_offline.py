"""Offline RL against d3rlpy 2.8: updates/s and final evaluation return on the same dataset.

Records two CartPole-v1 datasets with the hand-written expert of ``rlgraph_core.testing.datasets``
(an ``expert`` one, 4 episodes of 500 steps, and a ``mixed`` one, 60 episodes of a behaviour that
takes the expert's action only 40% of the time), then trains on each, with the same
hyperparameters (MLP 64-64, batch 64, Adam 1e-3, gamma 0.99; CQL alpha 1, target copy every 100
updates, Huber TD loss as d3rlpy uses):

* rlgraph BC and CQL (torch eager and static; static fuses each round of 100 CQL updates into one
  program) through ``rl.make(algo, dataset=...)``;
* d3rlpy ``DiscreteBC`` and ``DiscreteCQL`` on the same transitions (an ``MDPDataset`` from the same
  arrays), in a separate virtual environment given by ``--d3rlpy-python`` (d3rlpy pins its own
  gymnasium), in the same run, one after the other.

updates/s is the training call's wall time (no evaluation inside it; d3rlpy's logging is a no-op
adapter, its progress bar off); the return is the mean of 10 greedy episodes afterwards (seeds
10000..10009). One thread for torch on both sides. Run::

    python benchmarks/bench_offline.py --d3rlpy-python /path/to/d3rlpy-venv/bin/python [--updates 3000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

D3RLPY_SCRIPT = r"""
import json, sys, time
import numpy as np
import gymnasium as gym
import torch
import d3rlpy
torch.set_num_threads(1)
path, algo, updates = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = np.load(path)
dataset = d3rlpy.dataset.MDPDataset(
    data["obs"], data["actions"].reshape(-1, 1), data["rewards"], data["terminals"], data["timeouts"]
)
encoder = d3rlpy.models.VectorEncoderFactory(hidden_units=[64, 64])
if algo == "bc":
    learner = d3rlpy.algos.DiscreteBCConfig(batch_size=64, learning_rate=1e-3, encoder_factory=encoder).create("cpu:0")
else:
    learner = d3rlpy.algos.DiscreteCQLConfig(
        batch_size=64, learning_rate=1e-3, encoder_factory=encoder, gamma=0.99, alpha=1.0,
        target_update_interval=100,
    ).create("cpu:0")
learner.build_with_dataset(dataset)
start = time.perf_counter()
learner.fit(dataset, n_steps=updates, n_steps_per_epoch=updates, show_progress=False,
            logger_adapter=d3rlpy.logging.NoopAdapterFactory(), save_interval=10**9)
seconds = time.perf_counter() - start
env = gym.make("CartPole-v1")
returns = []
for i in range(10):
    obs, _ = env.reset(seed=10_000 + i)
    done, total = False, 0.0
    while not done:
        obs, r, term, trunc, _ = env.step(int(learner.predict(obs[None].astype(np.float32))[0]))
        total += r
        done = term or trunc
    returns.append(total)
print(json.dumps({"seconds": seconds, "return": float(np.mean(returns))}))
"""


def export_arrays(dataset_path: Path, out: Path) -> None:
    """The dataset's transitions as flat arrays in d3rlpy's layout (one row per step)."""
    import minari

    obs, actions, rewards, terminals, timeouts = [], [], [], [], []
    for episode in minari.MinariDataset(dataset_path / "data").iterate_episodes():
        steps = len(episode.rewards)
        obs.append(episode.observations[:-1])
        actions.append(episode.actions)
        rewards.append(episode.rewards)
        terminals.append(episode.terminations)
        timeout = np.zeros(steps, bool)
        timeout[-1] = not episode.terminations[-1]
        timeouts.append(timeout)
    np.savez(
        out,
        obs=np.concatenate(obs).astype(np.float32),
        actions=np.concatenate(actions).astype(np.int64),
        rewards=np.concatenate(rewards).astype(np.float32),
        terminals=np.concatenate(terminals).astype(np.float32),
        timeouts=np.concatenate(timeouts).astype(np.float32),
    )


def run_rlgraph(dataset: Path, algo: str, mode: str, updates: int) -> dict:
    import rlgraph_core as rl

    learner = rl.make(
        algo,
        dataset=str(dataset),
        backend="torch",
        mode=mode,
        network={"type": "mlp", "hidden": [64, 64]},
        batch_size=64,
        eval_interval=10 * updates,  # no evaluation inside the timed call,
        eval_episodes=0,  # nor the run's final one (it ran inside learn(): 410 vs 704 eager BC updates/s)
        **({"cql_alpha": 1.0, "target_update_interval": 100, "loss_type": "huber"} if algo == "cql" else {}),
    )
    learner.learn(updates=100)  # builds, compiles (static) and reads the dataset: not timed
    start = time.perf_counter()
    learner.learn(updates=updates)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "return": learner.evaluate(episodes=10, seed=10_000)["eval_return_mean"]}


def run_d3rlpy(python: str, arrays: Path, algo: str, updates: int) -> dict:
    proc = subprocess.run(
        [python, "-c", D3RLPY_SCRIPT, str(arrays), algo, str(updates)],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=3600,
    )
    if proc.returncode != 0:
        raise SystemExit(f"d3rlpy failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--d3rlpy-python", required=True, help="python of a venv with d3rlpy==2.8.1")
    parser.add_argument("--updates", type=int, default=3000)
    args = parser.parse_args()

    import torch

    from rlgraph_core.testing.datasets import cartpole_expert, record_policy

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="bench-offline-") as tmp:
        root = Path(tmp)
        data = {
            "expert": record_policy(root / "expert", cartpole_expert, episodes=4),
            "mixed": record_policy(root / "mixed", cartpole_expert, episodes=60, p_other=0.6, seed=1),
        }
        print(f"load (1 min) {os.getloadavg()[0]:.1f}; {args.updates} updates each; torch threads 1")
        print(f"{'dataset':8} {'algo':4} {'library':16} {'updates/s':>10} {'return':>8}  (dataset return)")
        for name, data_return in data.items():
            arrays = root / f"{name}.npz"
            export_arrays(root / name, arrays)
            for algo in ("bc", "cql"):
                rows = [
                    (f"rlgraph {mode}", run_rlgraph(root / name, algo, mode, args.updates))
                    for mode in ("eager", "static")
                ]
                rows.append(("d3rlpy 2.8.1", run_d3rlpy(args.d3rlpy_python, arrays, algo, args.updates)))
                for library, r in rows:
                    print(
                        f"{name:8} {algo:4} {library:16} {args.updates / r['seconds']:10.0f} {r['return']:8.1f}"
                        f"  ({data_return:.1f})",
                        flush=True,
                    )


if __name__ == "__main__":
    sys.exit(main())
