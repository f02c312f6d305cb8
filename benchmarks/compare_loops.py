"""The run clock and the hand-written (CleanRL-style) PyTorch loops of ``compare.py``.

:class:`RunClock` is what every implementation in ``compare.py`` reports to: it decides when an
evaluation is due (every ``eval_interval`` env steps), times the evaluations so they can be
left out of the training time, records when the solve threshold was first reached, and cuts a
run that exceeds its wall-clock cap.

The hand-written loops reuse the building blocks of the other benchmarks (``bench_ppo``'s
orthogonally initialised layers and truncation bootstrap, ``bench_dqn``'s and ``bench_sac``'s
numpy ring-buffer replays, MLPs and SAC actor/critic); the loops themselves are written here
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
import torch.nn as nn
import torch.nn.functional as F

import bench_dqn
import bench_ppo
import bench_sac
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


class RunClock:
    """Evaluation cadence, evaluation timing, solve detection and the wall-clock cap of one run."""

    def __init__(self, eval_interval: int, eval_episodes: int, threshold: float, seed: int, time_cap: float):
        self.eval_interval, self.eval_episodes, self.threshold = eval_interval, eval_episodes, threshold
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
        """The evaluation begun last returned ``mean_return``; True when the threshold is reached."""
        self.eval_wall += time.perf_counter() - self._eval_started
        self.eval_cpu += time.process_time() - self._eval_cpu_started
        if self.solved_at is None and mean_return >= self.threshold:
            self.solved_at = (self.last[0], self.last[2])
        return self.solved_at is not None

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
        if self.solved_at is not None:  # the run ends at the solving evaluation
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
        )


def make_vec(env_id: str, num_envs: int):
    """A sync gymnasium vector env with same-step autoreset, as rlgraph's local executor uses."""
    return gym.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode=gym.VectorizeMode.SYNC,
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
    )


# ---------------------------------------------------------------------------- PPO


class ActorCritic(nn.Module):
    """Separate ``hidden`` tanh trunks (orthogonal init, gain sqrt 2); policy head gain 0.01, value head gain 1."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: list[int]):
        super().__init__()

        def trunk(out: int, gain: float) -> nn.Sequential:
            layers, size = [], obs_dim
            for h in hidden:
                layers += [bench_ppo.layer(size, h, float(np.sqrt(2))), nn.Tanh()]
                size = h
            return nn.Sequential(*layers, bench_ppo.layer(size, out, gain))

        self.actor, self.critic = trunk(n_actions, 0.01), trunk(1, 1.0)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """``V(obs)`` ``[B]``."""
        return self.critic(obs).squeeze(-1)


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
    T, batch = cfg.n_steps, cfg.batch_size
    b_obs = np.zeros((T, n, obs_dim), np.float32)
    b_act = np.zeros((T, n), np.int64)
    b_logp, b_val, b_rew, b_final = (np.zeros((T, n), np.float32) for _ in range(4))
    b_term, b_trunc = np.zeros((T, n), bool), np.zeros((T, n), bool)

    def greedy(o: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return model.actor(torch.as_tensor(o, dtype=torch.float32)).argmax(-1).numpy()

    clock.start()
    obs, _ = envs.reset(seed=seed)
    steps, updates, t = 0, 0, 0
    while steps < budget and not clock.over_time():
        with torch.no_grad():
            obs_t = torch.as_tensor(obs, dtype=torch.float32)
            dist = torch.distributions.Categorical(logits=model.actor(obs_t), validate_args=False)
            action = dist.sample()
            b_logp[t], b_val[t] = dist.log_prob(action).numpy(), model.value(obs_t).numpy()
        next_obs, reward, term, trunc, infos = envs.step(action.numpy())
        b_obs[t], b_act[t], b_rew[t], b_term[t], b_trunc[t] = obs, action.numpy(), reward, term, trunc
        b_final[t] = 0.0
        if trunc.any():
            with torch.no_grad():
                v = model.value(torch.as_tensor(bench_ppo.true_next_obs(next_obs, infos), dtype=torch.float32))
            b_final[t] = np.where(trunc, v.numpy(), 0.0)
        obs, steps, t = next_obs, steps + n, t + 1
        if t == T:
            t = 0
            with torch.no_grad():
                last_v = model.value(torch.as_tensor(bench_ppo.true_next_obs(next_obs, infos), dtype=torch.float32))
            next_v = np.where(b_trunc, b_final, np.concatenate([b_val[1:], last_v.numpy()[None]]))
            not_term, not_done = 1.0 - b_term, (1.0 - b_term) * (1.0 - b_trunc)
            adv, last = np.zeros((T, n), np.float32), np.zeros(n, np.float32)
            for k in reversed(range(T)):
                delta = b_rew[k] + cfg.gamma * not_term[k] * next_v[k] - b_val[k]
                last = delta + cfg.gamma * cfg.gae_lambda * not_done[k] * last
                adv[k] = last
            f_obs = torch.as_tensor(b_obs.reshape(-1, obs_dim))
            f_act, f_logp = torch.as_tensor(b_act.reshape(-1)), torch.as_tensor(b_logp.reshape(-1))
            f_adv, f_ret = torch.as_tensor(adv.reshape(-1)), torch.as_tensor((adv + b_val).reshape(-1))
            clip = float(clip_s(steps))
            for group in optimizer.param_groups:
                group["lr"] = float(lr_s(steps))
            for _ in range(cfg.n_epochs):
                perm = rng.permutation(T * n)
                for s in range(0, T * n, batch):
                    idx = torch.as_tensor(perm[s : s + batch])
                    dist = torch.distributions.Categorical(logits=model.actor(f_obs[idx]), validate_args=False)
                    ratio = torch.exp(dist.log_prob(f_act[idx]) - f_logp[idx])
                    a = f_adv[idx]
                    if cfg.normalize_advantage:
                        a = (a - a.mean()) / (a.std() + 1e-8)
                    pg_loss = torch.max(-a * ratio, -a * torch.clamp(ratio, 1 - clip, 1 + clip)).mean()
                    vf_loss = ((model.value(f_obs[idx]) - f_ret[idx]) ** 2).mean()
                    loss = pg_loss + cfg.vf_coef * vf_loss - cfg.ent_coef * dist.entropy().mean()
                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(model.parameters(), cfg.optimizer.max_grad_norm, foreach=True)
                    optimizer.step()
                    updates += 1
        clock.note(steps, updates)
        if clock.due(steps) and clock.evaluate(steps, updates, greedy, eval_env):
            break
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
    q_net = bench_dqn.mlp(obs_dim, list(cfg.network.hidden), n_actions)
    target_net = copy.deepcopy(q_net)
    optimizer = torch.optim.Adam(q_net.parameters(), lr=lr(0), eps=cfg.optimizer.eps, betas=cfg.optimizer.betas)
    rb = bench_dqn.NumpyReplay(cfg.memory.capacity, obs_dim, rng)

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
        rb.add(obs, bench_ppo.true_next_obs(next_obs, infos), actions, rewards, terminated)
        obs, steps = next_obs, steps + n
        if steps >= cfg.learning_starts and rb.size >= cfg.batch_size and steps - last_train >= cfg.train_freq:
            last_train = steps
            for group in optimizer.param_groups:
                group["lr"] = float(lr(steps))
            for _ in range(cfg.gradient_steps):
                b_obs, b_act, b_rew, b_next, b_term = rb.sample(cfg.batch_size)
                with torch.no_grad():
                    if cfg.double_q:
                        next_a = q_net(b_next).argmax(dim=1, keepdim=True)
                        next_q = target_net(b_next).gather(1, next_a).squeeze(1)
                    else:
                        next_q = target_net(b_next).max(dim=1).values
                    target = b_rew + cfg.gamma * (1.0 - b_term) * next_q
                q = q_net(b_obs).gather(1, b_act.unsqueeze(1)).squeeze(1)
                loss = F.smooth_l1_loss(q, target)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(q_net.parameters(), cfg.optimizer.max_grad_norm)
                optimizer.step()
                updates += 1
                if updates % cfg.target_update_interval == 0:
                    target_net.load_state_dict(q_net.state_dict())
        clock.note(steps, updates)
        if clock.due(steps) and clock.evaluate(steps, updates, greedy, eval_env):
            break
    envs.close()
    eval_env.close()
    return clock.result()


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
    actor = bench_sac.Actor(obs_dim, list(cfg.actor_network.hidden), act_dim)
    hid = list(cfg.critic_network.hidden)
    qf1, qf2 = bench_sac.Critic(obs_dim, hid, act_dim), bench_sac.Critic(obs_dim, hid, act_dim)
    qf1_t, qf2_t = copy.deepcopy(qf1), copy.deepcopy(qf2)
    q_params = list(qf1.parameters()) + list(qf2.parameters())
    t_params = list(qf1_t.parameters()) + list(qf2_t.parameters())
    adam = dict(lr=lr, eps=cfg.optimizer.eps, betas=cfg.optimizer.betas)
    q_opt = torch.optim.Adam(q_params, **adam)
    actor_opt = torch.optim.Adam(actor.parameters(), **adam)
    target_entropy = -float(act_dim) if cfg.target_entropy == "auto" else float(cfg.target_entropy)
    log_alpha = torch.full((), float(np.log(cfg.init_ent_coef)), requires_grad=True)
    a_opt = torch.optim.Adam([log_alpha], **adam)
    rb = bench_sac.NumpyReplay(cfg.memory.capacity, obs_dim, act_dim, rng)

    def greedy(o: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            unit = actor(torch.as_tensor(o, dtype=torch.float32))[2].numpy()
        return low + 0.5 * (unit + 1.0) * (high - low)

    clock.start()
    obs, _ = envs.reset(seed=seed)
    steps, last_train, updates = 0, 0, 0
    while steps < budget and not clock.over_time():
        if steps < cfg.learning_starts:
            unit = rng.uniform(-1.0, 1.0, (n, act_dim)).astype(np.float32)
        else:
            with torch.no_grad():
                unit = actor(torch.from_numpy(obs.astype(np.float32)))[0].numpy()
        next_obs, rewards, terminated, truncated, infos = envs.step(low + 0.5 * (unit + 1.0) * (high - low))
        rb.add(obs, bench_ppo.true_next_obs(next_obs, infos), unit, rewards, terminated)
        obs, steps = next_obs, steps + n
        if steps >= cfg.learning_starts and rb.size >= cfg.batch_size and steps - last_train >= cfg.train_freq:
            last_train = steps
            for _ in range(cfg.gradient_steps):
                b_obs, b_act, b_rew, b_next, b_term = rb.sample(cfg.batch_size)
                alpha = log_alpha.exp().detach()
                with torch.no_grad():
                    next_a, next_logp, _ = actor(b_next)
                    next_q = torch.min(qf1_t(b_next, next_a), qf2_t(b_next, next_a))
                    y = b_rew + cfg.gamma * (1.0 - b_term) * (next_q - alpha * next_logp)
                q_loss = 0.5 * (F.mse_loss(qf1(b_obs, b_act), y) + F.mse_loss(qf2(b_obs, b_act), y))
                q_opt.zero_grad()
                q_loss.backward()
                q_opt.step()
                pi, logp, _ = actor(b_obs)
                actor_loss = (alpha * logp - torch.min(qf1(b_obs, pi), qf2(b_obs, pi))).mean()
                actor_opt.zero_grad()
                actor_loss.backward()
                actor_opt.step()
                alpha_loss = -(log_alpha * (logp.detach() + target_entropy)).mean()
                a_opt.zero_grad()
                alpha_loss.backward()
                a_opt.step()
                with torch.no_grad():
                    for tp, p in zip(t_params, q_params):
                        tp.lerp_(p, cfg.tau)
                updates += 1
        clock.note(steps, updates)
        if clock.due(steps) and clock.evaluate(steps, updates, greedy, eval_env):
            break
    envs.close()
    eval_env.close()
    return clock.result()


HAND_LOOPS: dict[str, Callable[..., RunResult]] = {"ppo": hand_ppo, "dqn": hand_dqn, "sac": hand_sac}
