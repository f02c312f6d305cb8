"""The whole loop compiled: rlgraph's ``compiled`` executor vs a PureJaxRL-style PPO, CartPole.

One process, meant to run on one core (``taskset -c 0``); every row is measured in the same run:

* **(a) reference**: a PureJaxRL-style PPO written here in plain JAX + optax on gymnax's
  CartPole-v1 (``lax.scan`` over rollouts and env steps, ``vmap`` over envs, GAE as a reverse
  scan, epochs of shuffled minibatches), with the hyperparameters of
  ``plugins/rlgraph-jax/configs/ppo_gymnax_cartpole.yaml`` (16 envs x 16 steps, 20 epochs of
  one 256-sample minibatch, lr 1e-3 and clip 0.2 linear to 0 over 1e5 env steps, gamma 0.98,
  lambda 0.8, separate 64-64 tanh trunks with orthogonal init, Adam eps 1e-5, grad-norm 0.5,
  truncated episodes bootstrapped from V(final observation)). Written for this comparison, not
  copied from PureJaxRL.
* **(b) compiled**: ``rlgraph train`` of that config (``train.executor: compiled``), the real
  executor with its recorder (evaluation, checkpoints).
* **(c) rlgraph local static**: the best of ``--local`` (default torch-static, tf-static, jax-static) on
  gymnasium's CartPole-v1 with ``configs/ppo_cartpole.yaml`` through ``compare.run_one`` (the
  real LocalExecutor; evaluations excluded from its time).
* **(d) Stable-Baselines3** with the same config, through ``compare.run_one`` (skipped with a
  note when it is not installed).

Each run evaluates the greedy policy (10 episodes) every 8192 env steps ((c), (d): the
config's 4096) and stops at the first mean return >= 475 or at ``--budget``. Reported:
env steps/s over the training time (program time for (a) and (b): evaluations, host work between
chunks and compilation excluded), env steps and training seconds to 475, and compilation
separately: (b) is run twice with one fresh compilation cache, the second run loading its
programs. Then, interleaved ``--repeats`` times, the compiled executor with ``executor.num_seeds``
16 vs 1 and the reference vmapped over 16 seeds vs 1, ``--seeds-budget`` env steps per seed in
one call, no evaluation: total env steps/s (medians), so the 16-seed target stands beside what
the same machine gives the reference.

Last, a roofline: the dense-layer FLOPs of one env step of this workload (its share of the 20
epochs of gradient steps on each rollout, plus the acting forward passes; ``roofline.py`` counts
them) against one core's measured matmul speed give the env steps/s that no implementation on
this core can pass, and each target's env steps/s is printed as a share of that ceiling.

    taskset -c 0 python benchmarks/bench_compiled_loop.py
    taskset -c 0 python benchmarks/bench_compiled_loop.py --skip-local --skip-sb3 --budget 60000
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from rlgraph_core.assemble import train  # noqa: E402
from rlgraph_core.config.run import apply_overrides, load_config_file, validate_config  # noqa: E402
from rlgraph_jax.gymnax_envs import PureEnv  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "plugins" / "rlgraph-jax" / "configs" / "ppo_gymnax_cartpole.yaml"
EVAL_EVERY = 8192
THRESHOLD = 475.0
HP = dict(
    num_envs=16, n_steps=16, batch_size=256, n_epochs=20, gamma=0.98, gae_lambda=0.8, lr=1e-3, clip=0.2,
    vf_coef=0.5, ent_coef=0.0, max_grad_norm=0.5, decay_steps=100_000,
)  # fmt: skip


# ---------------------------------------------------------------------------- (a) the reference


def _mlp_init(key, sizes, last_gain):
    """Orthogonal weights (gain sqrt 2, the last layer ``last_gain``) and zero biases."""
    keys = jax.random.split(key, len(sizes) - 1)
    layers = []
    for i, (k, n_in, n_out) in enumerate(zip(keys, sizes[:-1], sizes[1:])):
        gain = last_gain if i == len(sizes) - 2 else np.sqrt(2.0)
        layers.append((jax.nn.initializers.orthogonal(gain)(k, (n_in, n_out), jnp.float32), jnp.zeros(n_out)))
    return layers


def _mlp(layers, x):
    for w, b in layers[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = layers[-1]
    return x @ w + b


class ReferencePPO:
    """PPO as one JAX program per chunk of rollouts, PureJaxRL's shape (see the module docstring)."""

    def __init__(self, seed: int):
        self.env = PureEnv("CartPole-v1")
        self.tx = optax.chain(
            optax.clip_by_global_norm(HP["max_grad_norm"]),
            optax.inject_hyperparams(optax.adam)(learning_rate=HP["lr"], eps=1e-5),
        )
        self.rollout = HP["num_envs"] * HP["n_steps"]
        self.carry = self.init(jax.random.PRNGKey(seed))

    def init(self, key):
        """The training state (params, optimizer state, env states, observations, key) of one seed's
        key: a pure function, so ``jax.vmap`` of it starts K seeds at once."""
        n_obs, n_act = self.env.observation_space.shape[0], int(self.env.action_space.n)
        key, pi_key, v_key, reset_key = jax.random.split(key, 4)
        params = {
            "pi": _mlp_init(pi_key, [n_obs, 64, 64, n_act], 0.01),
            "v": _mlp_init(v_key, [n_obs, 64, 64, 1], 1.0),
        }
        obs, state = jax.vmap(self.env.reset)(jax.random.split(reset_key, HP["num_envs"]))
        return (params, self.tx.init(params), state, obs, key)

    def _loss(self, params, mb, clip):
        obs, act, old_logp, adv, ret = mb
        logits = _mlp(params["pi"], obs)
        logp_all = jax.nn.log_softmax(logits)
        logp = jnp.take_along_axis(logp_all, act[:, None], axis=1)[:, 0]
        entropy = -jnp.sum(jnp.exp(logp_all) * logp_all, axis=1).mean()
        value = _mlp(params["v"], obs)[:, 0]
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        ratio = jnp.exp(logp - old_logp)
        pg = -jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - clip, 1 + clip) * adv).mean()
        return pg + HP["vf_coef"] * jnp.mean((ret - value) ** 2) - HP["ent_coef"] * entropy

    def _iteration(self, carry, xs):
        params, opt_state, env_state, obs, key = carry
        lr, clip = xs
        n, gamma, lam = HP["num_envs"], HP["gamma"], HP["gae_lambda"]

        def env_step(c, _):
            env_state, obs, key = c
            key, act_key, env_key = jax.random.split(key, 3)
            logits = _mlp(params["pi"], obs)
            action = jax.random.categorical(act_key, logits)
            logp = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], axis=1)[:, 0]
            value = _mlp(params["v"], obs)[:, 0]
            obs2, env_state, reward, term, trunc, final = jax.vmap(self.env.step)(
                jax.random.split(env_key, n), env_state, action
            )
            final_v = jnp.where(trunc, _mlp(params["v"], final)[:, 0], 0.0)
            return (env_state, obs2, key), (obs, action, logp, value, reward, term, trunc, final_v)

        (env_state, obs, key), (t_obs, t_act, t_logp, t_v, t_r, t_term, t_trunc, t_fv) = jax.lax.scan(
            env_step, (env_state, obs, key), None, HP["n_steps"]
        )
        next_v = jnp.concatenate([t_v[1:], _mlp(params["v"], obs)[:, 0][None]])
        next_v = jnp.where(t_trunc, t_fv, next_v)
        delta = t_r + gamma * (1.0 - t_term) * next_v - t_v
        not_done = (1.0 - t_term) * (1.0 - t_trunc)

        def gae(c, x):
            d, nd = x
            c = d + gamma * lam * nd * c
            return c, c

        _, adv = jax.lax.scan(gae, jnp.zeros(n), (delta, not_done), reverse=True)
        data = tuple(x.reshape(-1, *x.shape[2:]) for x in (t_obs, t_act, t_logp, adv, adv + t_v))
        opt_state[1].hyperparams["learning_rate"] = lr
        n_mb = self.rollout // HP["batch_size"]

        def epoch(c, k):
            def minibatch(c2, idx):
                p, s = c2
                grads = jax.grad(self._loss)(p, tuple(x[idx] for x in data), clip)
                updates, s = self.tx.update(grads, s, p)
                return (optax.apply_updates(p, updates), s), None

            idx = jax.random.permutation(k, self.rollout).reshape(n_mb, HP["batch_size"])
            return jax.lax.scan(minibatch, c, idx)[0], None

        key, learn_key = jax.random.split(key)
        (params, opt_state), _ = jax.lax.scan(epoch, (params, opt_state), jax.random.split(learn_key, HP["n_epochs"]))
        return (params, opt_state, env_state, obs, key), None

    def chunk(self, carry, lrs, clips):
        return jax.lax.scan(self._iteration, carry, (lrs, clips))[0]

    def greedy_return(self, params, episodes: int = 10, seed: int = 10_000):
        """Mean return of ``episodes`` greedy episodes (vmapped, up to 500 steps)."""

        def episode(key):
            obs, state = self.env.reset(key)

            def step(c, k):
                obs, state, total, alive = c
                action = jnp.argmax(_mlp(params["pi"], obs))
                _, state, reward, term, trunc, final = self.env.step(k, state, action)
                total = total + reward * alive
                alive = alive * (1.0 - jnp.maximum(term, trunc))
                return (final, state, total, alive), None

            return jax.lax.scan(step, (obs, state, 0.0, 1.0), jax.random.split(key, 500))[0][2]

        return jax.vmap(episode)(jax.random.split(jax.random.PRNGKey(seed), episodes)).mean()


def run_reference(seed: int, budget: int) -> dict:
    ref = ReferencePPO(seed)
    rollouts = EVAL_EVERY // ref.rollout
    sched = jnp.zeros(rollouts, jnp.float32)
    start = time.perf_counter()
    chunk = jax.jit(ref.chunk).lower(ref.carry, sched, sched).compile()
    compile_s = time.perf_counter() - start
    evaluate = jax.jit(ref.greedy_return)
    carry, steps, train_s, solved = ref.carry, 0, 0.0, None
    while steps < budget and solved is None:
        lrs, clips = _schedules(steps, rollouts, ref.rollout)
        start = time.perf_counter()
        carry = jax.block_until_ready(chunk(carry, lrs, clips))
        train_s += time.perf_counter() - start
        steps += rollouts * ref.rollout
        if evaluate(carry[0]) >= THRESHOLD:  # outside the timed window
            solved = (steps, train_s)
    return {"steps": steps, "steps_per_s": steps / train_s, "solved": solved, "compile_s": compile_s}


def _schedules(start: int, rollouts: int, rollout: int):
    """The learning rates and clip ranges of ``rollouts`` rollouts after ``start`` env steps (linear to 0)."""
    t = start + rollout * np.arange(1, rollouts + 1)
    frac = np.maximum(0.0, 1.0 - t / HP["decay_steps"])
    return jnp.asarray(HP["lr"] * frac, jnp.float32), jnp.asarray(HP["clip"] * frac, jnp.float32)


@functools.lru_cache(maxsize=None)
def _reference_program(seed: int, num_seeds: int, budget: int):
    """The reference's program over ``budget`` env steps for ``num_seeds`` seeds ``seed + k`` (vmapped;
    plain for one seed), compiled once per shape; with its inputs and compile seconds."""
    ref = ReferencePPO(seed)
    rollouts = budget // ref.rollout
    lrs, clips = _schedules(0, rollouts, ref.rollout)
    if num_seeds == 1:
        carry, program = ref.carry, ref.chunk
    else:
        keys = jnp.stack([jax.random.PRNGKey(seed + k) for k in range(num_seeds)])
        carry, program = jax.vmap(ref.init)(keys), jax.vmap(ref.chunk, in_axes=(0, None, None))
    start = time.perf_counter()
    chunk = jax.jit(program).lower(carry, lrs, clips).compile()
    return chunk, (carry, lrs, clips), num_seeds * rollouts * ref.rollout, time.perf_counter() - start


def run_reference_seeds(seed: int, num_seeds: int, budget: int) -> dict:
    """The reference with ``num_seeds`` seeds in one program, ``budget`` env steps per seed in one call,
    no evaluation: total env steps/s (compile seconds: its first compilation)."""
    chunk, inputs, steps, compile_s = _reference_program(seed, num_seeds, budget)
    start = time.perf_counter()
    jax.block_until_ready(chunk(*inputs))
    return {"steps_per_s": steps / (time.perf_counter() - start), "compile_s": compile_s}


# ---------------------------------------------------------------------------- (b) the executor


def compiled_config(*overrides: str):
    return validate_config(
        apply_overrides(
            load_config_file(CONFIG),
            ["train.progress_bar=false", "train.loggers=[]", f"train.checkpoint_interval={10**12}", *overrides],
        )
    )


def train_compiled(cache: Path, *overrides: str) -> dict:
    """The summary of one run of the compiled executor (in a temporary folder) with ``overrides``."""
    out = Path(tempfile.mkdtemp(prefix="bench_compiled_"))
    try:
        return train(compiled_config(*overrides, f"executor.compilation_cache_dir={cache}"), out)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def run_compiled(seed: int, budget: int, cache: Path) -> dict:
    s = train_compiled(
        cache,
        f"train.seed={seed}",
        f"train.total_timesteps={budget}",
        f"train.eval_interval={EVAL_EVERY}",
        f"executor.chunk_timesteps={EVAL_EVERY}",
    )
    solved = (s["timesteps"], s["compiled_run_seconds"]) if s["target_reached"] else None
    return {
        "steps": s["timesteps"],
        "steps_per_s": s["compiled_env_steps_per_s"],
        "solved": solved,
        "compile_s": s["compile_seconds"],
        "build_s": s["build_seconds"],
    }


def run_seeds(num_seeds: int, budget: int, cache: Path) -> dict:
    s = train_compiled(
        cache,
        f"executor.num_seeds={num_seeds}",
        f"train.total_timesteps={budget}",
        "train.target_return=null",
        f"train.eval_interval={10**12}",
        f"executor.chunk_timesteps={budget}",
    )
    return {"steps_per_s": s["compiled_env_steps_per_s"], "compile_s": s["compile_seconds"]}


# ---------------------------------------------------------------------------- report


def flops_per_env_step() -> float:
    """Dense-layer FLOPs of one env step of this workload: its share of the rollout's gradient steps
    (``n_epochs`` x ``rollout / batch_size`` minibatch steps per ``num_envs * n_steps`` env steps)
    plus acting (policy and value forward on one observation). CartPole: 4 observations, 2 actions."""
    import roofline  # the sibling benchmarks/roofline.py (imports torch)

    hidden = [64, 64]
    rollout = HP["num_envs"] * HP["n_steps"]
    update = roofline.ppo_update_flops(obs_dim=4, n_actions=2, hidden=hidden, batch=HP["batch_size"])
    updates_per_step = HP["n_epochs"] * (rollout // HP["batch_size"]) / rollout
    acting = roofline.dense_flops(1, [4, *hidden, 2]) + roofline.dense_flops(1, [4, *hidden, 1])
    return update * updates_per_step + acting


def print_roofline(rates: dict[str, float]) -> None:
    """The env steps/s ceiling of one core for this workload, and each rate in ``rates`` (name -> env
    steps/s, targets included) as a share of it. The ceiling takes the fastest measured matmul rate,
    so it is generous: bias adds, tanh, softmax, Adam, the env and GAE are not counted."""
    import roofline

    flops = flops_per_env_step()
    matmul = roofline.matmul_gflops(((HP["batch_size"], 64, 64), (2048, 2048, 2048)))
    best = max(g for _, g in matmul.rates)
    ceiling = best * 1e9 / flops
    print(
        f"\nroofline: {flops / 1e6:.3f} MFLOP of dense layers per env step; 1-thread matmul {matmul.describe()}: "
        f"no implementation on this core passes {ceiling:,.0f} env steps/s"
    )
    for name, rate in rates.items():
        print(f"  {name:<44} {rate:>11,.0f} env steps/s = {rate / ceiling:6.1%} of the ceiling")


def _row(name: str, r: dict, ref_rate: float | None) -> str:
    solved = r.get("solved")
    to = f"{solved[0]:>7,} {solved[1]:>8.1f}" if solved else f"{'-':>7} {'-':>8}"
    ratio = f"{r['steps_per_s'] / ref_rate:6.2f}x" if ref_rate and r.get("steps_per_s") else "      -"
    comp = f"{r['compile_s']:8.1f}" if r.get("compile_s") is not None else f"{'-':>8}"
    return f"{name:<34} {r.get('steps_per_s') or float('nan'):>11,.0f} {ratio} {to} {comp}"


def _cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or platform.machine()
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "cpu")


def _versions() -> str:
    names = (
        "jax",
        "jaxlib",
        "optax",
        "gymnax",
        "torch",
        "tensorflow-cpu",
        "tensorflow",
        "stable_baselines3",
        "gymnasium",
    )
    found = []
    for name in names:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return f"python {platform.python_version()}, " + ", ".join(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=100_000, help="env-step cap of the solve runs")
    parser.add_argument("--seeds-budget", type=int, default=32_768, help="env steps per seed of the 16-seed run")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats of the 1 vs 16 seeds runs")
    parser.add_argument(
        "--local", default="torch-static,tf-static,jax-static", help="rlgraph local executor impls for (c)"
    )
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--skip-sb3", action="store_true")
    args = parser.parse_args()
    affinity = sorted(os.sched_getaffinity(0))
    print(
        f"{_cpu_model()}; cores {affinity}; load (1 min) {os.getloadavg()[0]:.1f}; {_versions()}; "
        f"XLA_FLAGS={os.environ.get('XLA_FLAGS')!r}"
    )
    rows: dict[str, dict] = {}

    def done(name: str, result: dict) -> None:  # each row as it is measured (a long run can be cut)
        rows[name] = result
        print(f"{name}: {result}", flush=True)

    done("(a) reference PPO (PureJaxRL-style)", run_reference(args.seed, args.budget))
    cache = Path(tempfile.mkdtemp(prefix="bench_xla_cache_"))
    done("(b) compiled executor", run_compiled(args.seed, args.budget, cache))
    done("(b) again, compilation cached", run_compiled(args.seed, args.budget, cache))
    if not (args.skip_local and args.skip_sb3):
        import compare

        compare.set_threads()
        impls = [] if args.skip_local else args.local.split(",")
        if not args.skip_sb3:
            if compare.sb3_available():
                impls.append("sb3")
            else:
                print("Stable-Baselines3 is not installed: (d) skipped (pip install -e 'rlgraph_core[bench]').")
        for impl in impls:
            r = compare.run_one("ppo", impl, args.seed, args.budget, time_cap=600.0)
            solved = (r.steps_to_solve, r.s_to_solve) if r.solved else None
            name = "(d) Stable-Baselines3" if impl == "sb3" else f"(c) rlgraph {impl} (gymnasium)"
            done(name, {"steps": r.steps, "steps_per_s": r.steps_per_s, "solved": solved, "compile_s": None})
    seeds: dict[str, dict[int, list[dict]]] = {
        "(a) reference": {1: [], 16: []},
        "(b) compiled executor": {1: [], 16: []},
    }
    for _ in range(args.repeats):  # interleaved, so both see the same moments of the machine
        for k in (1, 16):
            seeds["(a) reference"][k].append(run_reference_seeds(args.seed, k, args.seeds_budget))
            seeds["(b) compiled executor"][k].append(run_seeds(k, args.seeds_budget, cache))
            print(f"{k} seed(s): (a) {seeds['(a) reference'][k][-1]}, (b) {seeds['(b) compiled executor'][k][-1]}")
    ref_rate = rows["(a) reference PPO (PureJaxRL-style)"]["steps_per_s"]
    print(f"\nPPO CartPole-v1, seed {args.seed}, threshold {THRESHOLD} (eval every {EVAL_EVERY} steps for (a), (b))")
    print(f"{'implementation':<34} {'env steps/s':>11} {'vs (a)':>7} {'to 475':>7} {'s to 475':>8} {'compile':>8}")
    for name, r in rows.items():
        print(_row(name, r, ref_rate))
    print(
        f"\n{args.seeds_budget:,} env steps per seed, one program, no evaluation: total env steps/s, median of "
        f"{args.repeats} (each run's in brackets)"
    )
    median = {
        name: {k: statistics.median(r["steps_per_s"] for r in rs) for k, rs in by_k.items()}
        for name, by_k in seeds.items()
    }
    for name, by_k in seeds.items():
        each = {k: "/".join(f"{r['steps_per_s']:,.0f}" for r in rs) for k, rs in by_k.items()}
        print(
            f"{name:<34} 1 seed {median[name][1]:>8,.0f} [{each[1]}] (compile {by_k[1][0]['compile_s']:.1f} s); "
            f"16 seeds vmapped {median[name][16]:>8,.0f} [{each[16]}] (compile {by_k[16][0]['compile_s']:.1f} s): "
            f"{median[name][16] / median[name][1]:.2f}x"
        )
    b, a = median["(b) compiled executor"], median["(a) reference"]
    print(f"(b) / (a): 1 seed {b[1] / a[1]:.2f}x, 16 seeds {b[16] / a[16]:.2f}x")
    rates = {"(a) reference, 1 seed": a[1], "(b) compiled, 1 seed": b[1], "(b) compiled, 16 seeds": b[16]}
    local = [r["steps_per_s"] for name, r in rows.items() if name.startswith("(c)") and r.get("steps_per_s")]
    if local:
        rates["target (b) >= 20x best (c)"] = 20 * max(local)
    rates["target 16 seeds >= 5x (b) 1 seed"] = 5 * b[1]
    print_roofline(rates)
    print(f"load (1 min) at the end {os.getloadavg()[0]:.1f}")
    shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
