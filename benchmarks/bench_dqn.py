"""DQN training throughput: rlgraph-torch through the real LocalExecutor vs a hand-written loop.

For each configuration the script trains DQN on CartPole-v1 (one gymnasium vector env with
same-step autoreset) with

* ``rlgraph-torch eager``: the real :class:`~rlgraph_core.execution.local.LocalExecutor`
  (act -> envs.step -> observe -> update, n-step assembler, replay memory, target sync),
  with evaluation, loggers and the progress bar switched off;
* ``rlgraph-torch static`` (with ``--static``): the same, with ``train.mode=static``
  (``torch.compile``);
* ``hand-written PyTorch``: a minimal CleanRL-style DQN loop written below: an
  ``nn.Sequential`` MLP, a numpy ring-buffer replay, epsilon-greedy, double-Q Huber loss,
  Adam with gradient-norm clipping, hard target copies. Same network, batch size, schedule
  (learning_starts, train_freq, gradient_steps, target sync interval), optimizer, replay
  capacity, exploration schedule and vector-env setup as the rlgraph run.

Every run first takes ``learning_starts`` env steps plus at least two update rounds of warm-up
(so a ``torch.compile`` happens outside the window), then times the next ``--steps`` env steps.
Implementations are interleaved (the order rotates every repeat) and the median over repeats
is reported, because the machine may be shared. Run:

    python benchmarks/bench_dqn.py [--steps 5000] [--repeats 3] [--static] [--threads 1] [--configs per-step,default]
"""

from __future__ import annotations

import argparse
import copy
import math
import shutil
import statistics
import tempfile
import time

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from rlgraph_core.config.run import DEFAULT_CONFIG, deep_merge, validate_config
from rlgraph_core.execution.local import LocalExecutor
from rlgraph_core.plugins import get_plugin_manager, hookimpl

#: Agent settings of each benchmark configuration, merged into ``DEFAULT_CONFIG["agent"]``.
CONFIGS = {
    # One gradient step per env step: the per-call overhead of act/observe/update dominates.
    "per-step": {"network": {"hidden": [64, 64], "activation": "relu"}, "batch_size": 64,
                 "learning_starts": 1000, "train_freq": 1, "gradient_steps": 1,
                 "target_update_interval": 500},
    # The shipped default schedule: [256, 256], 128 gradient steps every 256 env steps.
    "default": {},
}

#: Rows of the executor's metric stream are emitted every this many env steps; the timed window
#: starts and ends on such rows.
LOG_INTERVAL = 500


# ---------------------------------------------------------------------------- shared setup


def run_config(name: str, total_timesteps: int, mode: str, seed: int) -> dict:
    """The raw rlgraph run config for one benchmark configuration (no eval, no loggers)."""
    agent = deep_merge(DEFAULT_CONFIG["agent"], CONFIGS[name])
    train = {"total_timesteps": total_timesteps, "eval_interval": 10**12, "log_interval": LOG_INTERVAL,
             "target_return": None, "loggers": [], "progress_bar": False, "seed": seed,
             "backend": "torch", "mode": mode, "device": "cpu"}
    return {"agent": agent, "env": {"id": "CartPole-v1", "num_envs": 1}, "train": train}


def window(agent_cfg, steps: int) -> tuple[int, int]:
    """``(start, end)`` env steps of the timed window: after learning_starts + 2 update rounds."""
    warm = agent_cfg.learning_starts + 2 * agent_cfg.train_freq
    start = math.ceil(warm / LOG_INTERVAL) * LOG_INTERVAL
    return start, start + math.ceil(steps / LOG_INTERVAL) * LOG_INTERVAL


def mark(updates: int) -> tuple[float, float, int]:
    """A timing mark: wall-clock time, this process's CPU time, and the update count."""
    return time.perf_counter(), time.process_time(), updates


def rates(marks: dict[int, tuple[float, float, int]], start: int, end: int) -> tuple[float, float, float]:
    """Env steps/s, updates/s (wall clock) and env steps per CPU-second between two marks."""
    (w0, c0, u0), (w1, c1, u1) = marks[start], marks[end]
    return (end - start) / (w1 - w0), (u1 - u0) / (w1 - w0), (end - start) / (c1 - c0)


# ---------------------------------------------------------------------------- rlgraph


class _Marks:
    """A plugin that marks the time of each of the executor's metric rows (every LOG_INTERVAL steps)."""

    def __init__(self):
        self.marks: dict[int, tuple[float, float, int]] = {}

    @hookimpl
    def rlgraph_on_iteration(self, metrics):
        self.marks[int(metrics["timesteps"])] = mark(int(metrics["updates"]))


def bench_rlgraph(name: str, steps: int, mode: str, seed: int) -> tuple[float, float, float]:
    """Train with the real LocalExecutor; the :func:`rates` inside the timed window."""
    probe = validate_config(run_config(name, 1, mode, seed))
    start, end = window(probe.agent, steps)
    config = validate_config(run_config(name, end, mode, seed))
    pm = get_plugin_manager()
    marks = _Marks()
    pm.register(marks, "bench_dqn")
    out_dir = tempfile.mkdtemp(prefix="bench_dqn_")
    try:
        LocalExecutor(config, out_dir, plugin_manager=pm).run()
    finally:
        pm.pm.unregister(marks)
        shutil.rmtree(out_dir, ignore_errors=True)
    return rates(marks.marks, start, end)


# ---------------------------------------------------------------------------- hand-written


class NumpyReplay:
    """A plain ring buffer of transitions in preallocated numpy arrays."""

    def __init__(self, capacity: int, obs_dim: int, rng: np.random.Generator):
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), np.float32)
        self.actions = np.zeros(capacity, np.int64)
        self.rewards = np.zeros(capacity, np.float32)
        self.terminals = np.zeros(capacity, np.float32)
        self.capacity, self.pos, self.size, self.rng = capacity, 0, 0, rng

    def add(self, obs, next_obs, actions, rewards, terminals):
        for i in range(len(obs)):
            p = self.pos
            self.obs[p], self.next_obs[p] = obs[i], next_obs[i]
            self.actions[p], self.rewards[p], self.terminals[p] = actions[i], rewards[i], terminals[i]
            self.pos = (p + 1) % self.capacity
            self.size = min(self.size + 1, self.capacity)

    def sample(self, batch_size: int):
        idx = self.rng.integers(0, self.size, batch_size)
        return (torch.from_numpy(self.obs[idx]), torch.from_numpy(self.actions[idx]),
                torch.from_numpy(self.rewards[idx]), torch.from_numpy(self.next_obs[idx]),
                torch.from_numpy(self.terminals[idx]))


def mlp(obs_dim: int, hidden: list[int], num_actions: int) -> nn.Sequential:
    """``Linear -> ReLU`` per hidden size, then a linear Q-value layer."""
    layers, size = [], obs_dim
    for h in hidden:
        layers += [nn.Linear(size, h), nn.ReLU()]
        size = h
    return nn.Sequential(*layers, nn.Linear(size, num_actions))


def bench_handwritten(name: str, steps: int, seed: int) -> tuple[float, float, float]:
    """The same training job as a minimal hand-written loop; the :func:`rates` in the window."""
    cfg = validate_config(run_config(name, 1, "eager", seed)).agent
    start, end = window(cfg, steps)
    eps, opt = cfg.exploration, cfg.optimizer
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    envs = gym.make_vec("CartPole-v1", num_envs=1, vectorization_mode=gym.VectorizeMode.SYNC,
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
    obs_dim, num_actions = envs.single_observation_space.shape[0], int(envs.single_action_space.n)
    q_net = mlp(obs_dim, cfg.network.hidden, num_actions)
    target_net = copy.deepcopy(q_net)
    optimizer = torch.optim.Adam(q_net.parameters(), lr=opt.learning_rate, eps=opt.eps, betas=opt.betas)
    rb = NumpyReplay(cfg.memory.capacity, obs_dim, rng)

    obs, _ = envs.reset(seed=seed)
    ep_returns = np.zeros(envs.num_envs)
    global_step, last_train, updates = 0, 0, 0
    marks = {}
    while global_step < end:
        # epsilon-greedy: the network runs only if some env acts greedily
        epsilon = eps.start + min(global_step / eps.steps, 1.0) * (eps.end - eps.start)
        actions = rng.integers(0, num_actions, envs.num_envs)
        explore = rng.random(envs.num_envs) < epsilon
        if not explore.all():
            with torch.no_grad():
                greedy = q_net(torch.from_numpy(obs)).argmax(dim=1).numpy()
            actions = np.where(explore, actions, greedy)

        next_obs, rewards, terminated, truncated, infos = envs.step(actions)
        real_next_obs = next_obs
        if "_final_obs" in infos and infos["_final_obs"].any():
            real_next_obs = next_obs.copy()
            for i in np.flatnonzero(infos["_final_obs"]):
                real_next_obs[i] = infos["final_obs"][i]
        rb.add(obs, real_next_obs, actions, rewards, terminated)
        ep_returns += rewards
        ep_returns[terminated | truncated] = 0.0
        obs = next_obs
        global_step += envs.num_envs

        if global_step >= cfg.learning_starts and global_step - last_train >= cfg.train_freq:
            last_train = global_step
            for _ in range(cfg.gradient_steps):
                b_obs, b_actions, b_rewards, b_next_obs, b_terminals = rb.sample(cfg.batch_size)
                with torch.no_grad():  # double Q: online net picks, target net evaluates
                    next_actions = q_net(b_next_obs).argmax(dim=1, keepdim=True)
                    next_q = target_net(b_next_obs).gather(1, next_actions).squeeze(1)
                    td_target = b_rewards + cfg.gamma * (1.0 - b_terminals) * next_q
                q = q_net(b_obs).gather(1, b_actions.unsqueeze(1)).squeeze(1)
                loss = F.smooth_l1_loss(q, td_target)  # Huber, delta 1
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(q_net.parameters(), opt.max_grad_norm)
                optimizer.step()
                updates += 1
                if updates % cfg.target_update_interval == 0:
                    target_net.load_state_dict(q_net.state_dict())
        if global_step % LOG_INTERVAL == 0:
            marks[global_step] = mark(updates)
    envs.close()
    return rates(marks, start, end)


# ---------------------------------------------------------------------------- main


def describe(name: str, steps: int) -> str:
    """One line naming the configuration's settings."""
    cfg = validate_config(run_config(name, 1, "eager", 0)).agent
    start, end = window(cfg, steps)
    return (f"config '{name}': net {cfg.network.hidden} {cfg.network.activation}, batch {cfg.batch_size}, "
            f"learning_starts {cfg.learning_starts}, train_freq {cfg.train_freq}, gradient_steps "
            f"{cfg.gradient_steps}, target sync every {cfg.target_update_interval} updates, replay "
            f"{cfg.memory.capacity}, {cfg.optimizer.type} lr {cfg.optimizer.learning_rate}, 1 env; "
            f"timed env steps {start}..{end}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5_000, help="timed env steps per run (after warm-up)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs per implementation")
    parser.add_argument("--configs", default="per-step,default", help=f"comma-separated, of {list(CONFIGS)}")
    parser.add_argument("--static", action="store_true", help="also run rlgraph-torch static (torch.compile)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads for every implementation (0 = torch's default)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    impls = {"hand-written PyTorch": lambda name: bench_handwritten(name, args.steps, args.seed),
             "rlgraph-torch eager": lambda name: bench_rlgraph(name, args.steps, "eager", args.seed)}
    if args.static:
        impls["rlgraph-torch static"] = lambda name: bench_rlgraph(name, args.steps, "static", args.seed)
    names = list(impls)

    print(f"DQN on CartPole-v1: torch {torch.__version__}, {torch.get_num_threads()} torch thread(s), "
          f"median of {args.repeats} interleaved runs. 'ratio' = env steps/s / hand-written's; "
          f"'CPU' columns use this process's CPU time instead of wall-clock time (steadier on a shared machine).")
    for config in args.configs.split(","):
        results: dict[str, list[tuple[float, float, float]]] = {n: [] for n in names}
        for r in range(args.repeats):
            for impl in names[r % len(names):] + names[:r % len(names)]:  # rotate the order
                results[impl].append(impls[impl](config))
        print()
        print(describe(config, args.steps))
        median = {impl: [statistics.median(run[i] for run in runs) for i in range(3)]
                  for impl, runs in results.items()}
        base = median[names[0]]
        print(f"{'implementation':<24}{'env steps/s':>12}{'updates/s':>11}{'ratio':>7}"
              f"{'steps/CPU-s':>13}{'CPU ratio':>11}   env steps/s of each run")
        for impl in names:
            sps, ups, cps = median[impl]
            runs = ", ".join(f"{run[0]:.0f}" for run in results[impl])
            print(f"{impl:<24}{sps:>12.0f}{ups:>11.0f}{sps / base[0]:>7.2f}{cps:>13.0f}{cps / base[2]:>11.2f}   {runs}")


if __name__ == "__main__":
    main()
