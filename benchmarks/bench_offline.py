"""Offline RL against d3rlpy 2.8: updates/s and final evaluation return on the same dataset.

Records three datasets with hand-written controllers: CartPole-v1 ``expert`` (4 episodes of 500
steps of ``rlgraph_core.testing.datasets``' expert) and ``mixed`` (60 episodes of a behaviour that
takes the expert's action only 40% of the time), and Pendulum-v1 ``pendulum`` (32 episodes of a
swing-up controller that applies a uniform random torque half of the time, as the offline tests'
mixed Pendulum data), then trains on each with the same hyperparameters on both sides:

* both: MLPs started as PyTorch's ``nn.Linear`` (``initializer: torch_linear``, uniform biases);
* CartPole: BC and discrete CQL, MLP 64-64, batch 64, Adam 1e-3, gamma 0.99; CQL alpha 1, target
  copy every 100 updates, double Q and the Huber TD loss (d3rlpy's DiscreteCQL has no other; rlgraph's
  ``cql`` defaults to the squared error);
* Pendulum: BC (tanh policy, squared error) and IQL, MLP 64-64, batch 256, Adam 1e-3, gamma 0.99;
  IQL expectile 0.7, temperature 3, weights clipped at 100, Polyak 0.005 (d3rlpy's IQL with the
  env's action bounds as its MinMaxActionScaler, so both learn in [-1, 1]);

rlgraph torch eager and static (static fuses each round of 100 updates into one program) through
``rl.make(algo, dataset=...)``; d3rlpy ``DiscreteBC``/``DiscreteCQL``/``BC``/``IQL`` on the same
transitions (an ``MDPDataset`` from the same arrays), in a separate virtual environment given by
``--d3rlpy-python`` (d3rlpy pins its own gymnasium), in the same run, one after the other, with
``--seeds`` seeds each (rlgraph ``seed=``, ``d3rlpy.seed``).

Both sides train ``--updates`` updates in all; rlgraph's first 100 (building, compiling and reading
the dataset) are not timed. updates/s is the training calls' wall time (no evaluation inside them;
d3rlpy's logging is a no-op adapter, its progress bar off), averaged over the seeds; the return is
the mean of 10 greedy episodes afterwards (seeds 10000..10009), shown as the mean over seeds and
each seed's; ``--eval-every N`` also evaluates every N updates (outside the timing; d3rlpy through
its ``fitter``, one epoch per N) and prints the curve. One thread for torch on both sides. Run::

    python benchmarks/bench_offline.py --d3rlpy-python /path/to/d3rlpy-venv/bin/python [--updates 3000] [--seeds 3]
    python benchmarks/bench_offline.py --d3rlpy-python ... --datasets pendulum --algos iql --updates 5000 --eval-every 1000
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
path, algo, updates, seed, env_id, every = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
d3rlpy.seed(seed)
data = np.load(path)
env = gym.make(env_id)
discrete = isinstance(env.action_space, gym.spaces.Discrete)
actions = data["actions"].reshape(-1, 1) if discrete else data["actions"]
dataset = d3rlpy.dataset.MDPDataset(data["obs"], actions, data["rewards"], data["terminals"], data["timeouts"])
encoder = d3rlpy.models.VectorEncoderFactory(hidden_units=[64, 64])
if discrete:
    common = dict(batch_size=64, learning_rate=1e-3, encoder_factory=encoder)
    if algo == "bc":
        config = d3rlpy.algos.DiscreteBCConfig(**common)
    else:
        config = d3rlpy.algos.DiscreteCQLConfig(**common, gamma=0.99, alpha=1.0, target_update_interval=100)
else:
    scaler = d3rlpy.preprocessing.MinMaxActionScaler(minimum=env.action_space.low, maximum=env.action_space.high)
    if algo == "bc":
        config = d3rlpy.algos.BCConfig(batch_size=256, learning_rate=1e-3, encoder_factory=encoder, action_scaler=scaler)
    else:
        config = d3rlpy.algos.IQLConfig(
            batch_size=256, actor_learning_rate=1e-3, critic_learning_rate=1e-3, actor_encoder_factory=encoder,
            critic_encoder_factory=encoder, value_encoder_factory=encoder, gamma=0.99, tau=0.005,
            expectile=0.7, weight_temp=3.0, max_weight=100.0, action_scaler=scaler,
        )
learner = config.create("cpu:0")
learner.build_with_dataset(dataset)
def evaluate():
    returns = []
    for i in range(10):
        obs, _ = env.reset(seed=10_000 + i)
        done, total = False, 0.0
        while not done:
            action = learner.predict(obs[None].astype(np.float32))[0]
            obs, r, term, trunc, _ = env.step(int(action) if discrete else action)
            total += r
            done = term or trunc
        returns.append(total)
    return float(np.mean(returns))
seconds, curve = 0.0, []
start = time.perf_counter()
for epoch, _ in learner.fitter(dataset, n_steps=updates, n_steps_per_epoch=every, show_progress=False,
                               logger_adapter=d3rlpy.logging.NoopAdapterFactory(), save_interval=10**9):
    seconds += time.perf_counter() - start
    if epoch * every < updates:
        curve.append(evaluate())
    start = time.perf_counter()
print(json.dumps({"seconds": seconds, "return": evaluate(), "curve": curve}))
"""

#: hyperparameters of each (dataset kind, algorithm) on the rlgraph side (the d3rlpy script sets the same)
#: (torch_linear: PyTorch's nn.Linear start, weights and biases U(+-1/sqrt(fan_in)), as d3rlpy's networks;
#: rlgraph's default lecun_uniform has zero biases, which made the mixed CQL row learn about half as fast)
SMALL = {"type": "mlp", "hidden": [64, 64], "initializer": "torch_linear"}
RLGRAPH_SETTINGS = {
    ("cartpole", "bc"): dict(network=SMALL, batch_size=64),
    ("cartpole", "cql"): dict(
        network=SMALL, batch_size=64, cql_alpha=1.0, target_update_interval=100, loss_type="huber", double_q=True
    ),
    ("pendulum", "bc"): dict(network=SMALL, batch_size=256),
    ("pendulum", "iql"): dict(
        actor_network=SMALL,
        critic_network=SMALL,
        batch_size=256,
        optimizer={"learning_rate": 1e-3, "max_grad_norm": None},
        expectile=0.7,
        temperature=3.0,
        max_weight=100.0,
        tau=0.005,
    ),
}


def _pendulum_behaviour(seed: int):
    """The mixed Pendulum behaviour: a swing-up controller (about -130 per episode: pump energy
    towards the upright rest energy, then a PD law near the top), but a uniform random torque half
    of the time."""
    rng = np.random.default_rng(seed)

    def act(obs):
        cos, sin, speed = obs[:, 0], obs[:, 1], obs[:, 2]
        energy = 0.5 * speed**2 + 15.0 * cos
        pump = np.clip(0.5 * (15.0 - energy) * np.sign(speed + 1e-6), -2.0, 2.0)
        hold = np.clip(-(10.0 * np.arctan2(sin, cos) + 2.0 * speed), -2.0, 2.0)
        actions = np.where(cos > 0.85, hold, pump)[:, None].astype(np.float32)
        noisy = rng.random(len(actions)) < 0.5
        actions[noisy] = rng.uniform(-2.0, 2.0, (int(noisy.sum()), 1))
        return actions

    return act


def export_arrays(dataset_path: Path, out: Path, continuous: bool = False) -> None:
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
        actions=np.concatenate(actions).astype(np.float32 if continuous else np.int64),
        rewards=np.concatenate(rewards).astype(np.float32),
        terminals=np.concatenate(terminals).astype(np.float32),
        timeouts=np.concatenate(timeouts).astype(np.float32),
    )


def run_rlgraph(dataset: Path, kind: str, algo: str, mode: str, updates: int, seed: int, every: int) -> dict:
    import rlgraph_core as rl

    learner = rl.make(
        algo,
        dataset=str(dataset),
        backend="torch",
        mode=mode,
        seed=seed,
        eval_interval=10 * updates,  # no evaluation inside the timed call,
        eval_episodes=0,  # nor the run's final one (it ran inside learn(): 410 vs 704 eager BC updates/s)
        **RLGRAPH_SETTINGS[(kind, algo)],
    )
    learner.learn(updates=100)  # builds, compiles (static) and reads the dataset: not timed
    seconds, curve, done = 0.0, [], 100
    while done < updates:
        n = min(every, updates) - done if done < every else min(every, updates - done)
        start = time.perf_counter()
        learner.learn(updates=n)
        seconds += time.perf_counter() - start
        done += n
        if done < updates:  # outside the timed window
            curve.append(learner.evaluate(episodes=10, seed=10_000)["eval_return_mean"])
    final = learner.evaluate(episodes=10, seed=10_000)["eval_return_mean"]
    return {"seconds": seconds, "timed_updates": updates - 100, "return": final, "curve": curve}


def run_d3rlpy(python: str, arrays: Path, algo: str, updates: int, seed: int, env_id: str, every: int) -> dict:
    proc = subprocess.run(
        [python, "-c", D3RLPY_SCRIPT, str(arrays), algo, str(updates), str(seed), env_id, str(every)],
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
    parser.add_argument("--seeds", type=int, default=3, help="seeds per row (returns vary a lot between seeds)")
    parser.add_argument("--datasets", default="expert,mixed,pendulum", help="comma-separated subset")
    parser.add_argument(
        "--eval-every", type=int, default=0, help="also evaluate every N updates (outside the timing): a curve"
    )
    parser.add_argument("--algos", default="bc,cql,iql", help="comma-separated subset (CQL: CartPole, IQL: Pendulum)")
    args = parser.parse_args()

    import torch

    from rlgraph_core.testing.datasets import cartpole_expert, record_policy

    torch.set_num_threads(1)
    seeds = range(args.seeds)
    every = args.eval_every or args.updates
    with tempfile.TemporaryDirectory(prefix="bench-offline-") as tmp:
        root = Path(tmp)
        recorders = {
            "expert": lambda p: record_policy(p, cartpole_expert, episodes=4),
            "mixed": lambda p: record_policy(p, cartpole_expert, episodes=60, p_other=0.6, seed=1),
            "pendulum": lambda p: record_policy(
                p, _pendulum_behaviour(0), env_id="Pendulum-v1", episodes=32, num_envs=4
            ),
        }
        names = [n for n in args.datasets.split(",") if n]
        data = {name: recorders[name](root / name) for name in names}
        print(
            f"load (1 min) {os.getloadavg()[0]:.1f}; {args.updates} updates each; seeds {list(seeds)}; torch threads 1"
        )
        print(f"{'dataset':8} {'algo':4} {'library':16} {'updates/s':>10} {'return':>8}  per seed  (dataset return)")
        for name, data_return in data.items():
            kind = "pendulum" if name == "pendulum" else "cartpole"
            env_id = "Pendulum-v1" if kind == "pendulum" else "CartPole-v1"
            arrays = root / f"{name}.npz"
            export_arrays(root / name, arrays, continuous=kind == "pendulum")
            for algo in [a for a in ("bc", "iql" if kind == "pendulum" else "cql") if a in args.algos.split(",")]:
                runs = {
                    f"rlgraph {mode}": [
                        run_rlgraph(root / name, kind, algo, mode, args.updates, s, every) for s in seeds
                    ]
                    for mode in ("eager", "static")
                }
                runs["d3rlpy 2.8.1"] = [
                    run_d3rlpy(args.d3rlpy_python, arrays, algo, args.updates, s, env_id, every) for s in seeds
                ]
                for library, rs in runs.items():
                    rate = float(np.mean([r.get("timed_updates", args.updates) / r["seconds"] for r in rs]))
                    returns = [r["return"] for r in rs]
                    print(
                        f"{name:8} {algo:4} {library:16} {rate:10.0f} {np.mean(returns):8.1f}  "
                        f"{' / '.join(f'{x:.0f}' for x in returns)}  ({data_return:.1f}) load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
                    if rs[0]["curve"]:
                        points = zip(*(r["curve"] for r in rs))
                        print(
                            f"{'':31} returns every {every} updates (mean over seeds): "
                            + ", ".join(f"{np.mean(p):.0f}" for p in points),
                            flush=True,
                        )


if __name__ == "__main__":
    sys.exit(main())
