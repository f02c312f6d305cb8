"""DQN training throughput on CartPole-v1: torch/tf x eager/static against a hand-written loop.

Every row runs the same job in this one process: a gymnasium vector env with one CartPole-v1,
an MLP [64, 64] Q-network, double DQN with Huber loss, Adam (lr 1e-3, global-norm clip 10),
replay of capacity 100k, batch 64, one gradient step per env step (train_freq 1,
gradient_steps 1), target sync every 500 updates, learning_starts 1000.

For each row, ``--warmup`` env steps (default: learning_starts + 200, so the first updates --
where ``tf.function``/XLA and ``torch.compile`` compile -- are done) run untimed; then
``--steps`` env steps (default 5000) are timed, or fewer if a row exceeds ``--time-limit``
seconds (default 30; the table shows how many were timed). The table shows env-steps/s,
updates/s, the ratio of env-steps/s to the hand-written loop, the warm-up time (build + compile
+ warm-up steps), and where a timed step's time goes (act, env, observe, update; milliseconds
per env step).

Both frameworks run with ``--threads`` intra-op threads (default 1: for a 64-unit MLP on a
batch of 64, more threads only add synchronisation, and on a busy machine oversubscribed
thread pools make every framework erratic). ``--threads 0`` keeps each framework's default.

The baseline is a minimal hand-written PyTorch DQN loop (below): the same network, batch size,
optimizer, loss and update schedule, a numpy ring buffer and no rlgraph. Run::

    python benchmarks/bench_backends.py [--steps 5000] [--rows torch-eager,tf-static] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402

HIDDEN = [64, 64]
BATCH = 64
LR = 1e-3
MAX_GRAD_NORM = 10.0
GAMMA = 0.99
LEARNING_STARTS = 1000
TARGET_UPDATE = 500
CAPACITY = 100_000
EPS_START, EPS_END, EPS_STEPS = 1.0, 0.05, 10_000
ROWS = ("torch-eager", "torch-static", "tf-eager", "tf-static")


def make_env(seed: int):
    """The vector env the local executor uses (one CartPole, same-step autoreset)."""
    from rlgraph_core.config.sections import EnvConfig
    from rlgraph_core.envs import make_vector_env

    return make_vector_env(EnvConfig(id="CartPole-v1", num_envs=1), seed)


class Timer:
    """Accumulates wall time per phase of an env step."""

    PHASES = ("act", "env", "observe", "update")

    def __init__(self):
        self.total = dict.fromkeys(self.PHASES, 0.0)

    def reset(self):
        """Forget the time collected so far (after warm-up)."""
        self.total = dict.fromkeys(self.PHASES, 0.0)


def drive(agent_like, envs, steps: int, timer: Timer, seed: int, obs=None, time_limit: float = float("inf")):
    """Run ``steps`` env steps of act -> env.step -> observe -> update, timing each phase.

    ``agent_like`` has ``act(obs)``, ``observe(obs, actions, rewards, next_obs, terminated,
    truncated)`` and ``update()`` -- an rlgraph agent or the hand-written loop below. Stops early
    once ``time_limit`` seconds have passed. Returns ``(last observation, steps done)``.
    """
    from rlgraph_core.execution.local import true_next_obs

    if obs is None:
        obs, _ = envs.reset(seed=seed)
    clock = time.perf_counter
    tot = timer.total
    deadline = clock() + time_limit
    done = 0
    while done < steps and (done == 0 or clock() < deadline):
        t0 = clock()
        actions = agent_like.act(obs)
        t1 = clock()
        next_obs, rewards, terminated, truncated, infos = envs.step(actions)
        t2 = clock()
        agent_like.observe(obs, actions, rewards, true_next_obs(next_obs, infos), terminated, truncated)
        t3 = clock()
        agent_like.update()
        t4 = clock()
        tot["act"] += t1 - t0
        tot["env"] += t2 - t1
        tot["observe"] += t3 - t2
        tot["update"] += t4 - t3
        obs = next_obs
        done += 1
    return obs, done


# ------------------------------------------------------------------ the hand-written baseline


class HandWrittenDQN:
    """A minimal PyTorch DQN: nn.Sequential MLP, numpy ring buffer, double DQN, Huber, Adam."""

    def __init__(self, obs_dim: int, num_actions: int, seed: int):
        import torch

        self.torch = torch
        torch.manual_seed(seed)
        self.rng = np.random.default_rng(seed)
        self.num_actions = num_actions

        def mlp():
            layers, last = [], obs_dim
            for h in HIDDEN:
                layers += [torch.nn.Linear(last, h), torch.nn.ReLU()]
                last = h
            return torch.nn.Sequential(*layers, torch.nn.Linear(last, num_actions))

        self.q = mlp()
        self.target = mlp()
        self.target.load_state_dict(self.q.state_dict())
        self.opt = torch.optim.Adam(self.q.parameters(), lr=LR, foreach=True)
        self.obs = np.zeros((CAPACITY, obs_dim), np.float32)
        self.next_obs = np.zeros((CAPACITY, obs_dim), np.float32)
        self.actions = np.zeros(CAPACITY, np.int64)
        self.rewards = np.zeros(CAPACITY, np.float32)
        self.terminals = np.zeros(CAPACITY, np.float32)
        self.size = self.pos = self.steps = self.updates = 0

    def act(self, obs):
        torch = self.torch
        eps = EPS_START + min(self.steps / EPS_STEPS, 1.0) * (EPS_END - EPS_START)
        with torch.no_grad():
            greedy = self.q(torch.as_tensor(obs, dtype=torch.float32)).argmax(-1).numpy()
        n = len(obs)
        explore = self.rng.random(n) < eps
        return np.where(explore, self.rng.integers(0, self.num_actions, n), greedy)

    def observe(self, obs, actions, rewards, next_obs, terminated, truncated):
        for i in range(len(obs)):
            p = self.pos
            self.obs[p], self.actions[p], self.rewards[p] = obs[i], actions[i], rewards[i]
            self.next_obs[p], self.terminals[p] = next_obs[i], float(terminated[i])
            self.pos = (p + 1) % CAPACITY
            self.size = min(self.size + 1, CAPACITY)
        self.steps += len(obs)

    def update(self):
        if self.steps < LEARNING_STARTS or self.size < BATCH:
            return
        torch = self.torch
        idx = self.rng.integers(0, self.size, BATCH)
        obs = torch.from_numpy(self.obs[idx])
        next_obs = torch.from_numpy(self.next_obs[idx])
        actions = torch.from_numpy(self.actions[idx])
        rewards = torch.from_numpy(self.rewards[idx])
        not_done = 1.0 - torch.from_numpy(self.terminals[idx])
        with torch.no_grad():
            next_a = self.q(next_obs).argmax(-1, keepdim=True)
            target = rewards + GAMMA * not_done * self.target(next_obs).gather(-1, next_a).squeeze(-1)
        q = self.q(obs).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        loss = torch.nn.functional.huber_loss(q, target)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.q.parameters(), MAX_GRAD_NORM, foreach=True)
        self.opt.step()
        self.updates += 1
        if self.updates % TARGET_UPDATE == 0:
            self.target.load_state_dict(self.q.state_dict())


# ------------------------------------------------------------------ rlgraph agents


def make_rlgraph_agent(backend_name: str, mode: str, envs, seed: int):
    """The rlgraph DQN agent with the benchmark's config on ``backend_name`` in ``mode``."""
    from rlgraph_core.agents.dqn import DQNAgent, DQNConfig
    from rlgraph_core.assemble import make_backend
    from rlgraph_core.spaces import from_gym

    cfg = DQNConfig(
        network={"hidden": HIDDEN, "activation": "relu"},
        double_q=True,
        dueling=False,
        loss_type="huber",
        batch_size=BATCH,
        learning_starts=LEARNING_STARTS,
        train_freq=1,
        gradient_steps=1,
        target_update_interval=TARGET_UPDATE,
        gamma=GAMMA,
        exploration={"type": "linear", "start": EPS_START, "end": EPS_END, "steps": EPS_STEPS},
        memory={"type": "replay", "capacity": CAPACITY},
        optimizer={"type": "adam", "learning_rate": LR, "max_grad_norm": MAX_GRAD_NORM},
    )
    backend = make_backend(backend_name, mode, device="cpu", seed=seed)
    return DQNAgent(
        cfg, from_gym(envs.single_observation_space), from_gym(envs.single_action_space), backend, seed=seed, num_envs=1
    )


def updates_of(agent_like) -> int:
    """Gradient steps done so far."""
    return agent_like.updates


def bench_row(row: str, warmup: int, steps: int, seed: int, time_limit: float) -> dict:
    """Build one row's learner, warm it up (untimed), time ``steps`` env steps."""
    envs = make_env(seed)
    timer = Timer()
    start = time.perf_counter()
    if row == "hand-written":
        learner = HandWrittenDQN(envs.single_observation_space.shape[0], int(envs.single_action_space.n), seed)
    else:
        backend_name, mode = row.split("-")
        learner = make_rlgraph_agent(backend_name, mode, envs, seed)
    obs, _ = drive(learner, envs, warmup, timer, seed)
    warm_s = time.perf_counter() - start
    timer.reset()
    updates0 = updates_of(learner)
    t0 = time.perf_counter()
    _, timed = drive(learner, envs, steps, timer, seed, obs, time_limit)
    elapsed = time.perf_counter() - t0
    envs.close()
    return {
        "row": row,
        "steps_per_s": timed / elapsed,
        "updates_per_s": (updates_of(learner) - updates0) / elapsed,
        "warmup_s": warm_s,
        "elapsed_s": elapsed,
        "timed_steps": timed,
        "ms": {k: 1000 * v / timed for k, v in timer.total.items()},
    }


def main(argv=None) -> int:
    """Parse options, run every row, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5000, help="timed env steps per row")
    parser.add_argument(
        "--warmup",
        type=int,
        default=LEARNING_STARTS + 200,
        help="untimed env steps first (covers compilation at the first updates)",
    )
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated subset of {', '.join(ROWS)}")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=30.0,
        help="stop timing a row after this many seconds (fewer steps are then timed)",
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="intra-op threads for both frameworks (0: each framework's default)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = sorted(set(rows) - set(ROWS))
    if unknown:
        parser.error(f"unknown rows {unknown}; choose from {', '.join(ROWS)}")

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
        if any(r.startswith("tf") for r in rows):
            import tensorflow as tf

            tf.config.threading.set_intra_op_parallelism_threads(args.threads)
            tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    if any(r.startswith("tf") for r in rows):
        import tensorflow as tf  # noqa: F401  (import outside the timed region)

    print(
        f"DQN on CartPole-v1: MLP {HIDDEN}, batch {BATCH}, train_freq 1, gradient_steps 1, "
        f"learning_starts {LEARNING_STARTS}; {args.warmup} warm-up + {args.steps} timed env steps per row; "
        f"torch {torch.__version__}, threads {torch.get_num_threads()}, {os.cpu_count()} CPUs",
        flush=True,
    )
    results = []
    for row in ["hand-written", *rows]:
        res = bench_row(row, args.warmup, args.steps, args.seed, args.time_limit)
        results.append(res)
        print(f"  done {row}: {res['steps_per_s']:.0f} env steps/s (warm-up {res['warmup_s']:.1f} s)", flush=True)
    base = results[0]["steps_per_s"]
    header = (
        f"{'learner':<14}{'steps':>6}{'env-steps/s':>12}{'updates/s':>11}{'vs hand':>9}{'warm-up s':>11}"
        f" | ms per env step: {'act':>6}{'env':>6}{'observe':>8}{'update':>8}"
    )
    print()
    print(header)
    print("-" * len(header))
    for r in results:
        ms = r["ms"]
        print(
            f"{r['row']:<14}{r['timed_steps']:>6}{r['steps_per_s']:>12.0f}{r['updates_per_s']:>11.0f}{r['steps_per_s'] / base:>9.2f}"
            f"{r['warmup_s']:>11.1f} | {'':>17}{ms['act']:>6.2f}{ms['env']:>6.2f}{ms['observe']:>8.2f}{ms['update']:>8.2f}"
        )
    import roofline  # the sibling benchmarks/roofline.py (imports torch, like the hand-written row)

    flops = roofline.update_flops("dqn", obs_dim=4, n_actions=2, hidden=HIDDEN, batch=BATCH)
    matmul = roofline.matmul_gflops((roofline.network_matmul(BATCH, HIDDEN), (2048, 2048, 2048)))
    print()
    for r in results:
        print(f"{r['row']:<14}{roofline.roofline_line(flops, r['updates_per_s'], matmul)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
