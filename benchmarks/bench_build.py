"""Agent build time: rlgraph-torch DQN agents vs constructing the same plain torch networks.

For each DQN variant (the default config, and dueling + prioritized replay + 3-step returns)
the script times

* ``rlgraph-torch eager``: ``make_agent`` from a validated config on CartPole-v1's spaces:
  backend, memory, component tree, the build (space inference, variable creation, checks;
  reported separately as "graph build"), the first target sync, and the train step with its
  Adam optimizer;
* ``plain torch``: the equivalent hand-written objects: an ``nn.Sequential`` MLP (with
  value/advantage heads for the dueling variant), a target copy loaded from it, and Adam.

Two settings:

* ``warm``: median over ``--builds`` fresh agents in this process, interleaved with the
  baseline, after one untimed construction of each so that imports are paid already;
* ``cold``: the first construction in a fresh Python process (numpy, gymnasium, torch and
  rlgraph_core already imported, nothing else), median over ``--cold-runs`` processes. This
  is what a user waits for at the start of a run. Note that torch imports ``torch._dynamo``
  the first time any optimizer is created, which both implementations pay here.

Run:

    python benchmarks/bench_build.py [--builds 10] [--cold-runs 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import gymnasium as gym
import torch
import torch.nn as nn

from reference import mlp
from rlgraph_core.config.run import DEFAULT_CONFIG, deep_merge, validate_config

#: Agent settings of each variant, merged into ``DEFAULT_CONFIG["agent"]``.
VARIANTS = {
    "default": {},
    "dueling+PER+n-step": {"dueling": True, "n_step": 3, "memory": {"type": "prioritized_replay", "capacity": 100_000}},
}
IMPLS = ("rlgraph-torch eager", "plain torch")


def run_config(variant: str):
    """The validated rlgraph run config of a variant (torch eager on the CPU)."""
    return validate_config(
        {
            "agent": deep_merge(DEFAULT_CONFIG["agent"], VARIANTS[variant]),
            "env": {"id": "CartPole-v1", "num_envs": 1},
            "train": {"backend": "torch", "mode": "eager", "device": "cpu", "seed": 0},
        }
    )


# ---------------------------------------------------------------------------- plain torch


class DuelingQ(nn.Module):
    """MLP trunk, then ``Q = V + A - mean(A)`` from separate value and advantage layers."""

    def __init__(self, obs_dim: int, hidden: list[int], num_actions: int):
        super().__init__()
        layers, size = [], obs_dim
        for h in hidden:
            layers += [nn.Linear(size, h), nn.ReLU()]
            size = h
        self.trunk = nn.Sequential(*layers)
        self.value = nn.Linear(size, 1)
        self.advantage = nn.Linear(size, num_actions)

    def forward(self, x):
        features = self.trunk(x)
        adv = self.advantage(features)
        return self.value(features) + adv - adv.mean(dim=-1, keepdim=True)


def build_plain(agent_cfg, obs_dim: int, num_actions: int):
    """Online and target Q-networks and Adam, as a hand-written DQN script would make them."""
    make = DuelingQ if agent_cfg.dueling else mlp
    q_net = make(obs_dim, agent_cfg.network.hidden, num_actions)
    target_net = make(obs_dim, agent_cfg.network.hidden, num_actions)
    target_net.load_state_dict(q_net.state_dict())
    opt = agent_cfg.optimizer
    optimizer = torch.optim.Adam(q_net.parameters(), lr=opt.learning_rate, eps=opt.eps, betas=opt.betas)
    return q_net, target_net, optimizer


# ---------------------------------------------------------------------------- timing


def time_build(impl: str, config, env) -> tuple[float, float | None]:
    """Seconds to construct one agent; and, for rlgraph, the graph build part of it."""
    if impl == "plain torch":
        start = time.perf_counter()
        build_plain(config.agent, env.observation_space.shape[0], int(env.action_space.n))
        return time.perf_counter() - start, None
    from rlgraph_core.assemble import make_agent

    start = time.perf_counter()
    agent = make_agent(config, env.observation_space, env.action_space)
    return time.perf_counter() - start, agent.build_report.build_seconds


def child(impl: str, variant: str) -> None:
    """In a fresh process: time the first construction and print ``seconds graph_seconds``."""
    config = run_config(variant)
    env = gym.make("CartPole-v1")
    seconds, graph = time_build(impl, config, env)
    print(seconds, graph if graph is not None else "nan")


def cold(impl: str, variant: str, threads: int) -> tuple[float, float]:
    """Run :func:`child` in a new interpreter; its (seconds, graph build seconds)."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", impl, variant, "--threads", str(threads)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return float(out[-2]), float(out[-1])


def fmt(seconds: float | None) -> str:
    return "-" if seconds is None or seconds != seconds else f"{seconds * 1000:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builds", type=int, default=10, help="warm builds per implementation and variant")
    parser.add_argument("--cold-runs", type=int, default=3, help="fresh processes per implementation and variant")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0 = torch's default)")
    parser.add_argument("--child", nargs=2, metavar=("IMPL", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.child:
        child(*args.child)
        return

    env = gym.make("CartPole-v1")
    configs = {v: run_config(v) for v in VARIANTS}
    for variant in VARIANTS:  # pay the imports before timing
        for impl in IMPLS:
            time_build(impl, configs[variant], env)
    warm = {(i, v): [] for i in IMPLS for v in VARIANTS}
    for r in range(args.builds):
        for variant in VARIANTS:
            for impl in IMPLS if r % 2 == 0 else IMPLS[::-1]:
                warm[impl, variant].append(time_build(impl, configs[variant], env))
    cold_runs = {(i, v): [] for i in IMPLS for v in VARIANTS}
    for r in range(args.cold_runs):
        for variant in VARIANTS:
            for impl in IMPLS if r % 2 == 0 else IMPLS[::-1]:
                cold_runs[impl, variant].append(cold(impl, variant, args.threads))

    print(
        f"DQN agent build time on CartPole-v1 (torch {torch.__version__}, {torch.get_num_threads()} torch "
        f"thread(s)); warm: median of {args.builds} builds in this process; cold: median of "
        f"{args.cold_runs} fresh processes"
    )
    print(f"{'variant':<20}{'implementation':<21}{'warm':>10}{'(graph build)':>15}{'ratio':>7}{'cold':>11}{'ratio':>7}")
    for variant in VARIANTS:
        base_warm = statistics.median(s for s, _ in warm["plain torch", variant])
        base_cold = statistics.median(s for s, _ in cold_runs["plain torch", variant])
        for impl in IMPLS:
            w = statistics.median(s for s, _ in warm[impl, variant])
            g = None if impl == "plain torch" else statistics.median(g for _, g in warm[impl, variant])
            c = statistics.median(s for s, _ in cold_runs[impl, variant])
            print(
                f"{variant:<20}{impl:<21}{fmt(w):>10}{fmt(g):>15}{w / base_warm:>7.1f}{fmt(c):>11}{c / base_cold:>7.2f}"
            )


if __name__ == "__main__":
    main()
