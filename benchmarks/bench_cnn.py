"""Nature-CNN DQN update: microseconds per gradient step, torch/tf x eager/static, vs hand-written torch.

Every row runs the same update in this one process: the Nature network of Mnih et al. (2015)
(conv 32x8x8/4, 64x4x4/2, 64x3x3/1, dense 512, 6 Q-values) on uint8 84x84x4 frames scaled by
1/255 inside the graph, double DQN with the Huber loss, Adam (lr 1e-4, global-norm clip 10), one
batch of 32 transitions per gradient step (fixed random frames: the replay's sampling cost is not
part of the update). ``--warmup`` steps (default 20: ``torch.compile`` / ``tf.function`` + XLA
compile in the first ones) run untimed, then ``--steps`` (default 100) are timed; the median of
``--repeats`` timed blocks is shown.

The baseline ``hand`` is a minimal hand-written PyTorch double-DQN step on the same network
(``nn.Conv2d`` on NCHW input, the form Stable-Baselines3's ``NatureCNN`` uses) with the same
optimizer and loss; ``sb3`` (when stable-baselines3 is installed) is SB3's DQN ``CnnPolicy``
``train(gradient_steps)`` on a filled replay buffer, which includes its replay sampling.

The roofline line counts the convolution and dense FLOPs of one step from the shapes
(``2 * B * H' * W' * kh * kw * C_in * C_out`` per conv forward; backward twice the forward;
the online net forward+backward on obs, the target and online nets forward on next_obs).
Run::

    python benchmarks/bench_cnn.py [--rows torch-eager,tf-static,hand,sb3] [--threads 1] [--device cpu]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402

BATCH, ACTIONS, FRAME = 32, 6, (84, 84, 4)
LR, MAX_GRAD_NORM, GAMMA = 1e-4, 10.0, 0.99
#: (filters, kernel, stride) of the Nature convolutions, then the dense layer
CONVS, DENSE = [(32, 8, 4), (64, 4, 2), (64, 3, 1)], 512
ROWS = ("torch-eager", "torch-static", "tf-eager", "tf-static", "hand", "sb3")


def nature_forward_flops(batch: int = BATCH) -> int:
    """Forward FLOPs of the Nature network on ``batch`` 84x84x4 frames (convolutions and dense layers)."""
    h, c, flops = FRAME[0], FRAME[2], 0
    for filters, k, s in CONVS:
        h = (h - k) // s + 1
        flops += 2 * batch * h * h * k * k * c * filters
        c = filters
    flops += 2 * batch * (h * h * c) * DENSE + 2 * batch * DENSE * ACTIONS
    return flops


def update_flops(batch: int = BATCH) -> int:
    """One double-DQN step: online fwd+bwd (3x forward) on obs, target and online fwd on next_obs."""
    return 5 * nature_forward_flops(batch)


def make_batch(seed: int = 0) -> dict:
    """One batch of random transitions with uint8 frames."""
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.integers(0, 256, (BATCH, *FRAME), dtype=np.uint8),
        "actions": rng.integers(0, ACTIONS, BATCH),
        "rewards": rng.standard_normal(BATCH).astype(np.float32),
        "next_obs": rng.integers(0, 256, (BATCH, *FRAME), dtype=np.uint8),
        "terminals": rng.random(BATCH) < 0.05,
    }


def rlgraph_step(row: str, device: str):
    """``step(batch)``: one rlgraph DQN gradient step on the backend and mode of ``row``."""
    from rlgraph_core.agents.dqn import DQNAgent, DQNConfig
    from rlgraph_core.assemble import make_backend
    from rlgraph_core.components.cnn import CNNSettings
    from rlgraph_core.spaces import Discrete, IntBox

    name, mode = row.split("-")
    cfg = DQNConfig(
        network=CNNSettings(preset="nature"),
        batch_size=BATCH,
        double_q=True,
        loss_type="huber",
        memory={"type": "replay", "capacity": 1000},
        optimizer={"type": "adam", "learning_rate": LR, "max_grad_norm": MAX_GRAD_NORM},
    )
    obs_space = IntBox(0, 255, shape=FRAME, dtype=np.uint8)
    agent = DQNAgent(cfg, obs_space, Discrete(ACTIONS), make_backend(name, mode, device=device, seed=0), seed=0)
    return lambda batch: agent.update(batch)


def hand_step(device: str):
    """``step(batch)``: a hand-written PyTorch double-DQN step on the Nature network."""
    import torch
    from torch import nn

    dev = torch.device("cuda" if device in ("auto", "cuda") and torch.cuda.is_available() else "cpu")

    def net():
        layers, c, h = [], FRAME[2], FRAME[0]
        for filters, k, s in CONVS:
            layers += [nn.Conv2d(c, filters, k, s), nn.ReLU()]
            c, h = filters, (h - k) // s + 1
        return nn.Sequential(*layers, nn.Flatten(), nn.Linear(c * h * h, DENSE), nn.ReLU(), nn.Linear(DENSE, ACTIONS))

    online, target = net().to(dev), net().to(dev)
    target.load_state_dict(online.state_dict())
    opt = torch.optim.Adam(online.parameters(), lr=LR)

    def step(b):
        obs = torch.as_tensor(b["obs"], device=dev).permute(0, 3, 1, 2).float() / 255.0
        nxt = torch.as_tensor(b["next_obs"], device=dev).permute(0, 3, 1, 2).float() / 255.0
        act = torch.as_tensor(b["actions"], device=dev)
        rew = torch.as_tensor(b["rewards"], device=dev)
        done = torch.as_tensor(b["terminals"], device=dev).float()
        with torch.no_grad():
            best = online(nxt).argmax(-1, keepdim=True)
            y = rew + GAMMA * (1 - done) * target(nxt).gather(-1, best).squeeze(-1)
        q = online(obs).gather(-1, act.unsqueeze(-1)).squeeze(-1)
        loss = nn.functional.smooth_l1_loss(q, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(online.parameters(), MAX_GRAD_NORM)
        opt.step()
        return loss.detach()

    return step


def sb3_step(device: str):
    """``step(batch)``: Stable-Baselines3 DQN ``CnnPolicy`` train(1 step) on a filled buffer, or None."""
    try:
        import gymnasium as gym
        from stable_baselines3 import DQN
    except ImportError:
        return None

    class Frames(gym.Env):
        observation_space = gym.spaces.Box(0, 255, FRAME, np.uint8)
        action_space = gym.spaces.Discrete(ACTIONS)

        def reset(self, *, seed=None, options=None):
            return self.observation_space.sample(), {}

        def step(self, action):
            return self.observation_space.sample(), 0.0, False, False, {}

    model = DQN(
        "CnnPolicy",
        Frames(),
        learning_rate=LR,
        buffer_size=1000,
        batch_size=BATCH,
        max_grad_norm=MAX_GRAD_NORM,
        learning_starts=0,
        optimize_memory_usage=False,
        device="cuda" if device in ("auto", "cuda") else "cpu",
        policy_kwargs={"normalize_images": True},
    )
    model.learn(total_timesteps=BATCH * 2)  # fills the buffer and builds everything
    return lambda batch: model.train(gradient_steps=1, batch_size=BATCH)


def sync(row: str):
    """Wait for queued device work (CUDA runs asynchronously) so timings are complete."""
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()
    except ImportError:
        pass


def measure(step, warmup: int, steps: int, repeats: int, row: str) -> tuple[float, float, float]:
    """``(seconds of warm-up, median wall microseconds per step, median process-CPU microseconds per
    step)`` over the timed blocks (CPU time beside wall time: on a loaded machine the wall time
    includes waiting for a core, the CPU time does not)."""
    batch = make_batch()
    t0 = time.perf_counter()
    for _ in range(warmup):
        step(batch)
    sync(row)
    warm = time.perf_counter() - t0
    blocks, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        for _ in range(steps):
            out = step(batch)
        del out
        sync(row)
        blocks.append((time.perf_counter() - t) / steps * 1e6)
        cpu.append((time.process_time() - c) / steps * 1e6)
    return warm, statistics.median(blocks), statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default=",".join(ROWS))
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per framework (0: default)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    args = parser.parse_args()
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    if args.threads:
        os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
        try:
            import torch

            torch.set_num_threads(args.threads)
        except ImportError:
            pass
        try:
            import tensorflow as tf

            tf.config.threading.set_intra_op_parallelism_threads(args.threads)
            tf.config.threading.set_inter_op_parallelism_threads(1)
        except (ImportError, RuntimeError):
            pass
    flops = update_flops()
    print(
        f"Nature-CNN DQN update, batch {BATCH}, uint8 84x84x4, {flops / 1e9:.2f} GFLOP per step, device {args.device}"
    )
    print(f"{'row':<14}{'us/step':>10}{'cpu us':>10}{'steps/s':>10}{'GFLOP/s':>10}{'warm-up s':>11}")
    results = {}
    for row in rows:
        if row == "hand":
            step = hand_step(args.device)
        elif row == "sb3":
            step = sb3_step(args.device)
            if step is None:
                print(f"{row:<14}skipped: stable-baselines3 is not installed (pip install -e 'rlgraph_core[bench]')")
                continue
        else:
            step = rlgraph_step(row, args.device)
        warm, us, cpu_us = measure(step, args.warmup, args.steps, args.repeats, row)
        results[row] = us
        print(f"{row:<14}{us:>10.0f}{cpu_us:>10.0f}{1e6 / us:>10.1f}{flops / us / 1e3:>10.1f}{warm:>11.1f}", flush=True)
    for base in ("sb3", "hand"):
        if base in results:
            best = min((us, r) for r, us in results.items() if r not in ("sb3", "hand"))
            print(f"best rlgraph row {best[1]}: {results[base] / best[0]:.2f}x the speed of {base}")


if __name__ == "__main__":
    main()
