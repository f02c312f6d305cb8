"""Recurrent PPO: rlgraph against sb3-contrib's RecurrentPPO on the same task, settings and run.

Both train an LSTM PPO on CartPole-v1 with the velocities removed (cart position and pole angle
only, gymnasium's ``TransformObservation``: rlgraph's ``select_observation`` wrapper), with
RL-Zoo's tuned ``CartPoleNoVel-v1`` RecurrentPPO settings: 8 envs, 32-step rollouts, one
minibatch of 256 steps, 20 epochs, gamma 0.98, lambda 0.8, no entropy bonus, Adam (eps 1e-5)
at lr 1e-3 and clip range 0.2, both decayed linearly to 0 over ``--steps``, gradient norm 0.5;
separate actor and critic LSTMs of 64 units on the raw observation (sb3-contrib's
``shared_lstm=False, enable_critic_lstm=True``; no encoder before them), then one 64-unit ReLU
layer per head (``net_arch=dict(pi=[64], vf=[64])``), no orthogonal init on sb3's side (RL-Zoo's
``ortho_init=False``; rlgraph's default orthogonal stays). RL-Zoo also normalises observations
and rewards (``normalize: True``, running statistics); here both sides instead rescale the two
kept entries by their fixed bounds onto [-2, 2] (gymnasium's ``RescaleObservation``, rlgraph's
``rescale_observation`` wrapper, as configs/ppo_lstm_cartpole_nov.yaml does; ``--rescale 0``: the
raw observation), so both see the same env. rlgraph
trains on whole 32-step rollouts (``seq_len: 32``), states zeroed at episode starts inside them;
sb3-contrib cuts its sequences at episode ends and pads them.

One torch thread each, one after the other in this run. Every ``--eval-every`` env steps training
pauses for a greedy evaluation (10 episodes on fresh envs, not timed). Reported: env steps/s of
training alone, the env steps at which the mean eval return first reached ``--threshold``, the
best and the last eval return.

RecurrentPPO runs in a separate interpreter (``--sb3-python``: a venv with ``pip install
sb3-contrib``), so neither library's imports touch the other; run on the benchmark core::

    flock /work/coord/core0.lock taskset -c 0 env OMP_NUM_THREADS=1 \\
        python benchmarks/bench_recurrent.py --sb3-python /tmp/sb3venv/bin/python --mode eager
"""

from __future__ import annotations

import sys
import textwrap
import time

from workloads import PPO_ROLLOUT_KEYS, comparison_parser, rlgraph_ppo, run_sb3_script, settings_keywords

SETTINGS = dict(
    envs=8, n_steps=32, batch_size=256, n_epochs=20, gamma=0.98, gae_lambda=0.8, lr=1e-3, clip=0.2, units=64, head=64
)

SB3 = textwrap.dedent(
    """
    import json, sys, time
    import gymnasium as gym
    import numpy as np, torch
    torch.set_num_threads(1)
    from gymnasium.wrappers import TransformObservation
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    a = json.loads(sys.argv[1])
    s = a["settings"]
    from gymnasium.wrappers import RescaleObservation
    IDX = np.array([0, 2])

    def no_velocity(env):
        sp = env.observation_space
        env = TransformObservation(env, lambda o: np.asarray(o)[IDX], gym.spaces.Box(sp.low[IDX], sp.high[IDX]))
        r = a["rescale"]
        return RescaleObservation(env, np.float32(-r), np.float32(r)) if r else env

    env = make_vec_env("CartPole-v1", n_envs=s["envs"], seed=a["seed"], wrapper_class=no_velocity)
    model = RecurrentPPO(
        "MlpLstmPolicy", env, n_steps=s["n_steps"], batch_size=s["batch_size"], n_epochs=s["n_epochs"],
        gamma=s["gamma"], gae_lambda=s["gae_lambda"], ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5,
        learning_rate=lambda p: s["lr"] * p, clip_range=lambda p: s["clip"] * p,
        policy_kwargs=dict(ortho_init=False, activation_fn=torch.nn.ReLU, lstm_hidden_size=s["units"],
                           enable_critic_lstm=True, shared_lstm=False,
                           net_arch=dict(pi=[s["head"]], vf=[s["head"]])),
        seed=a["seed"], device="cpu",
    )

    def evaluate(episodes=10):
        e = no_velocity(gym.make("CartPole-v1"))
        total = 0.0
        for i in range(episodes):
            obs, _ = e.reset(seed=10_000 + i)
            state, start, done = None, np.ones((1,), bool), False
            while not done:
                action, state = model.predict(obs, state=state, episode_start=start, deterministic=True)
                obs, r, term, trunc, _ = e.step(int(action))
                start = np.zeros((1,), bool)
                total += r
                done = term or trunc
        return total / episodes

    class Eval(BaseCallback):
        # evaluates every eval_every env steps (at a rollout's last step); its time is left out
        def __init__(self):
            super().__init__()
            self.next, self.eval_s, self.reached, self.best, self.last = a["eval_every"], 0.0, None, -1.0, None
        def _on_step(self):
            if self.num_timesteps >= self.next:
                self.next += a["eval_every"]
                t = time.perf_counter()
                self.last = evaluate()
                self.eval_s += time.perf_counter() - t
                self.best = max(self.best, self.last)
                if self.reached is None and self.last >= a["threshold"]:
                    self.reached = self.num_timesteps
            return True

    cb = Eval()
    t = time.perf_counter()
    model.learn(a["steps"], callback=cb)
    wall = time.perf_counter() - t
    print(json.dumps({"steps": model.num_timesteps, "train_s": wall - cb.eval_s, "reached": cb.reached,
                      "best": cb.best, "final": cb.last}))
    """
)


def run_rlgraph(args) -> dict:
    """rlgraph's recurrent PPO on the same env and settings, timed the same way."""
    s = SETTINGS
    algo = rlgraph_ppo(
        args,
        {
            "id": "CartPole-v1",
            "num_envs": s["envs"],
            "wrappers": [{"type": "select_observation", "indices": [0, 2]}]
            + (
                [{"type": "rescale_observation", "min_obs": -args.rescale, "max_obs": args.rescale}]
                if args.rescale
                else []
            ),
        },
        network={
            "type": args.cell,
            "units": s["units"],
            "encoder": {"hidden": []},
            "head": {"hidden": [s["head"]], "activation": "relu", "initializer": args.init},
            "initializer": args.init,
            "seq_len": s["n_steps"],
        },
        shared_trunk=False,
        **settings_keywords(s, *PPO_ROLLOUT_KEYS),
        ent_coef=0.0,
        vf_coef=0.5,
        clip_range={"type": "linear", "start": s["clip"], "end": 0.0, "steps": args.steps},
        optimizer={
            "type": "adam",
            "learning_rate": {"type": "linear", "start": s["lr"], "end": 0.0, "steps": args.steps},
            "max_grad_norm": 0.5,
            "eps": 1e-5,
        },
    )
    train_s, reached, best, ret, done = 0.0, None, -1.0, None, 0
    while done < args.steps:
        t = time.perf_counter()
        algo.learn(min(args.eval_every, args.steps - done))
        train_s += time.perf_counter() - t
        done = algo.timesteps
        ret = algo.evaluate(10)["eval_return_mean"]
        best = max(best, ret)
        if reached is None and ret >= args.threshold:
            reached = done
    return {"steps": done, "train_s": train_s, "reached": reached, "best": best, "final": ret}


def main(argv=None) -> int:
    p = comparison_parser(__doc__, steps=100_000, threshold=450.0, sb3_help="an interpreter with sb3-contrib")
    p.add_argument("--cell", default="lstm", choices=["lstm", "gru"], help="rlgraph's cell (sb3-contrib: LSTM)")
    p.add_argument(
        "--init",
        default="torch_linear",
        choices=["torch_linear", "orthogonal"],
        help="rlgraph's initializer (torch_linear: PyTorch's default, as sb3 with RL-Zoo's ortho_init=False)",
    )
    p.add_argument(
        "--rescale",
        type=float,
        default=2.0,
        help="both sides map the kept entries' bounds onto [-R, R] (RescaleObservation); 0: the raw observation",
    )
    p.add_argument("--skip-sb3", action="store_true", help="rlgraph only (profiling)")
    args = p.parse_args(argv)
    rows = {}
    if not args.skip_sb3:
        sb3 = run_sb3_script(args, SB3, SETTINGS)
        if sb3 is None:
            return 1
        rows["sb3-contrib RecurrentPPO"] = sb3
        print(rows["sb3-contrib RecurrentPPO"], flush=True)
    ours = f"rlgraph ppo {args.cell} (torch {args.mode})"
    rows[ours] = run_rlgraph(args)
    scale = f"rescaled to [-{args.rescale:g}, {args.rescale:g}]" if args.rescale else "raw observation"
    print(
        f"CartPole-v1 without velocities ({scale}), {args.steps:,} env steps, seed {args.seed}, threshold {args.threshold}"
    )
    print(f"{'':34s} {'env steps/s':>12s} {'steps to threshold':>19s} {'best eval':>10s} {'final eval':>11s}")
    for name, r in rows.items():
        reached = f"{r['reached']:,}" if r["reached"] is not None else "not reached"
        print(f"{name:34s} {r['steps'] / r['train_s']:12.0f} {reached:>19s} {r['best']:10.1f} {r['final']:11.1f}")
    if not args.skip_sb3:
        base = rows["sb3-contrib RecurrentPPO"]
        ratio = (rows[ours]["steps"] / rows[ours]["train_s"]) / (base["steps"] / base["train_s"])
        print(f"rlgraph / RecurrentPPO env steps/s: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
