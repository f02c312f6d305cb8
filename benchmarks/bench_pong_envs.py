"""Pong env throughput by vectorization: gymnasium sync vs async vs EnvPool, in the same run.

Each case makes ``ALE/Pong-v5`` through rlgraph's own env factory (:func:`rlgraph_core.envs.make_vector_env`,
so exactly what a run with ``env.vectorization`` set to it steps) with the Atari preprocessing of
the shipped Pong configs (no-op starts, frame skip 4, 84x84 grayscale, reward clipping, a stack
of 4: uint8 [N, 84, 84, 4]), steps it with random actions (no agent: the env side alone), and
reports env steps/s and emulator frames/s (x frame skip 4), with the CPU seconds spent (this
process plus the async workers, which are reaped before they are counted) beside the wall time:
on a loaded machine the wall time includes waiting for a core, CPU time does not.

    python benchmarks/bench_pong_envs.py [--envs 4] [--steps 500] [--cases sync,async,envpool]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

WRAPPERS = [
    {"type": "atari_preprocessing", "noop_max": 30, "frame_skip": 4, "screen_size": 84},
    {"type": "clip_reward"},
    {"type": "frame_stack", "stack_size": 4},
]


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and its reaped children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run_case(vectorization: str, num_envs: int, steps: int, seed: int = 0) -> dict:
    """Make, reset and step the vector env ``steps`` times; times exclude making it."""
    from rlgraph_core.config.run import validate_config
    from rlgraph_core.envs import make_vector_env
    from rlgraph_core.plugins import get_plugin_manager

    pm = get_plugin_manager()
    raw = {
        "agent": {"type": "dqn"},
        "env": {
            "id": "ALE/Pong-v5",
            "num_envs": num_envs,
            "vectorization": vectorization,
            "kwargs": {"frameskip": 1, "repeat_action_probability": 0.0},
            "wrappers": WRAPPERS,
        },
    }
    config = validate_config(raw, pm)
    from rlgraph_core.assemble import assemble

    assembly = assemble(config, pm)
    envs = make_vector_env(config.env, seed, wrappers=assembly.env_wrappers)
    rng = np.random.default_rng(seed)
    obs, _ = envs.reset(seed=seed)
    assert obs.shape == (num_envs, 84, 84, 4) and obs.dtype == np.uint8, (obs.shape, obs.dtype)
    cpu0, t0 = cpu_seconds(), time.perf_counter()
    for _ in range(steps):
        envs.step(rng.integers(0, 6, num_envs))
    wall = time.perf_counter() - t0
    envs.close()
    cpu = cpu_seconds() - cpu0
    n = steps * num_envs
    return {"case": vectorization, "env_steps": n, "wall_s": wall, "cpu_s": cpu, "steps_per_s": n / wall}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--envs", type=int, default=4)
    p.add_argument("--steps", type=int, default=500, help="vector steps per case")
    p.add_argument("--cases", default="sync,async,envpool")
    args = p.parse_args()
    print(f"ALE/Pong-v5, {args.envs} envs, {args.steps} vector steps, uint8 84x84x4, frame skip 4")
    print(f"{'case':<10}{'env steps/s':>13}{'frames/s':>11}{'wall s':>9}{'cpu s':>8}")
    rows = {}
    for case in [c.strip() for c in args.cases.split(",") if c.strip()]:
        try:
            r = run_case(case, args.envs, args.steps)
        except Exception as exc:  # a missing extra (envpool): reported, the other cases still run
            print(f"{case:<10}skipped: {type(exc).__name__}: {str(exc)[:120]}")
            continue
        rows[case] = r
        print(
            f"{case:<10}{r['steps_per_s']:>13.0f}{4 * r['steps_per_s']:>11.0f}{r['wall_s']:>9.1f}{r['cpu_s']:>8.1f}",
            flush=True,
        )
    if "sync" in rows:
        for case, r in rows.items():
            if case != "sync":
                print(f"{case}: {r['steps_per_s'] / rows['sync']['steps_per_s']:.2f}x sync (wall)")


if __name__ == "__main__":
    main()
