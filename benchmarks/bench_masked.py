"""Masked PPO: rlgraph against sb3-contrib's MaskablePPO on the same env, settings and run.

Both train PPO on :class:`rlgraph_core.testing.masked_env.PickLegalMax` (sb3-contrib's
``action_masks()`` convention; an illegal action raises) with the same hyperparameters (those of
``configs/ppo_masked_pick.yaml``: 8 envs, 64-step rollouts, minibatch 128, 4 epochs, Adam 1e-3,
gamma 0.9, entropy 0.01, separate 64-64 tanh trunks), one CPU thread each, one after the other in
this run. Each side first trains ``--warmup`` env steps outside the timed window (two rollouts by
default: first updates, lazy imports, and in ``--mode static`` the compile; reported apart as
"warm-up s", as bench_ppo keeps its warm-up rollouts outside), then ``--steps`` more; every
``--eval-every`` env steps training pauses for a greedy evaluation (10 episodes, not timed).
Reported: env steps/s of the timed training alone, the env steps (warm-up included) at which the
mean eval return first reached ``--threshold``, the last eval return and the warm-up seconds.

MaskablePPO runs in a separate interpreter (``--sb3-python``: a venv with ``pip install
sb3-contrib``, and rlgraph-core for the env), so neither library's imports touch the other::

    python3.11 -m venv /tmp/sb3venv
    /tmp/sb3venv/bin/pip install sb3-contrib -e ./rlgraph_core
    python benchmarks/bench_masked.py --sb3-python /tmp/sb3venv/bin/python
"""

from __future__ import annotations

import sys
import textwrap
import time

from workloads import PPO_ROLLOUT_KEYS, comparison_parser, rlgraph_ppo, run_sb3_script, settings_keywords

SETTINGS = dict(n_steps=64, batch_size=128, n_epochs=4, gamma=0.9, gae_lambda=0.95, ent_coef=0.01, lr=1e-3, envs=8)

SB3 = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np, torch
    torch.set_num_threads(1)
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env
    from rlgraph_core.testing.masked_env import PickLegalMax
    a = json.loads(sys.argv[1])
    s = a["settings"]
    env = make_vec_env(lambda: PickLegalMax(mask_in="method"), n_envs=s["envs"], seed=a["seed"])
    model = MaskablePPO(
        "MlpPolicy", env, n_steps=s["n_steps"], batch_size=s["batch_size"], n_epochs=s["n_epochs"],
        gamma=s["gamma"], gae_lambda=s["gae_lambda"], ent_coef=s["ent_coef"], learning_rate=s["lr"],
        policy_kwargs=dict(net_arch=[64, 64], activation_fn=torch.nn.Tanh), seed=a["seed"], device="cpu",
    )
    def evaluate(episodes=10):
        e = PickLegalMax(mask_in="method")
        total = 0.0
        for i in range(episodes):
            obs, _ = e.reset(seed=10_000 + i)
            done = False
            while not done:
                action, _ = model.predict(obs, action_masks=e.action_masks(), deterministic=True)
                obs, r, term, trunc, _ = e.step(int(action))
                total += r
                done = term or trunc
        return total / episodes
    t = time.perf_counter()
    if a["warmup"]:
        model.learn(a["warmup"])
    warmup_s, done = time.perf_counter() - t, model.num_timesteps
    train_s, reached, ret = 0.0, None, None
    while done < a["warmup"] + a["steps"]:
        t = time.perf_counter()
        model.learn(a["eval_every"], reset_num_timesteps=False)
        train_s += time.perf_counter() - t
        done = model.num_timesteps
        ret = evaluate()
        if reached is None and ret >= a["threshold"]:
            reached = done
    print(json.dumps({"steps": done - a["warmup"], "train_s": train_s, "reached": reached, "final": ret,
                      "warmup_s": warmup_s}))
    """
)


def run_rlgraph(args) -> dict:
    """rlgraph's PPO on the same env and settings (torch eager), timed the same way."""
    s = SETTINGS
    algo = rlgraph_ppo(
        args,
        {
            "id": "rlgraph_core.testing.masked_env:PickLegalMax",
            "kwargs": {"mask_in": "method"},
            "num_envs": s["envs"],
        },
        network={"type": "mlp", "hidden": [64, 64], "activation": "tanh", "initializer": "orthogonal"},
        **settings_keywords(s, *PPO_ROLLOUT_KEYS, "ent_coef"),
        optimizer={"learning_rate": s["lr"]},
        eval_episodes=0,  # learn() ends with no evaluation (it would be timed): evaluated below, untimed, as MaskablePPO
    )
    t = time.perf_counter()
    if args.warmup:
        algo.learn(args.warmup)  # the first rollouts' updates: static mode's compile happens here
    warmup_s, done = time.perf_counter() - t, algo.timesteps
    train_s, reached, ret = 0.0, None, None
    while done < args.warmup + args.steps:
        t = time.perf_counter()
        algo.learn(args.eval_every)
        train_s += time.perf_counter() - t
        done = algo.timesteps
        ret = algo.evaluate(10)["eval_return_mean"]
        if reached is None and ret >= args.threshold:
            reached = done
    return {"steps": done - args.warmup, "train_s": train_s, "reached": reached, "final": ret, "warmup_s": warmup_s}


def main(argv=None) -> int:
    p = comparison_parser(
        __doc__, steps=32_768, threshold=14.0, sb3_help="an interpreter with sb3-contrib and rlgraph-core"
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=1024,
        help="env steps trained before the timed window on both sides (two rollouts: static mode compiles there)",
    )
    args = p.parse_args(argv)
    sb3 = run_sb3_script(args, SB3, SETTINGS)
    if sb3 is None:
        return 1
    rows = {"sb3-contrib MaskablePPO": sb3}
    rows[f"rlgraph ppo (torch {args.mode})"] = run_rlgraph(args)
    print(f"PickLegalMax, {args.steps:,} env steps, seed {args.seed}, threshold {args.threshold}")
    print(f"{'':28s} {'env steps/s':>12s} {'steps to threshold':>19s} {'final eval':>11s} {'warm-up s':>10s}")
    for name, r in rows.items():
        reached = f"{r['reached']:,}" if r["reached"] is not None else "not reached"
        line = f"{name:28s} {r['steps'] / r['train_s']:12.0f} {reached:>19s} {r['final']:11.1f}"
        print(f"{line} {r['warmup_s']:10.1f}")
    base = rows["sb3-contrib MaskablePPO"]
    ours = rows[f"rlgraph ppo (torch {args.mode})"]
    print(
        f"rlgraph / MaskablePPO env steps/s: {(ours['steps'] / ours['train_s']) / (base['steps'] / base['train_s']):.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
