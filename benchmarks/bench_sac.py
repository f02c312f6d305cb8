"""SAC training throughput (Pendulum-v1, or ``--env HalfCheetah-v5``): rlgraph on every installed
backend x mode vs a hand-written PyTorch SAC and (``--sb3``) Stable-Baselines3's SAC, in one run.

Each implementation trains SAC with one gradient step per env step (train_freq 1,
gradient_steps 1) on one gymnasium vector env with same-step autoreset:

* ``rlgraph-<backend> <mode>``: the real :class:`~rlgraph_core.execution.local.LocalExecutor`
  (act -> envs.step -> observe -> update: n-step assembler, replay memory, critic / actor /
  temperature train steps, Polyak target update) for every installed backend plugin (torch,
  tf ...) in eager and static mode, with evaluation, loggers and the progress bar switched off;
* ``hand-written PyTorch``: a minimal CleanRL-style SAC written below: ``nn.Sequential`` MLPs,
  a numpy ring-buffer replay, tanh-squashed Gaussian actor, twin critics with Polyak targets,
  learned temperature, three Adam optimizers. Same networks, batch size, learning rate, tau,
  gamma, learning_starts, replay capacity and vector-env setup as the rlgraph runs.

Every run first takes ``learning_starts`` env steps plus ``--warmup`` steps with updates (so
``torch.compile`` / ``tf.function`` tracing happens outside the window), then times the next
``--steps`` env steps. Two rates are printed: env steps per wall-clock second, and env steps per
CPU second of the benchmark process (every framework runs on ``--threads`` intra-op threads, so
CPU time measures the work done and is much less disturbed by other load on a shared machine).
With ``--repeats`` > 1 the implementations are interleaved (the order rotates every repeat) and
the median is reported. The default (256-unit nets, 500 timed steps, every backend x mode) takes
about 2-4 minutes on 2 idle cores, most of it warm-up and compilation. Run:

    python benchmarks/bench_sac.py [--steps 500] [--repeats 1] [--hidden 256,256]
                                   [--backends torch,tf] [--modes eager,static] [--threads 1]
                                   [--env HalfCheetah-v5] [--sb3]

``--sb3`` adds ``SB3 SAC``: ``stable_baselines3.SAC("MlpPolicy")`` with the same networks
(``net_arch`` = ``--hidden`` for actor and critics), batch, learning rate, tau, gamma, replay
capacity, ``learning_starts`` and one gradient step per env step, timed over the same window by
a callback (``pip install -e "rlgraph_core[bench]"``).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

import gymnasium as gym
import numpy as np
import torch

import roofline
from runs import clocked_train, observed_run
from reference import NumpyReplay, SACLearner, make_vec, true_next_obs
from rlgraph_core.config.run import validate_config
from rlgraph_core.assemble import train
from rlgraph_core.plugins import get_plugin_manager, hookimpl

ENV_ID = "Pendulum-v1"  # the default of --env

#: Env steps between the executor's metric rows; the timed window starts and ends on such rows.
LOG_INTERVAL = 100


def agent_config(hidden: list[int], learning_starts: int) -> dict:
    """The SAC agent settings shared by every implementation (RL-Zoo Pendulum, one step per step)."""
    net = {"hidden": hidden, "activation": "relu"}
    return {
        "type": "sac",
        "actor_network": net,
        "critic_network": net,
        "gamma": 0.99,
        "tau": 0.005,
        "batch_size": 256,
        "learning_starts": learning_starts,
        "train_freq": 1,
        "gradient_steps": 1,
        "ent_coef": "auto",
        "target_entropy": "auto",
        "memory": {"type": "replay", "capacity": 100_000},
        "optimizer": {"type": "adam", "learning_rate": 1e-3, "max_grad_norm": None},
    }


def run_config(args, backend: str, mode: str, total_timesteps: int) -> dict:
    """The raw rlgraph run config (no evaluation, no loggers, CPU)."""
    train = clocked_train(total_timesteps, LOG_INTERVAL, args.seed, backend, mode, args.device)
    return {
        "agent": agent_config(args.hidden, args.learning_starts),
        "env": {"id": args.env, "num_envs": 1},
        "train": train,
    }


def window(args) -> tuple[int, int]:
    """``(start, end)`` env steps of the timed window."""
    start = math.ceil((args.learning_starts + args.warmup) / LOG_INTERVAL) * LOG_INTERVAL
    return start, start + math.ceil(args.steps / LOG_INTERVAL) * LOG_INTERVAL


def rates(marks: dict[int, tuple[float, float, int]], start: int, end: int) -> tuple[float, float, float]:
    """Between the marks ``{timesteps: (wall time, process CPU time, updates)}``: env steps per
    wall-clock second, updates per wall-clock second, and env steps per CPU second of this process
    (less sensitive to other load on a shared machine)."""
    (t0, c0, u0), (t1, c1, u1) = marks[start], marks[end]
    return (end - start) / (t1 - t0), (u1 - u0) / (t1 - t0), (end - start) / max(c1 - c0, 1e-9)


# ---------------------------------------------------------------------------- rlgraph


class _Marks:
    """A plugin that records (time, updates) from the executor's per-iteration metrics."""

    def __init__(self):
        self.marks: dict[int, tuple[float, float, int]] = {}

    @hookimpl
    def rlgraph_on_iteration(self, metrics):
        self.marks[int(metrics["timesteps"])] = (metrics["wall_time"], time.process_time(), int(metrics["updates"]))


def bench_rlgraph(args, backend: str, mode: str) -> tuple[float, float, float]:
    """Train with the real LocalExecutor; :func:`rates` inside the window."""
    start, end = window(args)
    config = validate_config(run_config(args, backend, mode, end))
    marks = _Marks()
    with observed_run(marks, "bench_sac") as (pm, out_dir):
        train(config, out_dir, plugin_manager=pm)
    return rates(marks.marks, start, end)


# ---------------------------------------------------------------------------- hand-written


def bench_handwritten(args) -> tuple[float, float, float]:
    """The same training job as a minimal hand-written SAC loop; :func:`rates` inside the window."""
    cfg = validate_config(run_config(args, "torch", "eager", 1)).agent
    start, end = window(args)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    envs = make_vec(args.env, 1)
    envs.action_space.seed(args.seed)
    obs_dim, act_dim = envs.single_observation_space.shape[0], envs.single_action_space.shape[0]
    low, high = envs.single_action_space.low, envs.single_action_space.high
    sac = SACLearner(
        obs_dim,
        act_dim,
        cfg.actor_network.hidden,
        cfg.critic_network.hidden,
        gamma=cfg.gamma,
        tau=cfg.tau,
        target_entropy=-float(act_dim),
        lr=cfg.optimizer.learning_rate,
    )
    rb = NumpyReplay(cfg.memory.capacity, obs_dim, rng, (act_dim,), np.float32)

    obs, _ = envs.reset(seed=args.seed)
    global_step, updates = 0, 0
    marks, t0 = {}, time.perf_counter()
    while global_step < end:
        if global_step < cfg.learning_starts:
            unit = rng.uniform(-1.0, 1.0, (1, act_dim)).astype(np.float32)
        else:
            with torch.no_grad():
                unit = sac.actor(torch.from_numpy(obs.astype(np.float32)))[0].numpy()
        actions = low + 0.5 * (unit + 1.0) * (high - low)
        next_obs, rewards, terminated, truncated, infos = envs.step(actions)
        rb.add(obs, true_next_obs(next_obs, infos), unit, rewards, terminated)  # terminated only: truncation bootstraps
        obs = next_obs
        global_step += 1

        if global_step >= cfg.learning_starts and rb.size >= cfg.batch_size:
            sac.update(rb.sample(cfg.batch_size))
            updates += 1
        if global_step % LOG_INTERVAL == 0:
            marks[global_step] = (time.perf_counter() - t0, time.process_time(), updates)
    envs.close()
    return rates(marks, start, end)


# ---------------------------------------------------------------------------- main


# ---------------------------------------------------------------------------- Stable-Baselines3


def bench_sb3(args) -> tuple[float, float, float]:
    """The same training job with Stable-Baselines3's SAC; :func:`rates` inside the window."""
    import stable_baselines3 as sb3
    from stable_baselines3.common.callbacks import BaseCallback

    start, end = window(args)
    marks: dict[int, tuple[float, float, int]] = {}

    class Marks(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps in (start, end):
                marks[self.num_timesteps] = (time.perf_counter(), time.process_time(), int(self.model._n_updates))
            return True

    env = gym.make(args.env)
    model = sb3.SAC(
        "MlpPolicy",
        env,
        learning_rate=1e-3,
        buffer_size=100_000,
        learning_starts=args.learning_starts,
        batch_size=256,
        tau=0.005,
        gamma=0.99,
        train_freq=1,
        gradient_steps=1,
        ent_coef="auto",
        policy_kwargs={"net_arch": list(args.hidden)},
        seed=args.seed,
        device=args.device,
        verbose=0,
    )
    model.learn(end, callback=Marks())
    env.close()
    return rates(marks, start, end)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500, help="timed env steps per run (after warm-up)")
    parser.add_argument("--warmup", type=int, default=100, help="env steps with updates before the window")
    parser.add_argument(
        "--learning-starts",
        type=int,
        default=256,
        dest="learning_starts",
        help="env steps of random actions before learning (at least the batch size, 256)",
    )
    parser.add_argument("--repeats", type=int, default=1, help="interleaved runs per implementation")
    parser.add_argument("--hidden", default="256,256", help="hidden sizes of actor and critic trunks")
    parser.add_argument("--backends", default=None, help="comma-separated; default: every installed backend")
    parser.add_argument("--modes", default="eager,static")
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--threads", type=int, default=1, help="intra-op threads for torch and tf (0 = the frameworks' defaults)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env", default=ENV_ID, help="a continuous-action gymnasium id (HalfCheetah-v5: extra mujoco)")
    parser.add_argument("--sb3", action="store_true", help="add Stable-Baselines3's SAC (extra bench)")
    args = parser.parse_args()
    args.hidden = [int(h) for h in args.hidden.split(",")]
    installed = list(get_plugin_manager().names("backends"))
    backends = installed if args.backends is None else [b for b in args.backends.split(",") if b]
    unknown = sorted(set(backends) - set(installed))
    if unknown:
        parser.error(f"backends {unknown} are not installed; installed: {installed}")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
        if "tf" in backends:
            os.environ.setdefault("TF_NUM_INTRAOP_THREADS", str(args.threads))
            import tensorflow as tf

            tf.config.threading.set_intra_op_parallelism_threads(args.threads)
            tf.config.threading.set_inter_op_parallelism_threads(args.threads)

    impls = {"hand-written PyTorch": lambda: bench_handwritten(args)}
    if args.sb3:
        impls["SB3 SAC"] = lambda: bench_sb3(args)
    for backend in backends:
        for mode in args.modes.split(","):
            impls[f"rlgraph-{backend} {mode}"] = lambda b=backend, m=mode: bench_rlgraph(args, b, m)
    names = list(impls)
    start, end = window(args)
    print(
        f"SAC on {args.env}: torch {torch.__version__}, {torch.get_num_threads()} torch thread(s), "
        f"{os.cpu_count()} CPUs, device {args.device}, median of {args.repeats} run(s)"
    )
    print(
        f"net {args.hidden} relu (actor and each critic), batch 256, adam lr 1e-3, tau 0.005, "
        f"1 gradient step per env step, learning_starts {args.learning_starts}; timed env steps {start}..{end}"
    )
    results: dict[str, list[tuple[float, float, float]]] = {n: [] for n in names}
    for r in range(args.repeats):
        for impl in names[r % len(names) :] + names[: r % len(names)]:  # rotate the order
            t0 = time.perf_counter()
            results[impl].append(impls[impl]())
            sps, _, cps = results[impl][-1]
            print(
                f"  run {r + 1}: {impl}: {sps:.0f} env steps/s, {cps:.0f} per CPU-s "
                f"({time.perf_counter() - t0:.0f} s with warm-up)",
                flush=True,
            )

    def med(impl, i):
        return statistics.median(r[i] for r in results[impl])

    print()
    print(
        f"| {'implementation':<24} | {'env steps/s':>11} | {'updates/s':>9} | {'vs hand-written':>15} "
        f"| {'env steps/CPU-s':>15} | {'vs hand-written':>15} |"
    )
    print(f"|{'-' * 26}|{'-' * 13}|{'-' * 11}|{'-' * 17}|{'-' * 17}|{'-' * 17}|")
    for impl in names:
        print(
            f"| {impl:<24} | {med(impl, 0):>11.0f} | {med(impl, 1):>9.0f} | {med(impl, 0) / med(names[0], 0):>15.2f} "
            f"| {med(impl, 2):>15.0f} | {med(impl, 2) / med(names[0], 2):>15.2f} |"
        )
    probe = gym.make(args.env)
    obs_dim, act_dim = int(np.prod(probe.observation_space.shape)), int(np.prod(probe.action_space.shape))
    probe.close()
    flops = roofline.update_flops(
        "sac", obs_dim=obs_dim, act_dim=act_dim, actor_hidden=args.hidden, critic_hidden=args.hidden, batch=256
    )
    mm = roofline.matmul_gflops([roofline.network_matmul(256, args.hidden), (2048, 2048, 2048)])
    for impl in names:
        print(f"  {impl:<24} {roofline.roofline_line(flops, med(impl, 1), mm)}")


if __name__ == "__main__":
    main()
