"""Shared-policy multi-agent PPO: rlgraph against RLlib (new API stack) on the same PettingZoo env and run.

Both train one PPO policy shared by the two agents of MPE's cooperative ``simple_spread_v3``
(``mpe2``, N=2, 25-step episodes, discrete moves) with the same settings (those of
``configs/ppo_mpe_spread.yaml``, tanh trunks on both sides): 4 copies of the env, 64 env steps per
copy per rollout (256 env steps = 512 agent steps per update round), minibatch 128 agent steps,
10 epochs, Adam 1e-3, grad-norm clip 0.5, gamma 0.95, GAE lambda 0.95, clip 0.2, entropy 0.01,
value weight 0.5, separate 64-64 tanh trunks for policy and value, no KL penalty.

* **rlgraph**: ``rlgraph_core.assemble.train`` of that config, ``local`` and ``ray_sync`` (``--workers``
  workers, the copies split among them), in this process;
* **RLlib** (``--rllib-python``: an interpreter with ``ray[rllib]`` and ``mpe2``): ``PPOConfig`` on the
  new API stack with a ``MultiRLModuleSpec`` of one module ``shared`` that every agent maps to,
  the env wrapped by RLlib's ``ParallelPettingZooEnv``; local (``num_env_runners=0``: the driver's
  env runner samples its 4 envs) and ``--workers`` remote env runners (the envs split among them),
  the learner in the driver in both (as rlgraph's ``ray_sync``), in a child process.

Reported per case: **env steps/s** (an env step moves both agents: agent steps / 2) over the
window from the first update round's end to the last round's end (start-up, Ray's start, building
and the first round -- lazy imports, first optimizer steps -- fall outside, the same for both),
and the mean training return per agent over the last episodes (RLlib's episode return is the sum
over agents; it is divided by N). One torch thread per process on both sides. Run:

    python benchmarks/bench_marl.py --rllib-python /tmp/rllibvenv/bin/python
    python benchmarks/bench_marl.py --rllib-python ... --cases local --steps 25600 --seeds 0,1

The Ray cases need a core per process (driver + workers); see benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

N_AGENTS = 2
SETTINGS = dict(
    envs=4, n_steps=64, minibatch=128, epochs=10, lr=1e-3, grad_clip=0.5, gamma=0.95, lam=0.95, clip=0.2,
    ent=0.01, vf_coef=0.5, hidden=[64, 64], activation="tanh", max_cycles=25,
)  # fmt: skip

RLLIB = textwrap.dedent(
    """
    import json, os, sys, tempfile, time
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import torch
    torch.set_num_threads(1)
    import ray
    from mpe2 import simple_spread_v3
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
    from ray.tune.registry import register_env

    a = json.loads(sys.argv[1])
    s, n, workers = a["settings"], a["agents"], a["workers"]
    def make(_):
        return ParallelPettingZooEnv(simple_spread_v3.parallel_env(
            N=n, max_cycles=s["max_cycles"], continuous_actions=False))
    register_env("spread", make)
    t0 = time.perf_counter()
    ray.init(num_cpus=workers + 2, include_dashboard=False, _temp_dir=tempfile.mkdtemp(prefix="rllib-bench-"),
             configure_logging=False, log_to_driver=False)
    t_ray = time.perf_counter() - t0
    batch = s["envs"] * s["n_steps"]  # env steps per round
    config = (
        PPOConfig()
        .environment("spread")
        .env_runners(num_env_runners=workers, num_envs_per_env_runner=s["envs"] // max(workers, 1),
                     rollout_fragment_length=s["n_steps"], num_cpus_per_env_runner=1)
        .learners(num_learners=0)
        .training(train_batch_size_per_learner=batch, minibatch_size=s["minibatch"], num_epochs=s["epochs"],
                  lr=s["lr"], grad_clip=s["grad_clip"], grad_clip_by="global_norm", gamma=s["gamma"],
                  lambda_=s["lam"], clip_param=s["clip"], entropy_coeff=s["ent"], vf_loss_coeff=s["vf_coef"],
                  vf_clip_param=1e9, use_kl_loss=False)
        .multi_agent(policies={"shared"}, policy_mapping_fn=lambda agent_id, episode, **kw: "shared")
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={"shared": RLModuleSpec(
            model_config=DefaultModelConfig(fcnet_hiddens=s["hidden"], fcnet_activation=s["activation"],
                                            vf_share_layers=False))}))
        .debugging(seed=a["seed"])
        .reporting(metrics_num_episodes_for_smoothing=20)
    )
    t0 = time.perf_counter()
    algo = config.build_algo()
    t_build = time.perf_counter() - t0
    def steps(result):
        return result["env_runners"]["num_env_steps_sampled_lifetime"]
    result = algo.train()  # the first round: outside the window
    t_first, s_first = time.perf_counter(), steps(result)
    while steps(result) < s_first + a["steps"]:
        result = algo.train()
    t_last = time.perf_counter()
    ret = result["env_runners"].get("episode_return_mean")
    algo.stop()
    ray.shutdown()
    print(json.dumps({"env_steps": steps(result) - s_first, "seconds": t_last - t_first,
                      "return": None if ret is None else ret / n, "startup": t_ray + t_build}))
    """
)


def rlgraph_config(executor: str, workers: int, seed: int, steps: int):
    """configs/ppo_mpe_spread.yaml with the benchmark's settings (``steps`` env steps = agent steps x N)."""
    from rlgraph_core.config.run import apply_overrides, load_shipped_config, validate_config

    s = SETTINGS
    net = {"type": "mlp", "hidden": s["hidden"], "activation": s["activation"]}
    rows = s["envs"] * N_AGENTS * s["n_steps"]  # agent steps per round
    more = [
        f"agent.network={json.dumps(net)}",
        f"agent.n_steps={s['n_steps']}",
        f"agent.batch_size={s['minibatch']}",
        f"agent.n_epochs={s['epochs']}",
        f"agent.gamma={s['gamma']}",
        f"agent.gae_lambda={s['lam']}",
        f"agent.clip_range={s['clip']}",
        f"agent.ent_coef={s['ent']}",
        f"agent.vf_coef={s['vf_coef']}",
        f"agent.optimizer={json.dumps({'learning_rate': s['lr'], 'max_grad_norm': s['grad_clip']})}",
        f"env.num_envs={s['envs']}",
        f"env.kwargs={json.dumps({'N': N_AGENTS, 'max_cycles': s['max_cycles'], 'continuous_actions': False})}",
        f"train.seed={seed}",
        f"train.total_timesteps={steps * N_AGENTS + rows}",  # the first round is outside the window
        f"train.log_interval={rows}",
        "train.eval_interval=1000000000",
        "train.progress_bar=false",
        "train.loggers=[jsonl]",
        "train.num_threads=1",
        f"train.executor={executor}",
    ]
    if executor == "local":
        more.append("executor={}")
    else:
        more += [f"executor.num_workers={workers}", f"executor.envs_per_worker={s['envs'] // workers}"]
    return validate_config(apply_overrides(load_shipped_config("ppo_mpe_spread"), more))


class Clock:
    """Hook plugin: (time, agent steps, training return) of every metrics row."""

    def __init__(self):
        self.rows: list[tuple[float, int, float | None]] = []

    def rlgraph_on_iteration(self, metrics):
        self.rows.append((time.perf_counter(), int(metrics["timesteps"]), metrics.get("episode_return_mean")))


def run_rlgraph(executor: str, workers: int, seed: int, steps: int) -> dict:
    """rlgraph's run of :func:`rlgraph_config`, timed from the first metrics row (one round) to the last."""
    from rlgraph_core.assemble import train
    from rlgraph_core.plugins import PluginManager, hookimpl

    Clock.rlgraph_on_iteration = hookimpl(Clock.rlgraph_on_iteration)
    config, clock = rlgraph_config(executor, workers, seed, steps), Clock()
    out = Path(tempfile.mkdtemp(prefix="rlgraph-bench-marl-"))
    t0 = time.perf_counter()
    try:
        pm = PluginManager()
        pm.register(clock, "bench-clock")
        train(config, out, plugin_manager=pm)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    (t1, s1, _), (t2, s2, ret) = clock.rows[0], clock.rows[-1]
    return {"env_steps": (s2 - s1) / N_AGENTS, "seconds": t2 - t1, "return": ret, "startup": t1 - t0}


def run_rllib(python: str, workers: int, seed: int, steps: int) -> dict:
    """RLlib's run in a child interpreter (its own private Ray session)."""
    payload = json.dumps({"settings": SETTINGS, "agents": N_AGENTS, "workers": workers, "seed": seed, "steps": steps})
    done = subprocess.run([python, "-c", RLLIB, payload], capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f"the RLlib run failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rllib-python", required=True, help="an interpreter with ray[rllib] and mpe2")
    p.add_argument("--steps", type=int, default=12_800, help="env steps in each timed window")
    p.add_argument("--seeds", default="0", help="comma list of seeds")
    p.add_argument("--cases", default="local,ray", help="comma list of: local, ray")
    p.add_argument("--workers", type=int, default=2, help="Ray workers / env runners of the ray case")
    args = p.parse_args(argv)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import torch

    torch.set_num_threads(1)
    print(f"machine: {os.cpu_count()} CPUs, affinity {sorted(os.sched_getaffinity(0))}, load {os.getloadavg()[0]:.1f}")
    rows = []
    for case in args.cases.split(","):
        workers = 0 if case == "local" else args.workers
        for seed in (int(s) for s in args.seeds.split(",")):
            if case == "local":
                ours = run_rlgraph("local", 1, seed, args.steps)
            else:
                import ray

                tmp = tempfile.mkdtemp(prefix="rlgraph-bench-ray-")
                ray.init(num_cpus=workers + 2, include_dashboard=False, _temp_dir=tmp, configure_logging=False)
                try:
                    ours = run_rlgraph("ray_sync", workers, seed, args.steps)
                finally:
                    ray.shutdown()
                    shutil.rmtree(tmp, ignore_errors=True)
            theirs = run_rllib(args.rllib_python, workers, seed, args.steps)
            for name, r in (("rlgraph", ours), ("RLlib", theirs)):
                r.update(name=name, case=case, seed=seed, rate=r["env_steps"] / r["seconds"])
                rows.append(r)
                ret = "-" if r["return"] is None else f"{r['return']:.1f}"
                print(
                    f"  {case:5s} seed {seed} {name:8s} {r['rate']:8.0f} env steps/s "
                    f"({r['env_steps']:,.0f} in {r['seconds']:.1f} s; start-up {r['startup']:.1f} s) return {ret}",
                    flush=True,
                )
            print(f"  {case:5s} seed {seed} rlgraph / RLlib: {ours['rate'] / theirs['rate']:.2f}x", flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
