"""DQN training throughput: rlgraph-torch through the real LocalExecutor vs a hand-written loop.

For each configuration the script trains DQN on CartPole-v1 (one gymnasium vector env with
same-step autoreset) with

* ``rlgraph-torch eager``: the real :class:`~rlgraph_core.execution.local.LocalExecutor`
  (act -> envs.step -> observe -> update, replay memory, target sync), with evaluation,
  loggers and the progress bar switched off;
* ``rlgraph-torch static`` (with ``--static``): the same with ``train.mode=static``
  (``torch.compile``);
* ``hand-written PyTorch``: a minimal CleanRL-style DQN loop written below: an
  ``nn.Sequential`` MLP, a numpy ring-buffer replay, epsilon-greedy, double-Q Huber loss, Adam
  with gradient-norm clipping, hard target copies. Same network, batch size, schedule
  (learning_starts, train_freq, gradient_steps, target sync interval), optimizer, replay
  capacity, exploration schedule and vector-env setup as the rlgraph run.

Every run first takes ``learning_starts`` env steps plus at least two update rounds of warm-up
(so a ``torch.compile`` happens outside the window), then times the next ``--steps`` env steps.
One short untimed run of each eager implementation comes first, as the first run in a process
is slower.

Two measurements, because the machine may be shared and busy:

1. ``executor``: whole runs, one implementation at a time, the order rotating every repeat;
   the median over ``--repeats`` runs is reported.
2. ``lockstep``: the rlgraph agent loop (the executor's loop body: ``agent.act``,
   ``envs.step``, ``agent.observe`` with the true final observation, ``agent.update``, on a
   real DQNAgent) and the hand-written loop advance in turns of ``--chunk`` env steps in one
   process, so both see the same machine load; time is summed per implementation.

Both report wall-clock rates and env steps per CPU-second of this process (steadier when other
processes compete for the cores). Run:

    python benchmarks/bench_dqn.py [--steps 4000] [--repeats 3] [--static] [--threads 1] [--configs per-step,default]
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import time
from typing import Iterator

import numpy as np
import torch

import roofline
from runs import clocked_train, observed_run
from reference import NumpyReplay, dqn_update, make_vec, mlp
from rlgraph_core.components.schedules import as_schedule
from rlgraph_core.config.run import DEFAULT_CONFIG, deep_merge, validate_config
from rlgraph_core.assemble import make_agent
from rlgraph_core.envs import make_vector_env
from rlgraph_core.assemble import train
from rlgraph_core.execution.local import true_next_obs
from rlgraph_core.plugins import hookimpl

#: Agent settings of each benchmark configuration, merged into ``DEFAULT_CONFIG["agent"]``.
CONFIGS = {
    # One gradient step per env step: the per-call overhead of act/observe/update dominates.
    "per-step": {
        "network": {"hidden": [64, 64], "activation": "relu"},
        "batch_size": 64,
        "learning_starts": 1000,
        "train_freq": 1,
        "gradient_steps": 1,
        "target_update_interval": 500,
    },
    # The shipped default schedule: [256, 256], 128 gradient steps every 256 env steps.
    "default": {},
}

#: The executor emits a metrics row every this many env steps; timed windows start and end on one.
LOG_INTERVAL = 500

Rates = tuple[float, float, float]  # env steps/s, updates/s, env steps per CPU-second


# ---------------------------------------------------------------------------- shared setup


def run_config(name: str, mode: str, seed: int, total_timesteps: int = 1):
    """The validated rlgraph run config of one benchmark configuration (no eval, no loggers)."""
    agent = deep_merge(DEFAULT_CONFIG["agent"], CONFIGS[name])
    train = clocked_train(total_timesteps, LOG_INTERVAL, seed, "torch", mode)
    return validate_config({"agent": agent, "env": {"id": "CartPole-v1", "num_envs": 1}, "train": train})


def window(agent_cfg, steps: int) -> tuple[int, int]:
    """``(start, end)`` env steps of the timed window: after learning_starts + 2 update rounds."""
    warm = agent_cfg.learning_starts + 2 * agent_cfg.train_freq
    start = math.ceil(warm / LOG_INTERVAL) * LOG_INTERVAL
    return start, start + math.ceil(steps / LOG_INTERVAL) * LOG_INTERVAL


def clock() -> tuple[float, float]:
    """Wall-clock time and this process's CPU time."""
    return time.perf_counter(), time.process_time()


def rates(steps: int, updates: int, wall: float, cpu: float) -> Rates:
    return steps / wall, updates / wall, steps / cpu


# ---------------------------------------------------------------------------- hand-written


def handwritten_steps(cfg, seed: int) -> Iterator[tuple[int, int]]:
    """The hand-written DQN loop; yields ``(env steps, updates)`` after every env step."""
    eps, opt = as_schedule(cfg.exploration.epsilon), cfg.optimizer
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    envs = make_vec("CartPole-v1", 1)
    obs_dim, num_actions = envs.single_observation_space.shape[0], int(envs.single_action_space.n)
    q_net = mlp(obs_dim, cfg.network.hidden, num_actions)
    target_net = copy.deepcopy(q_net)
    optimizer = torch.optim.Adam(q_net.parameters(), lr=opt.learning_rate, eps=opt.eps, betas=opt.betas)
    rb = NumpyReplay(cfg.memory.capacity, obs_dim, rng)

    obs, _ = envs.reset(seed=seed)
    ep_returns = np.zeros(envs.num_envs)
    global_step, last_train, updates = 0, 0, 0
    while True:
        # epsilon-greedy: the network runs only if some env acts greedily
        epsilon = eps(global_step)
        actions = rng.integers(0, num_actions, envs.num_envs)
        explore = rng.random(envs.num_envs) < epsilon
        if not explore.all():
            with torch.no_grad():
                greedy = q_net(torch.from_numpy(obs)).argmax(dim=1).numpy()
            actions = np.where(explore, actions, greedy)

        next_obs, rewards, terminated, truncated, infos = envs.step(actions)
        rb.add(obs, true_next_obs(next_obs, infos), actions, rewards, terminated)
        ep_returns += rewards
        ep_returns[terminated | truncated] = 0.0
        obs = next_obs
        global_step += envs.num_envs

        if global_step >= cfg.learning_starts and global_step - last_train >= cfg.train_freq:
            last_train = global_step
            for _ in range(cfg.gradient_steps):
                dqn_update(q_net, target_net, optimizer, rb.sample(cfg.batch_size), cfg.gamma, opt.max_grad_norm)
                updates += 1
                if updates % cfg.target_update_interval == 0:
                    target_net.load_state_dict(q_net.state_dict())
        yield global_step, updates


def bench_handwritten(name: str, steps: int, seed: int) -> Rates:
    """One whole hand-written run; the rates inside the timed window."""
    cfg = run_config(name, "eager", seed).agent
    start, end = window(cfg, steps)
    marks = {}
    for global_step, updates in handwritten_steps(cfg, seed):
        if global_step in (start, end):
            marks[global_step] = (*clock(), updates)
        if global_step >= end:
            break
    (w0, c0, u0), (w1, c1, u1) = marks[start], marks[end]
    return rates(end - start, u1 - u0, w1 - w0, c1 - c0)


# ---------------------------------------------------------------------------- rlgraph


class _Marks:
    """A plugin that clocks each of the executor's metric rows (one every LOG_INTERVAL steps)."""

    def __init__(self):
        self.marks: dict[int, tuple[float, float, int]] = {}

    @hookimpl
    def rlgraph_on_iteration(self, metrics):
        self.marks[int(metrics["timesteps"])] = (*clock(), int(metrics["updates"]))


def bench_executor(name: str, steps: int, mode: str, seed: int) -> Rates:
    """One whole run of the real LocalExecutor; the rates inside the timed window."""
    start, end = window(run_config(name, mode, seed).agent, steps)
    config = run_config(name, mode, seed, total_timesteps=end)
    marks = _Marks()
    with observed_run(marks, "bench_dqn") as (pm, out_dir):
        train(config, out_dir, plugin_manager=pm)
    (w0, c0, u0), (w1, c1, u1) = marks.marks[start], marks.marks[end]
    return rates(end - start, u1 - u0, w1 - w0, c1 - c0)


def agent_loop_steps(config, seed: int) -> Iterator[tuple[int, int]]:
    """The LocalExecutor's loop body on a real DQNAgent; yields ``(env steps, updates)``."""
    envs = make_vector_env(config.env, seed)
    agent = make_agent(config, envs.single_observation_space, envs.single_action_space, num_envs=config.env.num_envs)
    obs, _ = envs.reset(seed=seed)
    while True:
        actions = agent.act(obs)
        next_obs, rewards, terminated, truncated, infos = envs.step(actions)
        agent.observe(obs, actions, rewards, true_next_obs(next_obs, infos), terminated, truncated)
        agent.update()
        obs = next_obs
        yield agent.timesteps, agent.updates


def bench_lockstep(name: str, steps: int, seed: int, modes: list[str], chunk: int) -> dict[str, Rates]:
    """Advance every implementation in turns of ``chunk`` env steps; rates per implementation."""
    cfg = run_config(name, "eager", seed).agent
    start, _ = window(cfg, steps)
    loops = {"hand-written PyTorch": handwritten_steps(cfg, seed)}
    for mode in modes:
        loops[f"rlgraph-torch {mode}"] = agent_loop_steps(run_config(name, mode, seed), seed)
    wall, cpu, first_updates, last_updates = {}, {}, {}, {}
    for impl, loop in loops.items():  # warm-up
        step, updates = next(loop)
        while step < start:
            step, updates = next(loop)
        wall[impl], cpu[impl], first_updates[impl] = 0.0, 0.0, updates
    for _ in range(math.ceil(steps / chunk)):
        for impl, loop in loops.items():
            w0, c0 = clock()
            for _ in range(chunk):
                _, updates = next(loop)
            w1, c1 = clock()
            wall[impl] += w1 - w0
            cpu[impl] += c1 - c0
            last_updates[impl] = updates
    total = math.ceil(steps / chunk) * chunk
    return {impl: rates(total, last_updates[impl] - first_updates[impl], wall[impl], cpu[impl]) for impl in loops}


# ---------------------------------------------------------------------------- main


def describe(name: str, steps: int) -> str:
    """One line naming the configuration's settings."""
    cfg = run_config(name, "eager", 0).agent
    start, end = window(cfg, steps)
    return (
        f"config '{name}': net {cfg.network.hidden} {cfg.network.activation}, batch {cfg.batch_size}, "
        f"learning_starts {cfg.learning_starts}, train_freq {cfg.train_freq}, gradient_steps "
        f"{cfg.gradient_steps}, target sync every {cfg.target_update_interval} updates, double Q, "
        f"Huber, replay {cfg.memory.capacity}, {cfg.optimizer.type} lr {cfg.optimizer.learning_rate} "
        f"clip {cfg.optimizer.max_grad_norm}, 1 env; timed env steps {start}..{end}"
    )


def print_table(title: str, results: dict[str, list[Rates]], roof: tuple[int, object] | None = None) -> None:
    """Medians per implementation, with ratios to the hand-written loop (the first entry);
    with ``roof = (FLOPs per update, roofline.MatmulRate)`` a roofline line per implementation."""
    median = {impl: [statistics.median(run[i] for run in runs) for i in range(3)] for impl, runs in results.items()}
    base = next(iter(median.values()))
    print(title)
    print(
        f"  {'implementation':<24}{'env steps/s':>12}{'updates/s':>11}{'ratio':>7}"
        f"{'steps/CPU-s':>13}{'CPU ratio':>11}   env steps/s of each run"
    )
    for impl, (sps, ups, cps) in median.items():
        runs = ", ".join(f"{run[0]:.0f}" for run in results[impl])
        print(f"  {impl:<24}{sps:>12.0f}{ups:>11.0f}{sps / base[0]:>7.2f}{cps:>13.0f}{cps / base[2]:>11.2f}   {runs}")
    for impl, (_, ups, _) in median.items() if roof else ():
        print(f"  {impl:<24}{roofline.roofline_line(roof[0], ups, roof[1])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4_000, help="timed env steps per run (after warm-up)")
    parser.add_argument("--repeats", type=int, default=3, help="executor runs per implementation")
    parser.add_argument("--chunk", type=int, default=250, help="env steps per turn in the lockstep run")
    parser.add_argument("--configs", default="per-step,default", help=f"comma-separated, of {list(CONFIGS)}")
    parser.add_argument("--static", action="store_true", help="also run rlgraph-torch static (torch.compile)")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads for every implementation (0 = torch's default)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    modes = ["eager", "static"] if args.static else ["eager"]

    impls = {"hand-written PyTorch": lambda name: bench_handwritten(name, args.steps, args.seed)}
    for mode in modes:
        impls[f"rlgraph-torch {mode}"] = lambda name, mode=mode: bench_executor(name, args.steps, mode, args.seed)
    names = list(impls)

    print(
        f"DQN on CartPole-v1: torch {torch.__version__}, {torch.get_num_threads()} torch thread(s). "
        f"ratio = env steps/s relative to the hand-written loop; CPU columns divide by this process's "
        f"CPU time instead of wall-clock time."
    )
    # The first run in a process is slower (lazy imports, allocator, caches): one short untimed run each.
    bench_handwritten("per-step", LOG_INTERVAL, args.seed)
    bench_executor("per-step", LOG_INTERVAL, "eager", args.seed)
    for config in args.configs.split(","):
        results: dict[str, list[Rates]] = {n: [] for n in names}
        for r in range(args.repeats):
            for impl in names[r % len(names) :] + names[: r % len(names)]:  # rotate the order
                results[impl].append(impls[impl](config))
        lockstep = bench_lockstep(config, args.steps, args.seed, modes, args.chunk)
        cfg = run_config(config, "eager", args.seed).agent
        flops = roofline.update_flops(
            "dqn", obs_dim=4, n_actions=2, hidden=cfg.network.hidden, batch=cfg.batch_size, double_q=cfg.double_q
        )
        mm = roofline.matmul_gflops([roofline.network_matmul(cfg.batch_size, cfg.network.hidden), (2048, 2048, 2048)])
        print()
        print(describe(config, args.steps))
        print_table(f"executor: LocalExecutor runs, median of {args.repeats}", results, (flops, mm))
        print_table(
            f"lockstep: agent loops in turns of {args.chunk} env steps, one run",
            {impl: [r] for impl, r in lockstep.items()},
        )


if __name__ == "__main__":
    main()
