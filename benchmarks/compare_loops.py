"""The run clock and the hand-written (CleanRL-style) PyTorch loops of ``compare.py``.

:class:`RunClock` is what every implementation in ``compare.py`` reports to: it decides when an
evaluation is due (every ``eval_interval`` env steps), times the evaluations so they can be
left out of the training time, records when the solve threshold was first reached, and cuts a
run that exceeds its wall-clock cap.

The hand-written loops take their networks, replays and updates from ``reference.py`` (the one
copy every benchmark's hand-written baseline uses); the loops themselves are written here
because those benchmarks' loops have constant rates and no evaluation, while ``compare.py``
runs the shipped configs (PPO's linear learning-rate and clip-range schedules) to a solve
threshold. Every hyperparameter is read from the validated rlgraph config, so the loops train
exactly what ``configs/*.yaml`` describes.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Callable

import gymnasium as gym
import numpy as np
import torch

from reference import (
    ActorCritic,
    NumpyReplay,
    PPORollout,
    SACLearner,
    dqn_update,
    make_vec,
    mlp,
    ppo_epochs,
    true_next_obs,
)
from rlgraph_core.components.schedules import as_schedule
from rlgraph_core.evaluation import evaluate_policy

Policy = Callable[[np.ndarray], np.ndarray]


@dataclass
class RunResult:
    """What one training run of one implementation produced.

    ``train_s`` is wall-clock training time (evaluations excluded, agent/model construction
    excluded, compilation included); the throughput rates cover the window from the first
    evaluation to the end of the run (the whole run when it ended at the first evaluation).
    ``steps_per_cpu_s`` divides by this process's CPU time in that window instead (less
    disturbed by other processes competing for the cores).
    """

    steps: int
    updates: int
    train_s: float
    steps_per_s: float
    updates_per_s: float
    steps_per_cpu_s: float
    solved: bool
    steps_to_solve: int | None
    s_to_solve: float | None
    cut: bool = False
    error: str | None = None
    #: mean return of the run's last evaluation (the solving one for a solved run), None before any
    final_return: float | None = None


class RunClock:
    """Evaluation cadence, evaluation timing, solve detection and the wall-clock cap of one run."""

    def __init__(
        self,
        eval_interval: int,
        eval_episodes: int,
        threshold: float,
        seed: int,
        time_cap: float,
        full_budget: bool = False,
    ):
        self.eval_interval, self.eval_episodes, self.threshold = eval_interval, eval_episodes, threshold
        #: train on past the solving evaluation to the budget (throughput over the whole run)
        self.full_budget = full_budget
        self.eval_seed = 10_000 + seed  # the seeds rlgraph's RunRecorder evaluates with
        self.time_cap = time_cap
        self.next_eval = eval_interval
        self.t0: float | None = None
        self.cpu0 = 0.0
        self.eval_wall = self.eval_cpu = 0.0
        #: (env steps, updates, training seconds, training CPU seconds) at the start of every evaluation
        self.marks: list[tuple[int, int, float, float]] = []
        self.last: tuple[int, int, float, float] = (0, 0, 0.0, 0.0)
        self.solved_at: tuple[int, float] | None = None
        self.last_return: float | None = None
        self.cut = False
        self._eval_started = self._eval_cpu_started = 0.0

    def start(self) -> None:
        """Training starts now (after the model / agent is built)."""
        self.t0, self.cpu0 = time.perf_counter(), time.process_time()

    def train_seconds(self) -> float:
        """Wall-clock seconds since :meth:`start`, evaluations excluded."""
        assert self.t0 is not None, "RunClock.start() was not called"
        return time.perf_counter() - self.t0 - self.eval_wall

    def train_cpu_seconds(self) -> float:
        """CPU seconds of this process since :meth:`start`, evaluations excluded."""
        return time.process_time() - self.cpu0 - self.eval_cpu

    def _mark(self, steps: int, updates: int) -> tuple[int, int, float, float]:
        return (steps, updates, self.train_seconds(), self.train_cpu_seconds())

    def over_time(self) -> bool:
        """Whether the run has exceeded its wall-clock cap (evaluations included); marks it cut."""
        if self.t0 is not None and time.perf_counter() - self.t0 > self.time_cap:
            self.cut = True
        return self.cut

    def due(self, steps: int) -> bool:
        """Whether an evaluation is due at ``steps`` env steps."""
        return steps >= self.next_eval

    def begin_eval(self, steps: int, updates: int) -> None:
        """An evaluation starts now; records the mark and advances the cadence."""
        self.marks.append(self._mark(steps, updates))
        self.last = self.marks[-1]
        while self.next_eval <= steps:
            self.next_eval += self.eval_interval
        self._eval_started, self._eval_cpu_started = time.perf_counter(), time.process_time()

    def end_eval(self, mean_return: float) -> bool:
        """The evaluation begun last returned ``mean_return``; True when the run should stop here
        (the threshold is reached, unless ``full_budget``)."""
        self.eval_wall += time.perf_counter() - self._eval_started
        self.eval_cpu += time.process_time() - self._eval_cpu_started
        if self.solved_at is None or self.full_budget:
            self.last_return = float(mean_return)
        if self.solved_at is None and mean_return >= self.threshold:
            self.solved_at = (self.last[0], self.last[2])
        return self.stops()

    def stops(self) -> bool:
        """Whether the run ends now: solved (unless ``full_budget``) or past the time cap."""
        return (self.solved_at is not None and not self.full_budget) or self.cut

    def evaluate(self, steps: int, updates: int, policy: Policy, env) -> bool:
        """Evaluate ``policy`` (batch in, batch out) greedily on ``env``; True when solved."""
        self.begin_eval(steps, updates)
        ret = evaluate_policy(policy, env, self.eval_episodes, self.eval_seed)["eval_return_mean"]
        return self.end_eval(ret)

    def note(self, steps: int, updates: int) -> None:
        """Record the latest (env steps, updates) without evaluating (the run's end point)."""
        self.last = self._mark(steps, updates)

    def result(self) -> RunResult:
        """The run's numbers (call when it has ended)."""
        steps, updates, train_s, cpu_s = self.last
        if self.solved_at is not None and not self.full_budget:  # the run ends at the solving evaluation
            steps, updates, train_s, cpu_s = next(m for m in self.marks if m[0] == self.solved_at[0])
        s0, u0, t0, c0 = self.marks[0] if self.marks and self.marks[0][0] < steps else (0, 0, 0.0, 0.0)
        span = max(train_s - t0, 1e-9)
        return RunResult(
            steps=steps,
            updates=updates,
            train_s=train_s,
            steps_per_s=(steps - s0) / span,
            updates_per_s=(updates - u0) / span,
            steps_per_cpu_s=(steps - s0) / max(cpu_s - c0, 1e-9),
            solved=self.solved_at is not None,
            steps_to_solve=None if self.solved_at is None else self.solved_at[0],
            s_to_solve=None if self.solved_at is None else self.solved_at[1],
            cut=self.cut and self.solved_at is None,
            final_return=self.last_return,
        )


# ---------------------------------------------------------------------------- PPO


def hand_ppo(config, seed: int, budget: int, clock: RunClock) -> RunResult:
    """CleanRL-style PPO (GAE, clipped surrogate, advantage normalisation, truncation bootstrap
    from V(final obs)) with the config's schedules for learning rate and clip range."""
    cfg, n = config.agent, config.env.num_envs
    lr_s, clip_s = as_schedule(cfg.optimizer.learning_rate), as_schedule(cfg.clip_range)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    envs, eval_env = make_vec(config.env.id, n), gym.make(config.env.id)
    obs_dim, n_actions = envs.single_observation_space.shape[0], int(envs.single_action_space.n)
    model = ActorCritic(obs_dim, n_actions, list(cfg.network.hidden))
    optimizer = torch.optim.Adam(
        model.parameters(), lr=lr_s(0), eps=cfg.optimizer.eps, betas=cfg.optimizer.betas, foreach=True
    )
    T = cfg.n_steps
    rollout = PPORollout(T, n, obs_dim)

    def greedy(o: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return model.actor(torch.as_tensor(o, dtype=torch.float32)).argmax(-1).numpy()

    clock.start()
    obs, _ = envs.reset(seed=seed)
    steps, updates, t = 0, 0, 0
    while steps < budget and not clock.over_time():
        next_obs, infos = rollout.step(model, envs, t, obs)
        obs, steps, t = next_obs, steps + n, t + 1
        if t == T:
            t = 0
            adv = rollout.advantages(model, next_obs, infos, cfg.gamma, cfg.gae_lambda)
            for group in optimizer.param_groups:
                group["lr"] = float(lr_s(steps))
            updates += ppo_epochs(
                model,
                optimizer,
                rng,
                rollout.flat(adv),
                n_epochs=cfg.n_epochs,
                batch_size=cfg.batch_size,
                clip=float(clip_s(steps)),
                vf_coef=cfg.vf_coef,
                ent_coef=cfg.ent_coef,
                max_grad_norm=cfg.optimizer.max_grad_norm,
                normalize_advantage=cfg.normalize_advantage,
            )
        if _note_and_evaluate(clock, steps, updates, greedy, eval_env):
            break
    return _close(clock, envs, eval_env)


def _note_and_evaluate(clock: RunClock, steps: int, updates: int, greedy: Policy, eval_env) -> bool:
    """Record the step; evaluate when due. True when the run is solved."""
    clock.note(steps, updates)
    return clock.due(steps) and clock.evaluate(steps, updates, greedy, eval_env)


def _close(clock: RunClock, envs, eval_env) -> RunResult:
    envs.close()
    eval_env.close()
    return clock.result()


# ---------------------------------------------------------------------------- DQN


def hand_dqn(config, seed: int, budget: int, clock: RunClock) -> RunResult:
    """CleanRL-style DQN: numpy replay, epsilon-greedy (the net runs only if some env acts
    greedily), double-Q Huber target, Adam with gradient clipping, hard target copies."""
    cfg = config.agent
    eps = as_schedule(cfg.exploration.epsilon)
    lr = as_schedule(cfg.optimizer.learning_rate)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    envs, eval_env = make_vec(config.env.id, config.env.num_envs), gym.make(config.env.id)
    n = envs.num_envs
    obs_dim, n_actions = envs.single_observation_space.shape[0], int(envs.single_action_space.n)
    q_net = mlp(obs_dim, list(cfg.network.hidden), n_actions)
    target_net = copy.deepcopy(q_net)
    optimizer = torch.optim.Adam(q_net.parameters(), lr=lr(0), eps=cfg.optimizer.eps, betas=cfg.optimizer.betas)
    rb = NumpyReplay(cfg.memory.capacity, obs_dim, rng)

    def greedy(o: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return q_net(torch.as_tensor(o, dtype=torch.float32)).argmax(dim=1).numpy()

    clock.start()
    obs, _ = envs.reset(seed=seed)
    steps, last_train, updates = 0, 0, 0
    while steps < budget and not clock.over_time():
        actions = rng.integers(0, n_actions, n)
        explore = rng.random(n) < eps(steps)
        if not explore.all():
            actions = np.where(explore, actions, greedy(obs))
        next_obs, rewards, terminated, truncated, infos = envs.step(actions)
        rb.add(obs, true_next_obs(next_obs, infos), actions, rewards, terminated)
        obs, steps = next_obs, steps + n
        if steps >= cfg.learning_starts and rb.size >= cfg.batch_size and steps - last_train >= cfg.train_freq:
            last_train = steps
            for group in optimizer.param_groups:
                group["lr"] = float(lr(steps))
            for _ in range(cfg.gradient_steps):
                batch = rb.sample(cfg.batch_size)
                dqn_update(q_net, target_net, optimizer, batch, cfg.gamma, cfg.optimizer.max_grad_norm, cfg.double_q)
                updates += 1
                if updates % cfg.target_update_interval == 0:
                    target_net.load_state_dict(q_net.state_dict())
        if _note_and_evaluate(clock, steps, updates, greedy, eval_env):
            break
    return _close(clock, envs, eval_env)


# ---------------------------------------------------------------------------- SAC


def hand_sac(config, seed: int, budget: int, clock: RunClock) -> RunResult:
    """CleanRL-style SAC: tanh-squashed Gaussian actor, twin critics with Polyak targets,
    learned temperature towards entropy -action_dim, three Adam optimizers."""
    cfg = config.agent
    lr = float(as_schedule(cfg.optimizer.learning_rate)(0))
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    envs, eval_env = make_vec(config.env.id, config.env.num_envs), gym.make(config.env.id)
    n = envs.num_envs
    obs_dim, act_dim = envs.single_observation_space.shape[0], envs.single_action_space.shape[0]
    low, high = envs.single_action_space.low, envs.single_action_space.high
    sac = SACLearner(
        obs_dim,
        act_dim,
        list(cfg.actor_network.hidden),
        list(cfg.critic_network.hidden),
        gamma=cfg.gamma,
        tau=cfg.tau,
        target_entropy=-float(act_dim) if cfg.target_entropy == "auto" else float(cfg.target_entropy),
        init_ent_coef=cfg.init_ent_coef,
        lr=lr,
        eps=cfg.optimizer.eps,
        betas=cfg.optimizer.betas,
    )
    rb = NumpyReplay(cfg.memory.capacity, obs_dim, rng, (act_dim,), np.float32)

    def greedy(o: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            unit = sac.actor(torch.as_tensor(o, dtype=torch.float32))[2].numpy()
        return low + 0.5 * (unit + 1.0) * (high - low)

    clock.start()
    obs, _ = envs.reset(seed=seed)
    steps, last_train, updates = 0, 0, 0
    while steps < budget and not clock.over_time():
        if steps < cfg.learning_starts:
            unit = rng.uniform(-1.0, 1.0, (n, act_dim)).astype(np.float32)
        else:
            with torch.no_grad():
                unit = sac.actor(torch.from_numpy(obs.astype(np.float32)))[0].numpy()
        next_obs, rewards, terminated, truncated, infos = envs.step(low + 0.5 * (unit + 1.0) * (high - low))
        rb.add(obs, true_next_obs(next_obs, infos), unit, rewards, terminated)
        obs, steps = next_obs, steps + n
        if steps >= cfg.learning_starts and rb.size >= cfg.batch_size and steps - last_train >= cfg.train_freq:
            last_train = steps
            for _ in range(cfg.gradient_steps):
                sac.update(rb.sample(cfg.batch_size))
                updates += 1
        if _note_and_evaluate(clock, steps, updates, greedy, eval_env):
            break
    return _close(clock, envs, eval_env)


HAND_LOOPS: dict[str, Callable[..., RunResult]] = {"ppo": hand_ppo, "dqn": hand_dqn, "sac": hand_sac}
