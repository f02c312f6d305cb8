"""rlgraph vs Stable-Baselines3 vs hand-written PyTorch: PPO, DQN and SAC on the shipped configs.

In one process and one run, every implementation trains the same algorithm with the same
hyperparameters (the shipped RL-Zoo configs: PPO CartPole-v1 ``configs/ppo_cartpole.yaml``, DQN
CartPole-v1 ``configs/dqn_cartpole.yaml``, SAC Pendulum-v1 ``configs/sac_pendulum.yaml``):

* ``sb3``: Stable-Baselines3 (``pip install -e "rlgraph_core[bench]"``), its hyperparameters
  mapped from the config (see :func:`sb3_model`); skipped with a message when not installed;
* ``hand``: a CleanRL-style PyTorch loop (``compare_loops.py``);
* ``<backend>-<mode>``: rlgraph through the real ``LocalExecutor`` (``rlgraph_core.assemble.train``)
  for every installed backend (torch, tf, and an outside plugin such as jax) in eager and static mode.

Every implementation evaluates the greedy policy every ``train.eval_interval`` env steps for
``train.eval_episodes`` episodes (seeds ``10000 + seed + i``, as rlgraph's executor does) and
stops when the mean return first reaches the threshold (475 CartPole, -200 Pendulum) or at the
budget (the config's ``total_timesteps`` unless ``--budget``) or the wall-clock cap
(``--time-cap``). All run on one thread (torch, TF, OpenMP). Seeds are the outer loop and the
implementations take turns within each seed (the order rotating), so all see similar load.

Measured per run: **env steps/s** and **updates/s** (gradient steps) while training, over the
window from the first evaluation to the end of the run (so building, ``torch.compile`` /
``tf.function`` tracing and DQN's pre-learning steps fall outside), **steps and seconds to the
threshold** (training seconds from the start of training: construction of the model excluded,
compilation included). Evaluation time is excluded everywhere: it is timed around each
evaluation and subtracted (for rlgraph by wrapping ``RunRecorder.evaluate``, which also saves
the best checkpoint). Printed per algorithm: a markdown table with medians over seeds and the
medians of the per-seed ratios to SB3 (to the hand-written loop when SB3 is missing), then a
roofline line per implementation (see ``roofline.py``); with at least five seeds, each
implementation's interquartile mean of the final evaluation return with its 95 % stratified-bootstrap
confidence interval (rliable, extra ``stats``: :mod:`rlgraph_core.stats`). Run from the repository root:

    python benchmarks/compare.py                                 # everything, seeds 0,1,2
    OMP_NUM_THREADS=1 XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \
        python benchmarks/compare.py                             # the same, strictly one thread
    python benchmarks/compare.py --quick                         # smoke test (short budgets, seed 0)
    python benchmarks/compare.py --algos ppo --seeds 0,1,2,3,4   # + IQM [95% CI] (extra stats)
    python benchmarks/compare.py --algos ppo --impls sb3,hand,torch-eager --seeds 0
    python benchmarks/compare.py --budget ppo=50000,sac=10000 --time-cap 120
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn

import roofline
from compare_loops import HAND_LOOPS, RunClock, RunResult
from rlgraph_core.assemble import train
from rlgraph_core.components.schedules import as_schedule
from rlgraph_core.config.run import apply_overrides, load_config_file, validate_config
from rlgraph_core.errors import RLGraphError
from rlgraph_core.execution.recorder import RunRecorder
from rlgraph_core.execution.stopping import RunFailed
from rlgraph_core.plugins import get_plugin_manager, hookimpl

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@dataclass(frozen=True)
class AlgoSpec:
    """One benchmarked algorithm: its shipped config, the solve threshold, the quick budget."""

    name: str
    config: Path
    threshold: float
    quick_budget: int


ALGOS = {
    "ppo": AlgoSpec("PPO", CONFIGS / "ppo_cartpole.yaml", 475.0, 12_288),
    "dqn": AlgoSpec("DQN", CONFIGS / "dqn_cartpole.yaml", 475.0, 10_000),
    "sac": AlgoSpec("SAC", CONFIGS / "sac_pendulum.yaml", -200.0, 1_500),
}


def load(spec: AlgoSpec, overrides: list[str] = ()) -> object:
    """The validated rlgraph run config of ``spec`` with ``overrides`` applied."""
    return validate_config(apply_overrides(load_config_file(spec.config), list(overrides)))


# ---------------------------------------------------------------------------- rlgraph


class _Cut(Exception):
    """Raised from the metrics hook to end an rlgraph run past its wall-clock cap."""


class _ClockHooks:
    """Plugin: starts the clock at the train-start hook, notes every metrics row, enforces the cap."""

    def __init__(self, clock: RunClock):
        self.clock = clock
        self.updates = 0

    @hookimpl
    def rlgraph_on_train_start(self, run_info):
        """Training (after the agent build) starts now."""
        self.clock.start()

    @hookimpl
    def rlgraph_on_iteration(self, metrics):
        """Note the row's counters; end the run past the cap."""
        self.updates = int(metrics.get("updates", self.updates))
        self.clock.note(int(metrics["timesteps"]), self.updates)
        if self.clock.over_time():
            raise _Cut()


def run_rlgraph(spec: AlgoSpec, backend: str, mode: str, seed: int, budget: int, clock: RunClock) -> RunResult:
    """One run of the real LocalExecutor on ``spec``'s config (loggers, progress bar and periodic
    checkpoints off; a metrics row every quarter of the evaluation interval)."""
    base = load(spec)
    overrides = [
        f"train.backend={backend}",
        f"train.mode={mode}",
        "train.device=cpu",
        "train.num_threads=1",
        f"train.seed={seed}",
        f"train.total_timesteps={budget}",
        # the clock notes the solving evaluation; the executor stops there unless --full-budget
        f"train.target_return={'null' if clock.full_budget else spec.threshold}",
        # rows at every evaluation and 3 in between: the time cap is checked at each row
        f"train.log_interval={max(1, base.train.eval_interval // 4)}",
        f"train.checkpoint_interval={10**12}",
        "train.loggers=[]",
        "train.progress_bar=false",
    ]
    config = load(spec, overrides)
    hooks = _ClockHooks(clock)
    pm = get_plugin_manager()
    pm.register(hooks, "bench_compare")
    original = RunRecorder.evaluate

    def evaluate(recorder: RunRecorder) -> dict:
        """``RunRecorder.evaluate`` (evaluation + best checkpoint), timed for the clock."""
        clock.begin_eval(recorder.agent.timesteps, recorder.agent.updates)
        out = original(recorder)
        clock.end_eval(out["eval_return_mean"])
        return out

    original_finish = RunRecorder.finish

    def finish(recorder: RunRecorder) -> dict:
        """``RunRecorder.finish``, noting the run's end point first (the final checkpoint written
        there is not training time)."""
        clock.note(recorder.agent.timesteps, recorder.agent.updates)
        return original_finish(recorder)

    RunRecorder.evaluate = evaluate  # type: ignore[method-assign]
    RunRecorder.finish = finish  # type: ignore[method-assign]
    out_dir = tempfile.mkdtemp(prefix="bench_compare_")
    try:
        summary = train(config, out_dir, plugin_manager=pm)
        if summary["ended_by"] in ("sigint", "sigterm"):  # the executor turned the signal into a clean stop
            raise KeyboardInterrupt(f"rlgraph run stopped by {summary['ended_by']}")
    except RunFailed as exc:
        if not isinstance(exc.__cause__, _Cut):
            raise
    finally:
        RunRecorder.evaluate = original  # type: ignore[method-assign]
        RunRecorder.finish = original_finish  # type: ignore[method-assign]
        pm.pm.unregister(hooks)
        shutil.rmtree(out_dir, ignore_errors=True)
    return clock.result()


# ---------------------------------------------------------------------------- Stable-Baselines3

ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU}


def sb3_available() -> bool:
    """Whether Stable-Baselines3 is importable."""
    try:
        import stable_baselines3  # noqa: F401
    except ImportError:
        return False
    return True


def _progress_fn(schedule, budget: int) -> Callable[[float], float]:
    """An rlgraph schedule over env steps as an SB3 schedule over ``progress_remaining``
    (SB3 passes ``1 - num_timesteps / total_timesteps``, and ``total_timesteps`` is the budget)."""
    sched = as_schedule(schedule)
    return lambda progress_remaining: float(sched(round((1.0 - progress_remaining) * budget)))


def _double_dqn_class():
    """SB3's DQN with a double-Q target (SB3 has only the max-over-target-net target).

    ``train`` is SB3 2.x's ``DQN.train`` with one change: the bootstrap action is the online
    network's argmax on ``next_obs``, evaluated by the target network.
    """
    import torch.nn.functional as F
    from stable_baselines3 import DQN

    class DoubleDQN(DQN):
        """DQN with the double-Q target."""

        def train(self, gradient_steps: int, batch_size: int = 100) -> None:
            self.policy.set_training_mode(True)
            self._update_learning_rate(self.policy.optimizer)
            losses = []
            for _ in range(gradient_steps):
                data = self.replay_buffer.sample(batch_size, env=self._vec_normalize_env)
                discounts = data.discounts if data.discounts is not None else self.gamma
                with torch.no_grad():
                    next_a = self.q_net(data.next_observations).argmax(dim=1, keepdim=True)
                    next_q = self.q_net_target(data.next_observations).gather(1, next_a)
                    target_q = data.rewards + (1 - data.dones) * discounts * next_q
                current_q = torch.gather(self.q_net(data.observations), dim=1, index=data.actions.long())
                loss = F.smooth_l1_loss(current_q, target_q)
                losses.append(loss.item())
                self.policy.optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.policy.optimizer.step()
            self._n_updates += gradient_steps
            self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
            self.logger.record("train/loss", float(np.mean(losses)))

    return DoubleDQN


def _sb3_replay_settings(cfg) -> dict:
    """The replay and training-cadence keywords SB3's off-policy algorithms (DQN, SAC) share."""
    return {
        "buffer_size": cfg.memory.capacity,
        "learning_starts": cfg.learning_starts,
        "batch_size": cfg.batch_size,
        "gamma": cfg.gamma,
        "train_freq": cfg.train_freq,
        "gradient_steps": cfg.gradient_steps,
    }


def sb3_model(algo: str, config, seed: int, budget: int):
    """The SB3 model with the config's hyperparameters, and the number of gradient steps per
    ``model._n_updates`` (PPO counts epochs, each of ``rollout / batch_size`` minibatch steps).

    Mapping: SB3's ``progress_remaining`` schedules reproduce rlgraph's schedules over env steps
    (learning rate, PPO clip range, DQN epsilon); rlgraph's ``target_update_interval`` counts
    gradient steps, SB3's counts env steps (``x * train_freq / gradient_steps``); DQN gets the
    double-Q target (:func:`_double_dqn_class`); Adam's eps and betas come from the config (SB3's
    own default eps is 1e-8 except PPO's 1e-5); SAC's ``ent_coef: auto`` with ``init_ent_coef``
    is SB3's ``auto_<init>``.
    """
    import stable_baselines3 as sb3
    from stable_baselines3.common.env_util import make_vec_env

    cfg, env_cfg = config.agent, config.env
    opt = cfg.optimizer
    env = make_vec_env(env_cfg.id, n_envs=env_cfg.num_envs, seed=seed)
    adam = {"eps": opt.eps, "betas": tuple(opt.betas)}
    if opt.type != "adam":
        raise ValueError(f"only adam is mapped to SB3, not {opt.type}")
    common = {"seed": seed, "device": "cpu", "verbose": 0, "learning_rate": _progress_fn(opt.learning_rate, budget)}
    if algo == "ppo":
        net = cfg.network
        if cfg.shared_trunk:
            raise ValueError("SB3 2.x has no shared policy/value trunk; the config asks for one")
        policy_kwargs = {
            "net_arch": {"pi": list(net.hidden), "vf": list(net.hidden)},
            "activation_fn": ACTIVATIONS[net.activation],
            "ortho_init": net.initializer == "orthogonal",
            "optimizer_kwargs": adam,
        }
        model = sb3.PPO(
            "MlpPolicy",
            env,
            n_steps=cfg.n_steps,
            batch_size=cfg.batch_size,
            n_epochs=cfg.n_epochs,
            gamma=cfg.gamma,
            gae_lambda=cfg.gae_lambda,
            clip_range=_progress_fn(cfg.clip_range, budget),
            clip_range_vf=cfg.clip_range_vf,
            normalize_advantage=cfg.normalize_advantage,
            ent_coef=cfg.ent_coef,
            vf_coef=cfg.vf_coef,
            max_grad_norm=opt.max_grad_norm,
            target_kl=cfg.target_kl,
            policy_kwargs=policy_kwargs,
            **common,
        )
        return model, (cfg.n_steps * env_cfg.num_envs) // cfg.batch_size
    if algo == "dqn":
        if cfg.dueling or cfg.n_step != 1 or cfg.memory.type != "replay":
            raise ValueError("only plain replay, 1-step, non-dueling DQN is mapped to SB3")
        sync_env_steps = max(1, cfg.target_update_interval * cfg.train_freq // cfg.gradient_steps)
        model = (_double_dqn_class() if cfg.double_q else sb3.DQN)(
            "MlpPolicy",
            env,
            tau=1.0,
            target_update_interval=sync_env_steps,
            max_grad_norm=opt.max_grad_norm,
            policy_kwargs={
                "net_arch": list(cfg.network.hidden),
                "activation_fn": ACTIVATIONS[cfg.network.activation],
                "optimizer_kwargs": adam,
            },
            **common,
            **_sb3_replay_settings(cfg),
        )
        model.exploration_schedule = _progress_fn(cfg.exploration.epsilon, budget)
        return model, 1
    if algo == "sac":
        if opt.max_grad_norm is not None:
            raise ValueError("SB3's SAC does not clip gradients; the config asks for max_grad_norm")
        ent = f"auto_{cfg.init_ent_coef}" if cfg.ent_coef == "auto" else float(cfg.ent_coef)
        model = sb3.SAC(
            "MlpPolicy",
            env,
            tau=cfg.tau,
            ent_coef=ent,
            target_entropy=cfg.target_entropy,
            target_update_interval=1,
            policy_kwargs={
                "net_arch": {"pi": list(cfg.actor_network.hidden), "qf": list(cfg.critic_network.hidden)},
                "activation_fn": ACTIVATIONS[cfg.actor_network.activation],
                "optimizer_kwargs": adam,
            },
            **common,
            **_sb3_replay_settings(cfg),
        )
        return model, 1
    raise ValueError(algo)


def run_sb3(algo: str, spec: AlgoSpec, seed: int, budget: int, clock: RunClock) -> RunResult:
    """One ``model.learn`` with an evaluation callback that times, and stops at the threshold.

    PPO and SAC evaluate at the start of a rollout (SB3 trains at the end of the previous one,
    so the policy has had the updates rlgraph has given it at the same env step); DQN in
    ``_on_step`` (its update rounds do not fall on the evaluation steps).
    """
    from stable_baselines3.common.callbacks import BaseCallback

    config = load(spec)
    model, per_update = sb3_model(algo, config, seed, budget)
    eval_env = gym.make(config.env.id)

    def policy(obs: np.ndarray) -> np.ndarray:
        return model.predict(obs, deterministic=True)[0]

    class Clock(BaseCallback):
        """Starts the clock, evaluates on the config's cadence, stops when solved or cut."""

        def _maybe_eval(self) -> None:
            steps = self.model.num_timesteps
            clock.note(steps, self.model._n_updates * per_update)
            if (clock.solved_at is None or clock.full_budget) and clock.due(steps):
                clock.evaluate(steps, self.model._n_updates * per_update, policy, eval_env)

        def _on_training_start(self) -> None:
            clock.start()

        def _on_training_end(self) -> None:
            if clock.solved_at is None or clock.full_budget:  # the end point, after SB3's last train() call
                clock.note(self.model.num_timesteps, self.model._n_updates * per_update)

        def _on_rollout_start(self) -> None:
            if algo != "dqn":
                self._maybe_eval()

        def _on_step(self) -> bool:
            if algo == "dqn":
                self._maybe_eval()
            else:
                clock.note(self.model.num_timesteps, self.model._n_updates * per_update)
            return not (clock.over_time() or clock.stops())

    try:
        model.learn(total_timesteps=budget, callback=Clock())
    finally:
        model.get_env().close()
        eval_env.close()
    return clock.result()


# ---------------------------------------------------------------------------- running


def label(impl: str) -> str:
    """Display name of an implementation key."""
    if impl.endswith(BASE):
        return f"{label(impl[: -len(BASE)])} (baseline tree)"
    if impl == "sb3":
        return "Stable-Baselines3"
    if impl == "hand":
        return "hand-written PyTorch"
    return "rlgraph " + impl.replace("-", " ")


def available_impls() -> list[str]:
    """``sb3`` (if installed), ``hand`` and ``<backend>-<mode>`` for every installed backend."""
    out = (["sb3"] if sb3_available() else []) + ["hand"]
    for name in sorted(get_plugin_manager().names("backends"), key=lambda n: (n != "torch", n)):
        out += [f"{name}-eager", f"{name}-static"]
    return out


#: ``--baseline-tree``: the suffix of an implementation run with that checkout's rlgraph packages
BASE = "@base"
#: ``--baseline-tree DIR`` (set by main)
BASELINE_TREE: str | None = None
#: whether SB3 and the hand-written loop run with denormals flushed (--flush-denormal-baselines)
FLUSH_BASELINES = False


def run_in_tree(tree: str, algo: str, impl: str, seed: int, budget: int, time_cap: float, full: bool) -> RunResult:
    """One run of ``impl`` in a child process with ``tree``'s rlgraph packages first on the path
    (this script's runner and clock, that checkout's library)."""
    env = dict(os.environ)
    paths = [str(Path(tree) / d / "src") for d in ("rlgraph_core", "rlgraph_torch", "rlgraph_tf")]
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    job = json.dumps([algo, impl, seed, budget, time_cap, full])
    done = subprocess.run(
        [sys.executable, __file__, "--child-run", job], env=env, capture_output=True, text=True, check=False
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        raise RuntimeError(f"the {tree} child run printed no result: {done.stderr[-800:]}")
    return RunResult(**json.loads(lines[-1][len("RESULT ") :]))


def run_one(algo: str, impl: str, seed: int, budget: int, time_cap: float, full_budget: bool = False) -> RunResult:
    """One training run; an exception becomes a result with ``error`` set (the table goes on)."""
    if impl.endswith(BASE):
        assert BASELINE_TREE is not None
        try:
            return run_in_tree(BASELINE_TREE, algo, impl[: -len(BASE)], seed, budget, time_cap, full_budget)
        except Exception as exc:
            nan = float("nan")
            return RunResult(0, 0, nan, nan, nan, nan, False, None, None, error=f"{type(exc).__name__}: {exc}")
    spec = ALGOS[algo]
    tc = load(spec).train
    clock = RunClock(tc.eval_interval, tc.eval_episodes, spec.threshold, seed, time_cap, full_budget)
    try:
        if impl in ("sb3", "hand"):
            # rlgraph's torch backend flushes denormals in this thread (as TF and JAX do by default);
            # the baselines run with torch's own default (kept) unless --flush-denormal-baselines.
            torch.set_flush_denormal(FLUSH_BASELINES)
        if impl == "sb3":
            return run_sb3(algo, spec, seed, budget, clock)
        if impl == "hand":
            return HAND_LOOPS[algo](load(spec, [f"train.seed={seed}"]), seed, budget, clock)
        backend, mode = impl.rsplit("-", 1)
        return run_rlgraph(spec, backend, mode, seed, budget, clock)
    except Exception as exc:  # keep the other runs going; the table says which failed
        traceback.print_exc()
        nan = float("nan")
        return RunResult(0, 0, nan, nan, nan, nan, False, None, None, error=f"{type(exc).__name__}: {exc}")


def shapes(algo: str) -> dict:
    """Keyword arguments of :func:`roofline.update_flops` for the config's networks and batch."""
    config = load(ALGOS[algo])
    cfg = config.agent
    env = gym.make(config.env.id)
    obs_dim = int(np.prod(env.observation_space.shape))
    space = env.action_space
    env.close()
    if algo == "sac":
        return {
            "obs_dim": obs_dim,
            "act_dim": int(np.prod(space.shape)),
            "actor_hidden": list(cfg.actor_network.hidden),
            "critic_hidden": list(cfg.critic_network.hidden),
            "batch": cfg.batch_size,
        }
    out = {"obs_dim": obs_dim, "n_actions": int(space.n), "hidden": list(cfg.network.hidden), "batch": cfg.batch_size}
    if algo == "dqn":
        out["double_q"] = bool(cfg.double_q)
    return out


def matmul_size(algo: str) -> tuple[int, int, int]:
    """The ``(m, k, n)`` of the widest hidden-layer matmul of ``algo``'s networks in an update."""
    sh = shapes(algo)
    hidden = sh["hidden"] if "hidden" in sh else [*sh["actor_hidden"], *sh["critic_hidden"]]
    return roofline.network_matmul(sh["batch"], hidden)


def describe(algo: str, budget: int) -> str:
    """One line naming the algorithm's config and run settings."""
    config = load(ALGOS[algo])
    tc = config.train
    return (
        f"{ALGOS[algo].name} {config.env.id} ({ALGOS[algo].config.name}, {config.env.num_envs} env(s)): "
        f"eval every {tc.eval_interval} env steps x {tc.eval_episodes} episodes, threshold "
        f"{ALGOS[algo].threshold:g}, budget {budget} env steps"
    )


def _med(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and np.isfinite(v)]
    return statistics.median(values) if values else None


def _fmt(value: float | None, spec: str = ".0f") -> str:
    return "-" if value is None else format(value, spec)


def print_algo(algo: str, impls: list[str], results: dict, seeds: list[int], budget: int, mm) -> None:
    """The markdown table of one algorithm (medians over seeds, per-seed ratios) and the roofline lines."""
    base = "sb3" if "sb3" in impls else "hand"
    print()
    print(describe(algo, budget))
    print(
        f"| implementation | env steps/s | updates/s | env steps/CPU-s | solved | steps to {ALGOS[algo].threshold:g} "
        f"| s to {ALGOS[algo].threshold:g} | env steps/s vs {base} | updates/s vs {base} | per CPU-s vs {base} "
        f"| steps to solve vs {base} | s to solve vs {base} |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def ratios(impl: str, key: str) -> float | None:
        out = []
        for s in seeds:
            a, b = results[(algo, impl, s)], results[(algo, base, s)]
            va, vb = getattr(a, key), getattr(b, key)
            if va is not None and vb is not None and np.isfinite(va) and np.isfinite(vb) and vb > 0:
                out.append(va / vb)
        return _med(out)

    flops = roofline.update_flops(algo, **shapes(algo))
    lines = []
    for impl in impls:
        runs = [results[(algo, impl, s)] for s in seeds]
        errors = [r.error for r in runs if r.error]
        sps, ups = _med([r.steps_per_s for r in runs]), _med([r.updates_per_s for r in runs])
        solved = [r for r in runs if r.solved]
        cols = [
            _fmt(sps),
            _fmt(ups),
            _fmt(_med([r.steps_per_cpu_s for r in runs])),
            f"{len(solved)}/{len(runs)}" + (f" ({len(errors)} failed)" if errors else ""),
            _fmt(_med([r.steps_to_solve for r in solved])),
            _fmt(_med([r.s_to_solve for r in solved]), ".1f"),
            _fmt(ratios(impl, "steps_per_s"), ".2f"),
            _fmt(ratios(impl, "updates_per_s"), ".2f"),
            _fmt(ratios(impl, "steps_per_cpu_s"), ".2f"),
            _fmt(ratios(impl, "steps_to_solve"), ".2f"),
            _fmt(ratios(impl, "s_to_solve"), ".2f"),
        ]
        print(f"| {label(impl)} | " + " | ".join(cols) + " |")
        if ups:
            lines.append(f"  {label(impl):<24} {roofline.roofline_line(flops, ups, mm)}")
        for e in dict.fromkeys(errors):  # each distinct error once
            lines.append(f"  {label(impl):<24} FAILED: {e}")
    print("\n".join(lines))
    print_iqm(algo, impls, results, seeds)


def print_iqm(algo: str, impls: list[str], results: dict, seeds: list[int]) -> None:
    """Per implementation, the IQM of the seeds' final evaluation returns and its 95 % stratified-
    bootstrap interval (rliable); a note instead below MIN_SEEDS seeds or without the stats extra."""
    from rlgraph_core.stats import MIN_SEEDS, format_interval, iqm_interval  # not in a --baseline-tree child

    if len(seeds) < MIN_SEEDS:
        print(f"  (IQM [95% CI] of the final evaluation return: needs at least {MIN_SEEDS} seeds, got {len(seeds)})")
        return
    finals = {
        impl: [r.final_return for r in (results[(algo, impl, s)] for s in seeds) if r.final_return is not None]
        for impl in impls
    }
    try:
        intervals = iqm_interval({impl: v for impl, v in finals.items() if len(v) >= MIN_SEEDS})
    except RLGraphError as exc:
        print(f"  (IQM [95% CI] left out: {exc})")
        return
    for impl in impls:
        where = intervals.get(impl)
        cell = format_interval(where) if where else f"- ({len(finals[impl])} seeds with an evaluation)"
        print(f"  {label(impl):<24} final eval return IQM [95% CI] over {len(seeds)} seeds: {cell}")


def parse_budget(text: str | None, algos: list[str], quick: bool) -> dict[str, int]:
    """``--budget``: one number for every algorithm, or ``ppo=50000,sac=10000``; default the
    config's ``total_timesteps`` (the ``--quick`` budgets with ``--quick``)."""
    out = {a: (ALGOS[a].quick_budget if quick else load(ALGOS[a]).train.total_timesteps) for a in algos}
    if text:
        for part in text.split(","):
            if "=" in part:
                key, value = part.split("=", 1)
                if key not in out:
                    raise SystemExit(f"--budget: unknown algorithm {key!r}")
                out[key] = int(value)
            else:
                out = {a: int(part) for a in out}
    return out


def set_threads() -> None:
    """One thread for torch, TF (if installed) and OpenMP; the note printed says what was set."""
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set (or parallel work already ran) in this process
        pass
    try:
        import tensorflow as tf
    except ImportError:
        return
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)


def timed_run(
    algo: str, impl: str, seed: int, budget: int, time_cap: float, full_budget: bool = False
) -> tuple[RunResult, float]:
    """:func:`run_one` and its wall-clock seconds (the unit of work of a ``--jobs`` worker)."""
    t0 = time.perf_counter()
    return run_one(algo, impl, seed, budget, time_cap, full_budget), time.perf_counter() - t0


def report(job: tuple[str, str, int], r: RunResult, wall: float) -> None:
    """The progress line of one finished run."""
    algo, impl, seed = job
    if r.error:
        status = f"FAILED ({r.error})"
    elif r.solved:
        status = f"solved at {r.steps_to_solve} steps, {r.s_to_solve:.1f} s"
    else:
        status = f"not solved in {r.steps} steps{' (cut by time cap)' if r.cut else ''}"
    print(
        f"  seed {seed} {algo} {label(impl)}: {r.steps_per_s:.0f} env steps/s, "
        f"{r.updates_per_s:.0f} updates/s, {r.steps_per_cpu_s:.0f} env steps/CPU-s, {status} [{wall:.0f} s wall]",
        flush=True,
    )


def main() -> None:
    """Parse flags, run every (seed, algorithm, implementation) interleaved, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", default="ppo,dqn,sac", help="comma-separated subset of ppo,dqn,sac")
    parser.add_argument(
        "--impls", default=None, help="comma-separated subset of sb3,hand,<backend>-<mode> (default all)"
    )
    parser.add_argument("--seeds", default=None, help="comma-separated seeds (default 0,1,2; 0 with --quick)")
    parser.add_argument(
        "--budget", default=None, help="env-step cap: N for all, or ppo=N,dqn=N,sac=N (default: config)"
    )
    parser.add_argument(
        "--time-cap", type=float, default=None, help="wall-clock cap (s) of one run (default 300; 90 with --quick)"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs at a time, each in its own 1-thread process (default 1; 2 halves the wall time on 2 idle cores)",
    )
    parser.add_argument("--quick", action="store_true", help="short budgets, one seed: a smoke test of every path")
    parser.add_argument(
        "--full-budget",
        action="store_true",
        help="train every run to its budget (steps/s to solve still noted): throughput over the same window for all",
    )
    parser.add_argument(
        "--baseline-tree",
        default=None,
        help="another checkout (e.g. git worktree of a release): its rlgraph runs too, as IMPL@base, same run",
    )
    parser.add_argument(
        "--flush-denormal-baselines",
        action="store_true",
        help="run SB3 and the hand-written loop with denormals flushed too (torch.set_flush_denormal(True), "
        "rlgraph's torch default; torch's own default keeps them)",
    )
    parser.add_argument("--child-run", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    global FLUSH_BASELINES
    FLUSH_BASELINES = args.flush_denormal_baselines
    if args.child_run:  # one run for --baseline-tree, in this (older) tree's packages
        set_threads()
        result = run_one(*json.loads(args.child_run))
        print("RESULT " + json.dumps(dataclasses.asdict(result)), flush=True)
        return
    global BASELINE_TREE
    BASELINE_TREE = args.baseline_tree
    algos = [a for a in args.algos.split(",") if a]
    unknown = sorted(set(algos) - set(ALGOS))
    if unknown:
        parser.error(f"unknown algorithms {unknown}; known: {sorted(ALGOS)}")
    available = available_impls()
    if not sb3_available():
        print(
            "NOTE: stable-baselines3 is not installed, so the SB3 runs are skipped and ratios are to the "
            'hand-written loop (install it with: pip install -c constraints.txt -e "rlgraph_core[bench]").'
        )
    impls = args.impls.split(",") if args.impls else available
    if "sb3" in impls and not sb3_available():
        impls.remove("sb3")
    if args.baseline_tree:
        impls += [f"{i}{BASE}" for i in impls if i not in ("sb3", "hand")]
        available += [i for i in impls if i.endswith(BASE)]
    bad = sorted(set(impls) - set(available))
    if bad:
        parser.error(f"unknown or uninstalled implementations {bad}; available: {available}")
    if "hand" not in impls and "sb3" not in impls:
        parser.error("the ratio columns need sb3 or hand among --impls")
    seeds = [int(s) for s in (args.seeds or ("0" if args.quick else "0,1,2")).split(",")]
    budgets = parse_budget(args.budget, algos, args.quick)
    time_cap = args.time_cap if args.time_cap is not None else (90.0 if args.quick else 300.0)

    if os.environ.get("OMP_NUM_THREADS") != "1":
        print("NOTE: OMP_NUM_THREADS is not 1 (set it before starting Python for a strict 1-thread run).")
    if "intra_op_parallelism_threads=1" not in os.environ.get("XLA_FLAGS", ""):
        # XLA (the jax backend plugin, when installed) fixes its CPU thread pool when it starts.
        print(
            "NOTE: XLA_FLAGS lacks '--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1' "
            "(set it before starting Python for a strict 1-thread run of an XLA-based backend)."
        )
    set_threads()
    versions = [f"torch {torch.__version__}", f"gymnasium {gym.__version__}", f"numpy {np.__version__}"]
    if sb3_available():
        import stable_baselines3

        versions.append(f"stable-baselines3 {stable_baselines3.__version__}")
    if any(i.startswith("tf-") for i in impls):
        import tensorflow as tf

        versions.append(f"tensorflow {tf.__version__}")
    for name in sorted({i.split("-")[0] for i in impls} - {"sb3", "hand", "torch", "tf"}):
        try:  # an outside backend plugin's framework, when it is a distribution of that name (jax)
            versions.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    mm = {a: roofline.matmul_gflops([matmul_size(a), (2048, 2048, 2048)]) for a in algos}
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, Python {platform.python_version()}, "
        f"{', '.join(versions)}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
        f"1 thread; seeds {seeds}; time cap {time_cap:.0f} s per run; {args.jobs} run(s) at a time"
    )
    print("1-thread float32 torch matmul now: " + "; ".join(f"{a} net {mm[a].describe()}" for a in algos))

    # seeds outer, implementations in turns within a seed (the order rotating per seed)
    jobs = [
        (algo, impl, seed)
        for k, seed in enumerate(seeds)
        for algo in algos
        for impl in impls[k % len(impls) :] + impls[: k % len(impls)]
    ]
    results: dict[tuple[str, str, int], RunResult] = {}
    t_start = time.perf_counter()
    if args.jobs == 1:
        for job in jobs:
            t0 = time.perf_counter()
            results[job] = run_one(*job, budgets[job[0]], time_cap, args.full_budget)
            report(job, results[job], time.perf_counter() - t0)
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=args.jobs, mp_context=ctx, initializer=set_threads) as pool:
            futures = {pool.submit(timed_run, *job, budgets[job[0]], time_cap, args.full_budget): job for job in jobs}
            for future in as_completed(futures):
                results[futures[future]], wall = future.result()
                report(futures[future], results[futures[future]], wall)
    print(f"\ntotal wall time {time.perf_counter() - t_start:.0f} s, load average now {os.getloadavg()[0]:.1f}")
    for algo in algos:
        print_algo(algo, impls, results, seeds, budgets[algo], mm[algo])
    print(
        "\nenv steps/s and updates/s: training rate from the first evaluation to the end of the run "
        "(evaluations excluded), median over seeds; env steps/CPU-s: the same per CPU-second of the "
        "process running it; steps / s to solve: first evaluation at or above "
        "the threshold, training seconds (evaluations and model construction excluded, compilation "
        "included), median over solved seeds; ratios: median over seeds of the per-seed ratio."
    )


if __name__ == "__main__":
    main()
