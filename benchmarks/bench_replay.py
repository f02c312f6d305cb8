"""Benchmark PrioritizedReplay against a classic per-element segment-tree design.

Fills a PrioritizedReplay with CartPole-shaped records (obs float32[4], action int64, reward,
next_obs, terminal, discount), then times insert, sample and update_priorities. The baseline,
defined below, is the classic non-vectorised design: sum and min segment trees in Python lists,
updated and searched one element at a time in Python loops. It stores records in the same numpy
arrays and gathers samples with the same vectorised indexing, so the comparison isolates the
tree work.

``--pong`` instead measures replay bytes per transition for Pong (ALE/Pong-v5 through the
``atari_preprocessing`` and ``frame_stack`` wrappers: 84x84 grayscale, stack of 4, needs
``rlgraph-core[atari]``): random-action transitions from a vector env, folded by the agents'
n-step assembler, fill a ``PrioritizedReplay`` past its capacity (so the ring has wrapped and
frames have been freed and reused), which then reports the bytes it holds per record, beside
naive float32 obs + next_obs (about 225 KB), the same uint8 stored as given (``frames: off``) and
the memory estimator's figure; plus insert and sample rates of both. Run:

    PYTHONPATH=rlgraph_core/src python benchmarks/bench_replay.py [--capacity N] [--batch B]
    python benchmarks/bench_replay.py --pong [--pong-steps 3000] [--pong-capacity 4000]
"""

from __future__ import annotations

import argparse
import operator
import time
from typing import Callable

import numpy as np

from rlgraph_core.memories import PrioritizedReplay

ALPHA, BETA, EPSILON = 0.6, 0.4, 1e-6


# ---------------------------------------------------------------------------- baseline


class LoopSegmentTree:
    """Classic segment tree: a Python list, one element per update or query, loops to the root."""

    def __init__(self, capacity: int, op: Callable[[float, float], float], neutral: float) -> None:
        self.size = 1
        while self.size < capacity:
            self.size *= 2
        self.op = op
        self.value = [neutral] * (2 * self.size)

    def build(self, leaves: np.ndarray, reduce: np.ufunc) -> None:
        """Bulk-initialise from leaf values (setup only; vectorised so filling 2^20 is quick)."""
        tree = np.array(self.value)
        tree[self.size : self.size + leaves.size] = leaves
        node = self.size
        while node > 1:
            node //= 2
            tree[node : 2 * node] = reduce(tree[2 * node : 4 * node : 2], tree[2 * node + 1 : 4 * node : 2])
        self.value = tree.tolist()

    def __setitem__(self, idx: int, val: float) -> None:
        node = idx + self.size
        value, op = self.value, self.op
        value[node] = val
        node //= 2
        while node >= 1:
            value[node] = op(value[2 * node], value[2 * node + 1])
            node //= 2

    def __getitem__(self, idx: int) -> float:
        return self.value[idx + self.size]

    def root(self) -> float:
        return self.value[1]

    def find_prefixsum_idx(self, prefix: float) -> int:
        value, node = self.value, 1
        while node < self.size:
            left = value[2 * node]
            if left > prefix:
                node = 2 * node
            else:
                prefix -= left
                node = 2 * node + 1
        return node - self.size


class LoopPrioritizedReplay:
    """Baseline PER: same storage as the vectorised one, trees touched element by element."""

    def __init__(self, capacity: int, seed: int) -> None:
        self.capacity = capacity
        self.storage: dict[str, np.ndarray] = {}
        self.size = 0
        self.next_index = 0
        self.max_priority = 1.0
        self.sum_tree = LoopSegmentTree(capacity, operator.add, 0.0)
        self.min_tree = LoopSegmentTree(capacity, min, float("inf"))
        self.rng = np.random.default_rng(seed)

    def fill(self, records: dict[str, np.ndarray], stored_priorities: np.ndarray) -> None:
        """Setup only: take a full memory's worth of records and stored priorities at once."""
        self.storage = {k: v.copy() for k, v in records.items()}
        self.size = self.capacity
        self.sum_tree.build(stored_priorities, np.add)
        self.min_tree.build(stored_priorities, np.minimum)
        self.max_priority = float(stored_priorities.max())

    def insert(self, batch: dict[str, np.ndarray]) -> None:
        n = next(iter(batch.values())).shape[0]
        slots = (self.next_index + np.arange(n)) % self.capacity
        for name, store in self.storage.items():
            store[slots] = batch[name]
        priority = self.max_priority
        for slot in slots.tolist():
            self.sum_tree[slot] = priority
            self.min_tree[slot] = priority
        self.next_index = (self.next_index + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(self, batch_size: int) -> dict[str, np.ndarray]:
        total = self.sum_tree.root()
        segment = total / batch_size
        draws = self.rng.random(batch_size).tolist()
        indices = [self.sum_tree.find_prefixsum_idx((i + u) * segment) for i, u in enumerate(draws)]
        p_min = self.min_tree.root() / total
        max_weight = (p_min * self.size) ** -BETA
        weights = [((self.sum_tree[i] / total) * self.size) ** -BETA / max_weight for i in indices]
        idx = np.array(indices, dtype=np.int64)
        out = {name: store[idx] for name, store in self.storage.items()}
        out["indices"] = idx
        out["weights"] = np.array(weights, dtype=np.float32)
        return out

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        for idx, td in zip(indices.tolist(), priorities.tolist()):
            priority = (td + EPSILON) ** ALPHA
            self.sum_tree[idx] = priority
            self.min_tree[idx] = priority
            self.max_priority = max(self.max_priority, priority)


# ---------------------------------------------------------------------------- benchmark


def cartpole_records(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """Random records with CartPole-v1 shapes and dtypes."""
    return {
        "obs": rng.normal(size=(n, 4)).astype(np.float32),
        "actions": rng.integers(0, 2, size=n).astype(np.int64),
        "rewards": np.ones(n, dtype=np.float32),
        "next_obs": rng.normal(size=(n, 4)).astype(np.float32),
        "terminals": rng.random(n) < 0.02,
        "discounts": np.full(n, 0.99, dtype=np.float32),
    }


def time_calls(fn: Callable[[int], object], iters: int) -> float:
    """Seconds per call of ``fn(i)`` averaged over ``iters`` calls, after one warm-up call."""
    fn(0)
    start = time.perf_counter()
    for i in range(iters):
        fn(i)
    return (time.perf_counter() - start) / iters


def measure(memory, chunks: dict[int, list], update_args: list, batch: int, iters: int) -> dict:
    """Throughputs (records/s for insert, calls/s otherwise) for one memory implementation."""
    results = {}
    for size, pool in chunks.items():
        per_call = time_calls(lambda i: memory.insert(pool[i % len(pool)]), iters)
        results[f"insert chunk={size} (records/s)"] = size / per_call
    results[f"sample({batch}) (calls/s)"] = 1.0 / time_calls(lambda i: memory.sample(batch), iters)
    results[f"update_priorities({batch}) (calls/s)"] = 1.0 / time_calls(
        lambda i: memory.update_priorities(*update_args[i % len(update_args)]), iters
    )
    return results


def pong_transitions(steps: int, num_envs: int, n_step: int, seed: int) -> list[dict]:
    """n-step batches of random play in ALE/Pong-v5 (84x84 grayscale, stack of 4, uint8)."""
    from rlgraph_core.config.sections import EnvConfig
    from rlgraph_core.config.wrappers import resolve_wrappers
    from rlgraph_core.envs import make_vector_env
    from rlgraph_core.execution.local import true_next_obs
    from rlgraph_core.memories import NStepAssembler

    env_cfg = EnvConfig(
        id="ALE/Pong-v5",
        num_envs=num_envs,
        kwargs={"frameskip": 1},
        wrappers=[{"type": "atari_preprocessing"}, {"type": "frame_stack", "stack_size": 4}],
    )
    envs = make_vector_env(env_cfg, seed, wrappers=resolve_wrappers(None, env_cfg.wrappers))
    nstep = NStepAssembler(num_envs, n_step, 0.99)
    rng = np.random.default_rng(seed)
    obs, _ = envs.reset(seed=seed)
    out = []
    for _ in range(steps):
        actions = rng.integers(0, envs.single_action_space.n, num_envs)
        next_obs, rewards, term, trunc, infos = envs.step(actions)
        batch = nstep.add(obs, actions, rewards, true_next_obs(next_obs, infos), term, trunc)
        if batch is not None:
            out.append(batch)
        obs = next_obs
    envs.close()
    return out


def pong_main(args) -> None:
    """Bytes per Pong transition: shared frames vs uint8 as given vs naive float32."""
    import gymnasium as gym

    from rlgraph_core.memories.sizing import record_bytes

    start = time.perf_counter()
    batches = pong_transitions(args.pong_steps, args.pong_envs, args.n_step, args.seed)
    total = sum(len(b["rewards"]) for b in batches)
    print(
        f"Pong replay bytes: {total} transitions ({args.pong_envs} envs x {args.pong_steps} steps, n_step="
        f"{args.n_step}) into capacity {args.pong_capacity}, collected in {time.perf_counter() - start:.1f} s"
    )
    obs_shape = batches[0]["obs"].shape[1:]
    naive = 2 * 4 * int(np.prod(obs_shape)) + 8 + 4 + 1 + 4
    rows = []
    for frames in ("auto", "off"):
        memory = PrioritizedReplay(args.pong_capacity, seed=args.seed, frames=frames)
        t0 = time.perf_counter()
        for b in batches:
            memory.insert(b)
        insert_rate = total / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        for _ in range(args.iters):
            memory.sample(32)
        sample_rate = args.iters / (time.perf_counter() - t0)
        per_record = memory.nbytes() / len(memory)
        live = per_record
        if frames == "auto":
            store = memory.frame_store("obs")
            free_rows = len(store.pool) - len(store)
            live = (memory.nbytes() - free_rows * store.frame_bytes) / len(memory)
        rows.append((f"uint8, frames: {frames}", per_record, live, insert_rate, sample_rate))
    image = gym.spaces.Box(0, 255, obs_shape, np.uint8)
    estimate = record_bytes(image, gym.spaces.Discrete(6), frames="auto", frame_stack=obs_shape[-1])
    print(f"observation {obs_shape} uint8; the memory estimator says {estimate:,} bytes per record\n")
    print(f"{'storage':<22} {'bytes/record':>13} {'live bytes/rec':>15} {'insert rec/s':>13} {'sample(32)/s':>13}")
    print(f"{'float32 obs+next_obs':<22} {naive:>13,} {naive:>15,} {'':>13} {'':>13}")
    for name, per_record, live, insert_rate, sample_rate in rows:
        print(f"{name:<22} {per_record:>13,.0f} {live:>15,.0f} {insert_rate:>13,.0f} {sample_rate:>13,.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pong", action="store_true", help="measure bytes per Pong transition instead")
    parser.add_argument("--pong-steps", type=int, default=3000, help="--pong: vector-env steps")
    parser.add_argument("--pong-envs", type=int, default=2, help="--pong: envs")
    parser.add_argument("--pong-capacity", type=int, default=4000, help="--pong: memory capacity")
    parser.add_argument("--n-step", type=int, default=3, help="--pong: n-step folding")
    parser.add_argument("--capacity", type=int, default=2**20, help="memory capacity (records)")
    parser.add_argument("--batch", type=int, default=512, help="sample / update batch size")
    parser.add_argument("--iters", type=int, default=200, help="timed calls per operation")
    parser.add_argument("--chunks", default="8,512", help="comma-separated insert chunk sizes")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.pong:
        pong_main(args)
        return
    chunk_sizes = [int(c) for c in args.chunks.split(",")]

    rng = np.random.default_rng(args.seed)
    fill = cartpole_records(rng, args.capacity)
    fill_td = rng.exponential(size=args.capacity)
    pool_len = 16
    chunks = {s: [cartpole_records(rng, s) for _ in range(pool_len)] for s in chunk_sizes}
    update_args = [
        (rng.integers(0, args.capacity, size=args.batch), rng.exponential(size=args.batch)) for _ in range(pool_len)
    ]

    start = time.perf_counter()
    fast = PrioritizedReplay(args.capacity, alpha=ALPHA, beta=BETA, epsilon=EPSILON, seed=args.seed)
    step = 1 << 16
    for lo in range(0, args.capacity, step):
        fast.insert({k: v[lo : lo + step] for k, v in fill.items()})
    fast.update_priorities(np.arange(args.capacity), fill_td)
    fill_seconds = time.perf_counter() - start

    slow = LoopPrioritizedReplay(args.capacity, seed=args.seed)
    slow.fill(fill, (fill_td + EPSILON) ** ALPHA)

    print(
        f"PrioritizedReplay benchmark: capacity={args.capacity}, batch={args.batch}, "
        f"iters={args.iters}, numpy {np.__version__}"
    )
    print(f"vectorised fill of {args.capacity} records + priority update: {fill_seconds:.2f} s\n")
    fast_results = measure(fast, chunks, update_args, args.batch, args.iters)
    slow_results = measure(slow, chunks, update_args, args.batch, args.iters)

    name_w = max(len(k) for k in fast_results)
    print(f"{'operation':<{name_w}}  {'vectorised':>12}  {'baseline':>12}  {'speed-up':>8}")
    print("-" * (name_w + 40))
    for key, fast_value in fast_results.items():
        slow_value = slow_results[key]
        print(f"{key:<{name_w}}  {fast_value:>12,.0f}  {slow_value:>12,.0f}  {fast_value / slow_value:>7.1f}x")


if __name__ == "__main__":
    main()
