"""Per-env-step overhead of the acting path: ``act -> envs.step -> observe`` without updates.

For PPO (``configs/ppo_cartpole.yaml``: 8 CartPole envs, 64-64 tanh), DQN
(``configs/dqn_cartpole.yaml``: 1 env, 256-256 relu) and SAC (``configs/sac_pendulum.yaml``:
1 Pendulum env, 256-256 relu) on every installed backend x mode, this script times, in
microseconds per env step (a vector step's time divided by the number of envs):

* **env**: the bare ``envs.step`` of the same gymnasium vector env with precomputed actions
  (the baseline, measured in the same run, interleaved with the agent's blocks);
* **act**: ``agent.act(obs)``;
* **observe**: ``agent.observe(...)`` (n-step folding and replay insert, or the rollout add);
* **loop**: the whole body of the local executor's loop without ``agent.update``: act, env
  step, final-observation swap, observe, episode bookkeeping and ``RunRecorder.step``;
* **overhead**: ``loop - env``, what rlgraph adds to every env step.

The agents are put where they spend most of training: DQN past its epsilon schedule (epsilon
0.04, so the Q-network runs) and SAC past ``learning_starts`` (the policy samples); the PPO
rollout buffer is emptied whenever it fills (outside the timed calls). The static rows also
time the agent's ``act`` inference function compiled against the same function run eagerly
(``act fn compiled/eager``, µs per call), which is what decides whether a backend compiles
acting in static mode (the torch backend does not: see ``TorchBackend.function``).

``--breakdown`` instead times the real env loop (``EnvRunner.step``, ``agent.update``, the run
recorder's counting and ``RunRecorder.step``, as ``LocalExecutor`` runs them, updates included)
and splits each env step into: env step (the vector env's own work), checks (the non-finite
checks of observations and rewards: the functions of ``rlgraph_core.env_checks`` that
``CheckedEnv`` and the sync vector env's step call; the inline type/shape comparisons of the
latter count as env step), act, observe, update, callbacks, recorder, runner (the rest:
final-observation swap, episode bookkeeping), beside the bare ``envs.step`` of the same vector
env with precomputed actions, in interleaved blocks. It measures thread CPU time by default
(``--clock wall`` for wall time): on a machine shared with other jobs CPU time moves far less.
A tree without ``EnvRunner`` (before it existed) runs the executor loop of its day instead.

``--baseline-tree DIR`` runs the same measurements, alternating in child processes, with the
rlgraph packages of another checkout (e.g. ``git archive main | tar -x -C /tmp/base``) first on
the import path, and prints both tables: before/after under the same machine load. Run:

    python benchmarks/bench_act.py                           # every installed backend x mode
    python benchmarks/bench_act.py --variants torch-eager,tf-eager --steps 3000
    python benchmarks/bench_act.py --baseline-tree /tmp/base --repeats 3
    python benchmarks/bench_act.py --breakdown --algos ppo --variants torch-eager,torch-static
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from importlib.util import find_spec
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {
    "ppo": ROOT / "configs" / "ppo_cartpole.yaml",
    "dqn": ROOT / "configs" / "dqn_cartpole.yaml",
    "sac": ROOT / "configs" / "sac_pendulum.yaml",
}
#: env steps to put each agent at before timing (past DQN's epsilon decay, SAC's random warm-up)
START_TIMESTEPS = {"ppo": 0, "dqn": 20_000, "sac": 1_000}
COLUMNS = ("env", "act", "observe", "loop", "overhead")
#: the parts of one env step in ``--breakdown`` (``runner``: what the loop adds around them)
BREAKDOWN = ("env step", "checks", "act", "observe", "update", "callbacks", "recorder", "runner", "total", "bare env")


def installed_variants() -> list[str]:
    """``backend-mode`` names of the installed backends (every registered backend plugin)."""
    from rlgraph_core.plugins import get_plugin_manager

    return [f"{name}-{mode}" for name in get_plugin_manager().names("backends") for mode in ("eager", "static")]


def make_parts(algo: str, backend: str, mode: str, seed: int):
    """``(assembly, envs, agent, recorder)`` for one algorithm on one backend and mode."""
    from rlgraph_core.assemble import assemble
    from rlgraph_core.config.run import apply_overrides, load_config_file, validate_config
    from rlgraph_core.execution.recorder import RunRecorder
    from rlgraph_core.plugins import get_plugin_manager

    overrides = [
        f"train.backend={backend}",
        f"train.mode={mode}",
        f"train.seed={seed}",
        "train.device=cpu",
        "train.progress_bar=false",
        "train.loggers=[]",
        "train.total_timesteps=1000000000",
        "train.eval_interval=1000000000",
        "train.log_interval=1000000000",
    ]
    config = validate_config(apply_overrides(load_config_file(CONFIGS[algo]), overrides))
    parts = assemble(config, get_plugin_manager())
    envs = parts.make_vector_env(seed)
    agent = parts.make_agent(envs.single_observation_space, envs.single_action_space, num_envs=config.env.num_envs)
    agent.timesteps = START_TIMESTEPS[algo]
    out_dir = tempfile.mkdtemp(prefix="bench_act_")
    recorder = RunRecorder(config, out_dir, assembly=parts, agent=agent)
    return parts, envs, agent, recorder


def _free_buffer(agent) -> None:
    """Empty an on-policy rollout buffer that filled up (no update runs in this benchmark)."""
    buffer = getattr(agent, "buffer", None)
    if buffer is not None and buffer.full:
        buffer.reset()


def time_bare_env(envs, actions: list, steps: int) -> float:
    """Seconds of ``steps`` bare vector steps with precomputed actions."""
    t0 = time.perf_counter()
    for i in range(steps):
        envs.step(actions[i % len(actions)])
    return time.perf_counter() - t0


def time_parts(agent, envs, obs, steps: int):
    """``(act s, observe s, obs)`` of ``steps`` act/step/observe iterations, each part timed alone."""
    from rlgraph_core.execution.local import true_next_obs

    clock = time.perf_counter
    t_act = t_obs = 0.0
    for _ in range(steps):
        _free_buffer(agent)
        t0 = clock()
        actions = agent.act(obs)
        t1 = clock()
        next_obs, rewards, terminated, truncated, infos = envs.step(actions)
        final = true_next_obs(next_obs, infos)
        t2 = clock()
        agent.observe(obs, actions, rewards, final, terminated, truncated)
        t3 = clock()
        t_act += t1 - t0
        t_obs += t3 - t2
        obs = next_obs
    return t_act, t_obs, obs


def time_loop(agent, envs, recorder, obs, steps: int):
    """``(s, obs)`` of ``steps`` iterations of the local executor's loop body minus ``update``."""
    from rlgraph_core.execution.local import true_next_obs

    n = envs.num_envs
    ep_returns = np.zeros(n)
    elapsed = 0.0
    for _ in range(steps):
        _free_buffer(agent)
        t0 = time.perf_counter()
        # --- the body of LocalExecutor._steps, without agent.update() ---
        actions = agent.act(obs)
        next_obs, rewards, terminated, truncated, infos = envs.step(actions)
        agent.observe(obs, actions, rewards, true_next_obs(next_obs, infos), terminated, truncated)
        ep_returns += rewards
        done = np.logical_or(terminated, truncated)
        if done.any():
            recorder.add_episode_returns(ep_returns[done].tolist())
            ep_returns[done] = 0.0
        obs = next_obs
        recorder.step(n)
        elapsed += time.perf_counter() - t0
    return elapsed, obs


def compiled_vs_eager_act(parts, agent, obs, calls: int) -> tuple[float, float] | None:
    """``(compiled µs, eager µs)`` per call of the agent's ``act`` inference function.

    Both sides wrap the same raw API method, with a static and an eager instance of the agent's
    backend (the static one asked to compile inference functions where it has that switch, as
    the torch backend does), so both run on the same weights and inputs. None for eager agents.
    """
    backend = parts.backend
    if backend.mode != "static":
        return None
    kind = type(backend)
    force = {"compile_inference": True} if hasattr(backend, "compile_inference") else {}
    graph = agent.graph
    raw = types.MethodType(type(graph).api_methods()["act"], graph)
    compiled = kind(mode="static", device="cpu", **force).function(raw)
    eager = kind(mode="eager", device="cpu").function(raw)
    args = _act_inputs(agent, obs)
    for fn in (compiled, eager):
        for _ in range(20):
            fn(*args)
    rounds = {"compiled": [], "eager": []}
    for _ in range(5):
        for name, fn in (("compiled", compiled), ("eager", eager)):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn(*args)
            rounds[name].append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(rounds["compiled"]), statistics.median(rounds["eager"])


def _act_inputs(agent, obs) -> tuple:
    """Tensors for ``agent.graph.act`` as the agent's own ``act`` builds them."""
    to_t = agent.backend.to_tensor
    obs = np.asarray(obs, np.float32)
    n = len(obs)
    if hasattr(agent, "exploration"):  # DQN: obs, noise, epsilon
        noise = np.asarray(agent.exploration.draw_noise(np.random.default_rng(0), n), np.float32)
        return to_t(obs), to_t(noise), to_t(np.float32(0.04))
    dim = getattr(agent, "num_actions", None) if getattr(agent, "discrete", False) else agent.action_dim
    noise = np.random.default_rng(0).random((n, dim), dtype=np.float32)
    return to_t(obs), to_t(noise)


def measure(algo: str, variant: str, steps: int, block: int, seed: int) -> dict:
    """Median per-env-step µs of every column for one algorithm and variant."""
    backend, mode = variant.split("-")
    parts, envs, agent, recorder = make_parts(algo, backend, mode, seed)
    try:
        n = envs.num_envs
        obs, _ = envs.reset(seed=seed)
        rng = np.random.default_rng(seed)
        sample_actions = []
        for _ in range(64):
            envs.action_space.seed(int(rng.integers(1 << 31)))
            sample_actions.append(envs.action_space.sample())
        # warm-up: traces / compiles, first-call allocations (replay storage ...)
        _, _, obs = time_parts(agent, envs, obs, 50)
        _, obs = time_loop(agent, envs, recorder, obs, 50)
        samples: dict[str, list[float]] = {c: [] for c in ("env", "act", "observe", "loop")}
        done_steps = 0
        while done_steps < steps:
            k = min(block, steps - done_steps)
            samples["env"].append(time_bare_env(envs, sample_actions, k) / (k * n))
            obs, _ = envs.reset(seed=seed + done_steps)
            t_act, t_obs, obs = time_parts(agent, envs, obs, k)
            samples["act"].append(t_act / (k * n))
            samples["observe"].append(t_obs / (k * n))
            t_loop, obs = time_loop(agent, envs, recorder, obs, k)
            samples["loop"].append(t_loop / (k * n))
            done_steps += k
        row = {c: statistics.median(v) * 1e6 for c, v in samples.items()}
        row["overhead"] = row["loop"] - row["env"]
        cmp = compiled_vs_eager_act(parts, agent, obs, 300)
        if cmp is not None:
            row["act_fn_static_us"], row["act_fn_eager_us"] = cmp
        row["num_envs"] = n
        return row
    finally:
        envs.close()
        recorder.eval_env.close()
        shutil.rmtree(recorder.out_dir, ignore_errors=True)


class _Timers:
    """Accumulated seconds per part; ``wrap`` times a callable into one part."""

    def __init__(self, clock):
        self.clock = clock
        self.acc: dict[str, float] = {}

    def wrap(self, fn, key: str):
        clock, acc = self.clock, self.acc
        acc.setdefault(key, 0.0)

        def timed(*args, **kwargs):
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                acc[key] += clock() - t0

        return timed


def measure_breakdown(algo: str, variant: str, steps: int, block: int, seed: int, clock) -> dict:
    """µs per env step of each part of the real env loop (updates included), and the bare env step."""
    try:
        import rlgraph_core.env_checks as checks
    except ImportError:  # a tree from before the observation/reward checks: nothing to time there
        checks = types.SimpleNamespace()

    backend, mode = variant.split("-")
    parts, envs, agent, recorder = make_parts(algo, backend, mode, seed)
    timers = _Timers(clock)
    timers.acc.update({"checks": 0.0, "callbacks": 0.0})  # parts an older tree may not have
    names = ("observation_problem", "reward_problem", "step_ok", "dict_step_ok", "batch_ok")
    saved = {name: getattr(checks, name) for name in names if hasattr(checks, name)}
    try:
        for name, fn in saved.items():  # CheckedEnv looks them up at call time: time them in place
            setattr(checks, name, timers.wrap(fn, "checks"))
        agent.act = timers.wrap(agent.act, "act")
        agent.observe = timers.wrap(agent.observe, "observe")
        agent.update = timers.wrap(agent.update, "update")
        env_step = envs.step
        envs.step = timers.wrap(env_step, "envs.step")
        if hasattr(recorder, "_notify"):
            recorder._notify = timers.wrap(recorder._notify, "callbacks")
        for name in ("step", "add_env_steps", "add_episodes", "add_episode_returns"):
            if hasattr(recorder, name):
                setattr(recorder, name, timers.wrap(getattr(recorder, name), "recorder"))
        loop = _loop_body(agent, envs, recorder, seed)
        n = envs.num_envs
        rng = np.random.default_rng(seed)
        sample_actions = []
        for _ in range(64):
            envs.action_space.seed(int(rng.integers(1 << 31)))
            sample_actions.append(envs.action_space.sample())
        for _ in range(max(block, 300)):  # warm-up: first updates, traces / compiles, first allocations
            loop()
        samples: dict[str, list[float]] = {k: [] for k in BREAKDOWN}
        done_steps = 0
        while done_steps < steps:
            k = min(block, steps - done_steps)
            for name, fn in saved.items():
                setattr(checks, name, fn)
            t0 = clock()
            for i in range(k):
                env_step(sample_actions[i % len(sample_actions)])
            bare = clock() - t0
            for name, fn in saved.items():
                setattr(checks, name, timers.wrap(fn, "checks"))
            for key in timers.acc:  # in place: the wrappers hold this dict
                timers.acc[key] = 0.0
            t0 = clock()
            for _ in range(k):
                loop()
            total = clock() - t0
            acc = timers.acc
            per = {
                "env step": acc["envs.step"] - acc["checks"],
                "checks": acc["checks"],
                "act": acc["act"],
                "observe": acc["observe"],
                "update": acc["update"],
                "callbacks": acc["callbacks"],
                "recorder": acc["recorder"] - acc["callbacks"],
                "total": total,
                "bare env": bare,
            }
            per["runner"] = total - sum(v for key, v in per.items() if key not in ("total", "bare env"))
            for key, v in per.items():
                samples[key].append(v / (k * n) * 1e6)
            done_steps += k
        row = {key: statistics.median(v) for key, v in samples.items()}
        row["num_envs"] = n
        return row
    finally:
        for name, fn in saved.items():
            setattr(checks, name, fn)
        envs.close()
        recorder.eval_env.close()
        shutil.rmtree(recorder.out_dir, ignore_errors=True)


def _loop_body(agent, envs, recorder, seed: int):
    """One iteration of the local executor's loop, as the tree under test writes it."""
    try:
        from rlgraph_core.execution.env_runner import EnvRunner
    except ImportError:  # a tree from before the shared env runner: its executor's loop body
        from rlgraph_core.execution.local import true_next_obs

        n = envs.num_envs
        state = {"obs": envs.reset(seed=seed)[0], "returns": np.zeros(n)}

        def old_body():
            obs = state["obs"]
            actions = agent.act(obs)
            next_obs, rewards, terminated, truncated, infos = envs.step(actions)
            agent.observe(obs, actions, rewards, true_next_obs(next_obs, infos), terminated, truncated)
            agent.update()
            state["returns"] += rewards
            done = np.logical_or(terminated, truncated)
            if done.any():
                recorder.add_episode_returns(state["returns"][done].tolist())
                state["returns"][done] = 0.0
            state["obs"] = next_obs
            recorder.step(n)

        return old_body
    runner = EnvRunner(agent, envs, seed=seed)

    def body():  # LocalExecutor._steps, one iteration
        runner.step()
        recorder.add_env_steps(runner.num_envs)
        agent.update()
        if getattr(runner, "has_episodes", True):
            recorder.add_episodes(runner.take_episodes())
        recorder.step()

    return body


def print_breakdown(title: str, results: dict, baseline: dict | None = None) -> None:
    """One table per algorithm: µs per env step of each part (and the ratio to ``baseline``)."""
    print(f"\n{title}")
    for algo, rows in results.items():
        n = int(next(iter(rows.values()))["num_envs"])
        print(f"{algo} ({n} env{'s' if n > 1 else ''}), µs per env step (median of blocks)")
        print(f"  {'variant':<14}" + "".join(f"{c:>10}" for c in BREAKDOWN))
        for variant, r in rows.items():
            print(f"  {variant:<14}" + "".join(f"{r[c]:>10.1f}" for c in BREAKDOWN))
            if baseline is not None and variant in baseline.get(algo, {}):
                b = baseline[algo][variant]
                ratio = "".join(f"{(r[c] / b[c] if b[c] > 0.05 else float('nan')):>10.2f}" for c in BREAKDOWN)
                print(f"  {'  / before':<14}" + ratio)


def run_all(
    algos: list[str], variants: list[str], steps: int, block: int, seed: int, breakdown: bool = False, clock=None
) -> dict:
    """``{algo: {variant: row}}`` for every combination (in this process)."""
    if breakdown:
        return {a: {v: measure_breakdown(a, v, steps, block, seed, clock) for v in variants} for a in algos}
    return {a: {v: measure(a, v, steps, block, seed) for v in variants} for a in algos}


def print_table(title: str, results: dict) -> None:
    """One table per algorithm: µs per env step and overhead over the bare env step."""
    print(f"\n{title}")
    for algo, rows in results.items():
        n = int(next(iter(rows.values()))["num_envs"])
        print(f"{algo} ({n} env{'s' if n > 1 else ''}), µs per env step (median of blocks)")
        print(
            f"  {'variant':<14}" + "".join(f"{c:>10}" for c in COLUMNS) + f"{'loop/env':>10}   act fn compiled/eager µs"
        )
        for variant, r in rows.items():
            extra = ""
            if "act_fn_static_us" in r:
                extra = f"   {r['act_fn_static_us']:.0f} / {r['act_fn_eager_us']:.0f}"
            print(
                f"  {variant:<14}"
                + "".join(f"{r[c]:>10.1f}" for c in COLUMNS)
                + f"{r['loop'] / r['env']:>10.2f}"
                + extra
            )


def _child(tree: str | None, args, out: Path) -> dict:
    """Run the measurements in a child process (with ``tree``'s packages first on the path)."""
    env = dict(os.environ)
    if tree is not None:
        paths = [str(Path(tree) / d / "src") for d in ("rlgraph_core", "rlgraph_torch", "rlgraph_tf")]
        env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    cmd = [
        sys.executable,
        __file__,
        "--algos",
        ",".join(args.algos),
        "--variants",
        ",".join(args.variants),
        "--steps",
        str(args.steps),
        "--block",
        str(args.block),
        "--seed",
        str(args.seed),
        "--threads",
        str(args.threads),
        "--json-out",
        str(out),
        "--clock",
        args.clock,
    ] + (["--breakdown"] if args.breakdown else [])
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def _median_results(runs: list[dict]) -> dict:
    """Element-wise median of several ``run_all`` results."""
    first = runs[0]
    return {
        a: {v: {k: statistics.median(r[a][v][k] for r in runs) for k in first[a][v]} for v in first[a]} for a in first
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algos", default="ppo,dqn,sac", help="comma-separated: ppo, dqn, sac")
    p.add_argument("--variants", default=None, help="comma-separated backend-mode (default: all installed)")
    p.add_argument("--steps", type=int, default=1500, help="timed vector steps per column")
    p.add_argument("--block", type=int, default=250, help="vector steps per interleaved block")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="framework CPU threads (train.num_threads is 1 too)")
    p.add_argument("--repeats", type=int, default=1, help="with --baseline-tree: alternating child runs each")
    p.add_argument("--baseline-tree", default=None, help="another checkout to compare against (before/after)")
    p.add_argument("--breakdown", action="store_true", help="split the real env loop (updates included) into parts")
    p.add_argument("--clock", choices=("cpu", "wall"), default="cpu", help="--breakdown: thread CPU or wall time")
    p.add_argument("--json-out", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    args.algos = args.algos.split(",")
    args.variants = args.variants.split(",") if args.variants else installed_variants()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if args.baseline_tree is None:
        if find_spec("torch") is not None:
            import torch

            torch.set_num_threads(args.threads)
        clock = time.thread_time if args.clock == "cpu" else time.perf_counter
        results = run_all(args.algos, args.variants, args.steps, args.block, args.seed, args.breakdown, clock)
        if args.json_out:
            Path(args.json_out).write_text(json.dumps(results))
            return
        title = (
            f"this tree, {args.steps} vector steps, seed {args.seed}, {args.clock} time, load {os.getloadavg()[0]:.1f}"
        )
        (print_breakdown if args.breakdown else print_table)(title, results)
        return
    tmp = Path(tempfile.mkdtemp(prefix="bench_act_cmp_"))
    before, after = [], []
    for i in range(args.repeats):
        # alternate the order so a load spike does not always hit the same side
        order = [("before", args.baseline_tree), ("after", None)]
        for name, tree in order if i % 2 == 0 else reversed(order):
            (before if name == "before" else after).append(_child(tree, args, tmp / f"{name}{i}.json"))
    label = f"median of {args.repeats} alternating child run(s), {args.steps} vector steps per column"
    if args.breakdown:
        label += f", {args.clock} time, load average now {os.getloadavg()[0]:.1f}"
        base = _median_results(before)
        print_breakdown(f"BEFORE ({args.baseline_tree}), {label}", base)
        print_breakdown(f"AFTER (this tree), {label}", _median_results(after), base)
    else:
        print_table(f"BEFORE ({args.baseline_tree}), {label}", _median_results(before))
        print_table(f"AFTER (this tree), {label}", _median_results(after))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
