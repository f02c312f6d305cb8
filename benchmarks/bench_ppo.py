"""PPO on CartPole-v1: rlgraph on every installed backend x mode vs a hand-written PyTorch PPO.

Hyperparameters (RL-Zoo's CartPole PPO, constant rates): 8 envs, n_steps 32 (256 samples per
rollout), one 256-sample minibatch, 20 epochs, gamma 0.98, gae_lambda 0.8, Adam lr 1e-3 (eps 1e-5),
clip 0.2, ent_coef 0, vf_coef 0.5, max_grad_norm 0.5, advantage normalisation, separate 64-64
tanh trunks with orthogonal initialisation. Both sides step the same gymnasium vector env
(sync, same-step autoreset) and bootstrap truncated episodes from V(final observation).

Two measurements per implementation, in the same process:

* **throughput**: env steps/s while training (no evaluation), over ``--steps`` env steps after
  two rollouts of warm-up (so a ``torch.compile``/``tf.function`` trace falls outside the window);
  also env steps per CPU-second of this process (steadier on a shared machine);
* **time to solve**: train with a greedy 10-episode evaluation every 2048 env steps until the
  mean evaluation return first reaches 475 (or ``--budget`` env steps): the env steps needed and
  the wall-clock training time to get there, evaluation time excluded, compile time included
  (a run is cut after ``--solve-timeout`` seconds so the default run stays around 5 minutes).

The rlgraph runs use the real :class:`~rlgraph_core.execution.local.LocalExecutor` with
``configs/ppo_cartpole.yaml`` (lr and clip range overridden to constants). Run:

    python benchmarks/bench_ppo.py                         # every installed backend x mode
    python benchmarks/bench_ppo.py --impls hand,torch-eager --repeats 3 --seeds 0,1,2
    python benchmarks/bench_ppo.py --skip-solve --steps 20000
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

import roofline
from runs import observed_run
from reference import ActorCritic, PPORollout, make_vec, ppo_epochs
from workloads import settings_keywords
from rlgraph_core.agents.base import Agent
from rlgraph_core.config.run import apply_overrides, load_config_file, validate_config
from rlgraph_core.assemble import train
from rlgraph_core.plugins import hookimpl

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "ppo_cartpole.yaml"
HP = dict(
    num_envs=8,
    n_steps=32,
    batch_size=256,
    n_epochs=20,
    gamma=0.98,
    gae_lambda=0.8,
    lr=1e-3,
    clip=0.2,
    ent_coef=0.0,
    vf_coef=0.5,
    max_grad_norm=0.5,
    adam_eps=1e-5,
)
ROLLOUT = HP["num_envs"] * HP["n_steps"]
WARMUP = 2 * ROLLOUT
EVAL_INTERVAL, EVAL_EPISODES, TARGET = 2048, 10, 475.0


def now() -> tuple[float, float]:
    """Wall-clock and process CPU time."""
    return time.perf_counter(), time.process_time()


class Clock:
    """Marks (wall, cpu) at env-step counts and accumulates evaluation time to subtract."""

    def __init__(self):
        self.marks: dict[int, tuple[float, float]] = {}
        self.eval_wall = 0.0
        self.eval_cpu = 0.0
        self.eval_log: list[tuple[int, float]] = []

    def mark(self, steps: int) -> None:
        """Record the time at ``steps`` env steps."""
        self.marks[steps] = now()

    def throughput(self, start: int, end: int) -> tuple[float, float]:
        """Env steps per wall-second and per CPU-second between two marks (no evaluations ran there)."""
        (w0, c0), (w1, c1) = self.marks[start], self.marks[end]
        return (end - start) / (w1 - w0), (end - start) / max(c1 - c0, 1e-9)


# ---------------------------------------------------------------------------- rlgraph


class _Timeout(Exception):
    """Raised from the metrics hook to end a time-to-solve run that exceeds ``--solve-timeout``."""


class _Marks:
    """Plugin: a mark at each metric row of the executor (every rollout: log_interval = 256)."""

    def __init__(self, clock: Clock, deadline: float = float("inf")):
        self.clock = clock
        self.deadline = deadline
        self.last_steps = 0

    @hookimpl
    def rlgraph_on_iteration(self, metrics):
        """Mark the row's env steps; end the run past the deadline."""
        self.last_steps = int(metrics["timesteps"])
        self.clock.mark(self.last_steps)
        if time.perf_counter() > self.deadline:
            raise _Timeout()


def _timed_evaluate(clock: Clock):
    """Wrap ``Agent.evaluate`` so evaluation time can be excluded from training time."""
    original = Agent.evaluate

    @functools.wraps(original)
    def evaluate(self, *args, **kwargs):
        """``Agent.evaluate``, timed."""
        w, c = now()
        out = original(self, *args, **kwargs)
        w1, c1 = now()
        clock.eval_wall += w1 - w
        clock.eval_cpu += c1 - c
        clock.eval_log.append((self.timesteps, out["eval_return_mean"]))
        return out

    return original, evaluate


def run_rlgraph(backend: str, mode: str, seed: int, total: int, solve: bool, timeout: float) -> dict:
    """One LocalExecutor run; returns throughput or time-to-solve numbers."""
    overrides = [
        f"train.backend={backend}",
        f"train.mode={mode}",
        "train.device=cpu",
        f"train.seed={seed}",
        f"train.total_timesteps={total}",
        f"train.log_interval={ROLLOUT}",
        "train.loggers=[]",
        "train.progress_bar=false",
        f"agent.optimizer.learning_rate={HP['lr']}",
        f"agent.clip_range={HP['clip']}",
        f"agent.n_epochs={HP['n_epochs']}",
        f"train.eval_interval={EVAL_INTERVAL if solve else 10**12}",
        f"train.eval_episodes={EVAL_EPISODES}",
        f"train.target_return={TARGET if solve else 'null'}",
    ]
    config = validate_config(apply_overrides(load_config_file(CONFIG), overrides))
    clock = Clock()
    marks = _Marks(clock, time.perf_counter() + timeout if solve else float("inf"))
    original, wrapped = _timed_evaluate(clock)
    Agent.evaluate = wrapped
    try:
        with observed_run(marks, "bench_ppo") as (pm, out_dir):
            summary = train(config, out_dir, plugin_manager=pm)
    except _Timeout:
        return {"solved": False, "steps": marks.last_steps, "time": float("nan"), "timeout": True}
    finally:
        Agent.evaluate = original
    if not solve:
        return {"throughput": clock.throughput(WARMUP, total)}
    return {
        "solved": summary["target_reached"],
        "steps": summary["timesteps"],
        "time": summary["wall_time"] - clock.eval_wall,
        "build": summary["build_seconds"],
    }


# ---------------------------------------------------------------------------- hand-written


def evaluate_hand(model: ActorCritic, env, seed: int) -> float:
    """Greedy episodes on a single env, seeds as the local executor uses them."""
    returns = []
    for i in range(EVAL_EPISODES):
        obs, _ = env.reset(seed=10_000 + seed + i)
        done, total = False, 0.0
        while not done:
            with torch.no_grad():
                action = int(model.actor(torch.as_tensor(obs, dtype=torch.float32)[None]).argmax(-1)[0])
            obs, r, term, trunc, _ = env.step(action)
            total += float(r)
            done = term or trunc
        returns.append(total)
    return float(np.mean(returns))


def run_hand(seed: int, total: int, solve: bool, timeout: float) -> dict:
    """A minimal CleanRL-style PPO loop with the same hyperparameters and env setup.

    Kept lean the way a careful hand-writer would: foreach Adam and gradient clipping (as the
    torch backend uses), no argument validation in ``torch.distributions``.
    """
    hp = HP
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    envs = make_vec("CartPole-v1", hp["num_envs"])
    eval_env = gym.make("CartPole-v1")
    obs_dim, n_actions = envs.single_observation_space.shape[0], int(envs.single_action_space.n)
    model = ActorCritic(obs_dim, n_actions)
    optimizer = torch.optim.Adam(model.parameters(), lr=hp["lr"], eps=hp["adam_eps"], foreach=True)
    T, N = hp["n_steps"], hp["num_envs"]
    rollout = PPORollout(T, N, obs_dim)

    clock = Clock()
    obs, _ = envs.reset(seed=seed)
    steps, t, next_eval, solved = 0, 0, EVAL_INTERVAL, False
    t0 = time.perf_counter()
    while steps < total and not solved:
        if solve and time.perf_counter() - t0 > timeout:
            return {"solved": False, "steps": steps, "time": float("nan"), "timeout": True}
        next_obs, infos = rollout.step(model, envs, t, obs)
        obs, steps, t = next_obs, steps + N, t + 1
        if t == T:  # ----- learn: GAE, then epochs of minibatch steps
            t = 0
            adv = rollout.advantages(model, next_obs, infos, hp["gamma"], hp["gae_lambda"])
            ppo_epochs(
                model,
                optimizer,
                rng,
                rollout.flat(adv),
                **settings_keywords(hp, "n_epochs", "batch_size", "clip", "vf_coef", "ent_coef", "max_grad_norm"),
            )
            clock.mark(steps)
        if solve and steps >= next_eval:
            next_eval += EVAL_INTERVAL
            w = time.perf_counter()
            solved = evaluate_hand(model, eval_env, seed) >= TARGET
            clock.eval_wall += time.perf_counter() - w
    elapsed = time.perf_counter() - t0
    envs.close()
    eval_env.close()
    if not solve:
        return {"throughput": clock.throughput(WARMUP, total)}
    return {"solved": solved, "steps": steps, "time": elapsed - clock.eval_wall, "build": 0.0}


# ---------------------------------------------------------------------------- main


def available_impls() -> list[str]:
    """``hand`` plus ``<backend>-<mode>`` for every installed rlgraph backend."""
    from rlgraph_core.plugins import get_plugin_manager as pm

    out = ["hand"]
    for name in sorted(pm().names("backends"), key=lambda n: (n != "torch", n)):
        out += [f"{name}-eager", f"{name}-static"]
    return out


def run(impl: str, seed: int, total: int, solve: bool, timeout: float = float("inf")) -> dict:
    """One throughput or time-to-solve run of ``impl``."""
    if impl == "hand":
        return run_hand(seed, total, solve, timeout)
    backend, mode = impl.rsplit("-", 1)
    return run_rlgraph(backend, mode, seed, total, solve, timeout)


def label(impl: str) -> str:
    """Display name of an implementation key."""
    return "hand-written PyTorch" if impl == "hand" else f"rlgraph {impl.replace('-', ' ')}"


def main() -> None:
    """Parse flags, run the selected measurements, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impls", default=None, help=f"comma-separated subset of {available_impls()} (default all)")
    parser.add_argument("--steps", type=int, default=4096, help="timed env steps of the throughput runs")
    parser.add_argument("--budget", type=int, default=50_000, help="env-step cap of the time-to-solve runs")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved throughput runs per implementation")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds of the time-to-solve runs")
    parser.add_argument(
        "--solve-timeout",
        type=float,
        default=60.0,
        help="wall-clock cap (s, incl. build and evaluations) of each time-to-solve run",
    )
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-solve", action="store_true")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="intra-op threads of torch (and tf) for every implementation (0 = framework default)",
    )
    args = parser.parse_args()
    impls = args.impls.split(",") if args.impls else available_impls()
    unknown = sorted(set(impls) - set(available_impls()))
    if unknown:
        parser.error(f"unknown or uninstalled implementations {unknown}; available: {available_impls()}")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
        if any(i.startswith("tf-") for i in impls):
            import tensorflow as tf

            tf.config.threading.set_intra_op_parallelism_threads(args.threads)
            tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]
    steps = -(-args.steps // ROLLOUT) * ROLLOUT
    print(
        f"PPO on CartPole-v1 (8 envs x 32 steps, batch 256, 20 epochs, lr 1e-3, clip 0.2, gamma 0.98, "
        f"gae_lambda 0.8); torch {torch.__version__}, {torch.get_num_threads()} thread(s)."
    )

    thr: dict[str, list[tuple[float, float]]] = {i: [] for i in impls}
    if not args.skip_throughput:
        for r in range(args.repeats):
            for impl in impls[r % len(impls) :] + impls[: r % len(impls)]:
                thr[impl].append(run(impl, 0, WARMUP + steps, solve=False)["throughput"])
                print(f"  throughput {label(impl)}: {thr[impl][-1][0]:.0f} env steps/s", flush=True)
    solve: dict[str, list[dict]] = {i: [] for i in impls}
    if not args.skip_solve:
        for seed in seeds:
            for impl in impls:
                solve[impl].append(run(impl, seed, args.budget, solve=True, timeout=args.solve_timeout))
                res = solve[impl][-1]
                print(
                    f"  solve seed {seed} {label(impl)}: {'reached' if res['solved'] else 'NOT reached'} "
                    f"after {res['steps']} steps, {res['time']:.1f} s",
                    flush=True,
                )

    print()
    base = statistics.median(t[0] for t in thr["hand"]) if thr.get("hand") else None
    base_cpu = statistics.median(t[1] for t in thr["hand"]) if thr.get("hand") else None
    print(
        "| implementation | env steps/s | vs hand | env steps/CPU-s | vs hand | steps to eval >= 475 "
        "| time to eval >= 475 (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for impl in impls:
        cols = []
        if thr[impl]:
            sps, cps = (statistics.median(t[k] for t in thr[impl]) for k in (0, 1))
            cols += [
                f"{sps:.0f}",
                f"{sps / base:.2f}" if base else "-",
                f"{cps:.0f}",
                f"{cps / base_cpu:.2f}" if base_cpu else "-",
            ]
        else:
            cols += ["-"] * 4
        if solve[impl]:
            cols.append(" / ".join(f"{r['steps']}" if r["solved"] else f"> {r['steps']}" for r in solve[impl]))
            cols.append(
                " / ".join(
                    f"{r['time']:.1f}"
                    if r["solved"]
                    else (f"> {args.solve_timeout:.0f} (cut)" if r.get("timeout") else "not reached")
                    for r in solve[impl]
                )
            )
        else:
            cols += ["-", "-"]
        print(f"| {label(impl)} | " + " | ".join(cols) + " |")
    flops = roofline.update_flops("ppo", obs_dim=4, n_actions=2, hidden=[64, 64], batch=HP["batch_size"])
    mm = roofline.matmul_gflops([roofline.network_matmul(HP["batch_size"], [64, 64]), (2048, 2048, 2048)])
    for impl in impls:
        if thr[impl]:  # gradient steps per env step: n_epochs x (rollout / batch) per rollout
            ups = statistics.median(t[0] for t in thr[impl]) * HP["n_epochs"] / HP["batch_size"]
            print(f"  {label(impl):<24} {roofline.roofline_line(flops, ups, mm)}")
    print(
        "\nthroughput: median over repeats, seed 0, evaluation off; time to solve: per seed "
        f"({', '.join(map(str, seeds))}), evaluation time excluded, build/compile included."
    )


if __name__ == "__main__":
    main()
