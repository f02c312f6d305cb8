"""The hand-written (CleanRL-style) PyTorch reference pieces that the benchmarks measure rlgraph against.

One copy, imported by ``bench_dqn``, ``bench_sac``, ``bench_ppo``, ``bench_build`` and
``compare_loops`` (the benchmarks run with this folder on ``sys.path``): the vector env every
hand-written loop steps, the numpy ring-buffer replay, the MLPs and networks, and each
algorithm's update written out the way a careful hand-writer would (no rlgraph in it), so the
baselines the benchmark tables compare against are the same code in every script.

The loops themselves stay in their scripts: each measures something else (a fixed-rate window,
a lockstep schedule, a run to a solve threshold with evaluations).
"""

from __future__ import annotations

import copy
import math

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    from rlgraph_core.execution.env_runner import true_next_obs
except ImportError:  # an older checkout (compare.py --baseline-tree): the executor module had it
    from rlgraph_core.execution.local import true_next_obs  # type: ignore[no-redef]

__all__ = [
    "Actor",
    "ActorCritic",
    "Critic",
    "NumpyReplay",
    "PPORollout",
    "SACLearner",
    "dqn_update",
    "layer",
    "make_vec",
    "mlp",
    "ppo_epochs",
    "true_next_obs",
]


def make_vec(env_id: str, num_envs: int):
    """A sync gymnasium vector env with same-step autoreset, as rlgraph's local executor uses."""
    return gym.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode=gym.VectorizeMode.SYNC,
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
    )


def mlp(in_dim: int, hidden: list[int], out_dim: int) -> nn.Sequential:
    """``Linear -> ReLU`` per hidden size, then a linear output layer."""
    layers, size = [], in_dim
    for h in hidden:
        layers += [nn.Linear(size, h), nn.ReLU()]
        size = h
    return nn.Sequential(*layers, nn.Linear(size, out_dim))


class NumpyReplay:
    """A plain ring buffer of transitions in preallocated numpy arrays.

    ``action_shape`` ``()`` with ``int64`` holds discrete actions (DQN); ``(act_dim,)`` with
    ``float32`` holds continuous ones (SAC).
    """

    def __init__(
        self,
        capacity: int,
        obs_dim: int,
        rng: np.random.Generator,
        action_shape: tuple[int, ...] = (),
        action_dtype=np.int64,
    ):
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), np.float32)
        self.actions = np.zeros((capacity, *action_shape), action_dtype)
        self.rewards = np.zeros(capacity, np.float32)
        self.terminals = np.zeros(capacity, np.float32)
        self.capacity, self.pos, self.size, self.rng = capacity, 0, 0, rng

    def add(self, obs, next_obs, actions, rewards, terminals):
        """Store one row per env (terminated only: a truncated episode still bootstraps)."""
        for i in range(len(obs)):
            p = self.pos
            self.obs[p], self.next_obs[p], self.actions[p] = obs[i], next_obs[i], actions[i]
            self.rewards[p], self.terminals[p] = rewards[i], terminals[i]
            self.pos = (p + 1) % self.capacity
            self.size = min(self.size + 1, self.capacity)

    def sample(self, batch_size: int):
        """``(obs, actions, rewards, next_obs, terminals)`` tensors of a uniform sample."""
        idx = self.rng.integers(0, self.size, batch_size)
        return (
            torch.from_numpy(self.obs[idx]),
            torch.from_numpy(self.actions[idx]),
            torch.from_numpy(self.rewards[idx]),
            torch.from_numpy(self.next_obs[idx]),
            torch.from_numpy(self.terminals[idx]),
        )


# ---------------------------------------------------------------------------- DQN


def dqn_update(q_net, target_net, optimizer, batch, gamma: float, max_grad_norm: float, double_q: bool = True):
    """One DQN gradient step: (double-)Q target, Huber loss (delta 1), clipped Adam step."""
    b_obs, b_act, b_rew, b_next, b_term = batch
    with torch.no_grad():
        if double_q:  # the online net picks, the target net evaluates
            next_a = q_net(b_next).argmax(dim=1, keepdim=True)
            next_q = target_net(b_next).gather(1, next_a).squeeze(1)
        else:
            next_q = target_net(b_next).max(dim=1).values
        target = b_rew + gamma * (1.0 - b_term) * next_q
    q = q_net(b_obs).gather(1, b_act.unsqueeze(1)).squeeze(1)
    loss = F.smooth_l1_loss(q, target)
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(q_net.parameters(), max_grad_norm)
    optimizer.step()
    return loss


# ---------------------------------------------------------------------------- SAC


class Actor(nn.Module):
    """Tanh-squashed Gaussian policy with a state-dependent, clipped log-std."""

    def __init__(self, obs_dim: int, hidden: list[int], act_dim: int):
        super().__init__()
        self.trunk = mlp(obs_dim, hidden[:-1], hidden[-1])
        self.mean = nn.Linear(hidden[-1], act_dim)
        self.log_std = nn.Linear(hidden[-1], act_dim)

    def forward(self, obs):
        """``(action in (-1, 1), log-prob)`` with the tanh log-det correction; and ``tanh(mean)``."""
        h = F.relu(self.trunk(obs))
        mean, log_std = self.mean(h), self.log_std(h).clamp(-20.0, 2.0)
        u = mean + log_std.exp() * torch.randn_like(mean)
        log_prob = (-0.5 * ((u - mean) / log_std.exp()) ** 2 - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        log_prob -= (2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))).sum(-1)
        return torch.tanh(u), log_prob, torch.tanh(mean)


class Critic(nn.Module):
    """Q(s, a) on the concatenated observation and action."""

    def __init__(self, obs_dim: int, hidden: list[int], act_dim: int):
        super().__init__()
        self.net = mlp(obs_dim + act_dim, hidden, 1)

    def forward(self, obs, actions):
        return self.net(torch.cat([obs, actions], -1)).squeeze(-1)


class SACLearner:
    """SAC's networks, optimizers and update: twin critics with Polyak targets, a learned
    temperature towards ``target_entropy``, three Adam optimizers (``adam`` their keywords)."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        actor_hidden: list[int],
        critic_hidden: list[int],
        *,
        gamma: float,
        tau: float,
        target_entropy: float,
        init_ent_coef: float = 1.0,
        **adam,
    ):
        self.gamma, self.tau, self.target_entropy = gamma, tau, target_entropy
        self.actor = Actor(obs_dim, actor_hidden, act_dim)
        self.qf1, self.qf2 = Critic(obs_dim, critic_hidden, act_dim), Critic(obs_dim, critic_hidden, act_dim)
        self.qf1_target, self.qf2_target = copy.deepcopy(self.qf1), copy.deepcopy(self.qf2)
        self.q_params = list(self.qf1.parameters()) + list(self.qf2.parameters())
        self.target_params = list(self.qf1_target.parameters()) + list(self.qf2_target.parameters())
        self.q_optimizer = torch.optim.Adam(self.q_params, **adam)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), **adam)
        self.log_alpha = torch.full((), float(np.log(init_ent_coef)), requires_grad=True)
        self.a_optimizer = torch.optim.Adam([self.log_alpha], **adam)

    def update(self, batch) -> None:
        """One step of the critics, the actor and the temperature, then the Polyak target update."""
        b_obs, b_act, b_rew, b_next, b_term = batch
        alpha = self.log_alpha.exp().detach()
        with torch.no_grad():
            next_a, next_logp, _ = self.actor(b_next)
            next_q = torch.min(self.qf1_target(b_next, next_a), self.qf2_target(b_next, next_a))
            y = b_rew + self.gamma * (1.0 - b_term) * (next_q - alpha * next_logp)
        q_loss = 0.5 * (F.mse_loss(self.qf1(b_obs, b_act), y) + F.mse_loss(self.qf2(b_obs, b_act), y))
        self.q_optimizer.zero_grad()
        q_loss.backward()
        self.q_optimizer.step()

        pi, logp, _ = self.actor(b_obs)
        actor_loss = (alpha * logp - torch.min(self.qf1(b_obs, pi), self.qf2(b_obs, pi))).mean()
        self.actor_optimizer.zero_grad()
        actor_loss.backward()
        self.actor_optimizer.step()

        alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
        self.a_optimizer.zero_grad()
        alpha_loss.backward()
        self.a_optimizer.step()

        with torch.no_grad():
            for tp, p in zip(self.target_params, self.q_params):
                tp.lerp_(p, self.tau)


# ---------------------------------------------------------------------------- PPO


def layer(n_in: int, n_out: int, gain: float) -> nn.Linear:
    """A linear layer with orthogonal weights (gain) and zero bias."""
    lin = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(lin.weight, gain)
    nn.init.zeros_(lin.bias)
    return lin


class ActorCritic(nn.Module):
    """Separate ``hidden`` tanh trunks (orthogonal init, gain sqrt 2); policy head gain 0.01, value head gain 1."""

    def __init__(self, obs_dim: int, n_actions: int, hidden: list[int] = (64, 64)):
        super().__init__()

        def trunk(out: int, gain: float) -> nn.Sequential:
            layers, size = [], obs_dim
            for h in hidden:
                layers += [layer(size, h, float(np.sqrt(2))), nn.Tanh()]
                size = h
            return nn.Sequential(*layers, layer(size, out, gain))

        self.actor, self.critic = trunk(n_actions, 0.01), trunk(1, 1.0)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """``V(obs)`` ``[B]``."""
        return self.critic(obs).squeeze(-1)


class PPORollout:
    """``T`` steps of ``N`` envs in numpy arrays: sampling, truncation bootstrap and GAE."""

    def __init__(self, T: int, N: int, obs_dim: int):
        self.T, self.N, self.obs_dim = T, N, obs_dim
        self.obs = np.zeros((T, N, obs_dim), np.float32)
        self.act = np.zeros((T, N), np.int64)
        self.logp, self.val, self.rew, self.final = (np.zeros((T, N), np.float32) for _ in range(4))
        self.term, self.trunc = np.zeros((T, N), bool), np.zeros((T, N), bool)

    def step(self, model: ActorCritic, envs, t: int, obs):
        """Sample actions at ``obs``, step ``envs`` and store row ``t``; ``(next_obs, infos)``."""
        with torch.no_grad():
            obs_t = torch.as_tensor(obs, dtype=torch.float32)
            dist = torch.distributions.Categorical(logits=model.actor(obs_t), validate_args=False)
            action = dist.sample()
            self.logp[t], self.val[t] = dist.log_prob(action).numpy(), model.value(obs_t).numpy()
        next_obs, reward, term, trunc, infos = envs.step(action.numpy())
        self.obs[t], self.act[t], self.rew[t], self.term[t], self.trunc[t] = obs, action.numpy(), reward, term, trunc
        self.final[t] = 0.0
        if trunc.any():  # bootstrap cut episodes from V(true final observation)
            with torch.no_grad():
                v = model.value(torch.as_tensor(true_next_obs(next_obs, infos), dtype=torch.float32)).numpy()
            self.final[t] = np.where(trunc, v, 0.0)
        return next_obs, infos

    def advantages(self, model: ActorCritic, next_obs, infos, gamma: float, gae_lambda: float) -> np.ndarray:
        """GAE ``[T, N]`` of the full rollout (``next_obs``/``infos``: the last step's)."""
        with torch.no_grad():
            last_v = model.value(torch.as_tensor(true_next_obs(next_obs, infos), dtype=torch.float32)).numpy()
        next_v = np.where(self.trunc, self.final, np.concatenate([self.val[1:], last_v[None]]))
        not_term = 1.0 - self.term
        not_done = not_term * (1.0 - self.trunc)
        adv, last = np.zeros((self.T, self.N), np.float32), np.zeros(self.N, np.float32)
        for k in reversed(range(self.T)):
            delta = self.rew[k] + gamma * not_term[k] * next_v[k] - self.val[k]
            last = delta + gamma * gae_lambda * not_done[k] * last
            adv[k] = last
        return adv

    def flat(self, adv: np.ndarray):
        """``(obs, actions, log-probs, advantages, returns)`` tensors, ``T * N`` rows each."""
        return (
            torch.as_tensor(self.obs.reshape(-1, self.obs_dim)),
            torch.as_tensor(self.act.reshape(-1)),
            torch.as_tensor(self.logp.reshape(-1)),
            torch.as_tensor(adv.reshape(-1)),
            torch.as_tensor((adv + self.val).reshape(-1)),
        )


def ppo_epochs(
    model: ActorCritic,
    optimizer,
    rng: np.random.Generator,
    flat,
    *,
    n_epochs: int,
    batch_size: int,
    clip: float,
    vf_coef: float,
    ent_coef: float,
    max_grad_norm: float,
    normalize_advantage: bool = True,
) -> int:
    """Epochs of shuffled minibatch steps on the clipped surrogate; returns the number of steps."""
    f_obs, f_act, f_logp, f_adv, f_ret = flat
    n, updates = len(f_obs), 0
    for _ in range(n_epochs):
        perm = rng.permutation(n)
        for s in range(0, n, batch_size):
            idx = torch.as_tensor(perm[s : s + batch_size])
            dist = torch.distributions.Categorical(logits=model.actor(f_obs[idx]), validate_args=False)
            ratio = torch.exp(dist.log_prob(f_act[idx]) - f_logp[idx])
            a = f_adv[idx]
            if normalize_advantage:
                a = (a - a.mean()) / (a.std() + 1e-8)
            pg_loss = torch.max(-a * ratio, -a * torch.clamp(ratio, 1 - clip, 1 + clip)).mean()
            vf_loss = ((model.value(f_obs[idx]) - f_ret[idx]) ** 2).mean()
            loss = pg_loss + vf_coef * vf_loss - ent_coef * dist.entropy().mean()
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm, foreach=True)
            optimizer.step()
            updates += 1
    return updates
