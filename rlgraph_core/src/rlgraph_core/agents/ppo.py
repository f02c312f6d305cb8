"""Proximal Policy Optimization (Schulman et al. 2017), clipped-surrogate variant.

The whole algorithm, top to bottom::

    repeat:
        collect n_steps steps of N envs with pi_old             (act / observe)
        V(s_{t+1}) from the true next observation; 0 after termination
        A, R = GAE(r, V, V_next, terminated, truncated)         (components/gae.py)
        for epoch in 1..n_epochs:
            for each shuffled minibatch of batch_size samples:
                one Adam step on PPOLoss                        (components/pg_losses.py)
                stop early if approx KL > 1.5 * target_kl       (optional)
        update the observation normaliser (optional)

The learning rate and the clip range may be schedules over env steps (RL-Zoo's ``lin_`` values
are ``{type: linear, start: x, end: 0, steps: total_timesteps}``).
"""

from __future__ import annotations

from typing import Literal, Optional

import numpy as np
from pydantic import Field, field_validator

from rlgraph_core.agents.on_policy import OnPolicyAgent, OnPolicyConfig, OnPolicyGraph
from rlgraph_core.components.pg_losses import PPOLoss
from rlgraph_core.components.schedules import as_schedule, check_schedule_range
from rlgraph_core.config.common import ScheduleOrFloat
from rlgraph_core.errors import ConfigError
from rlgraph_core.graph import api
from rlgraph_core.memories.rollout_buffer import iterate_minibatches


class PPOConfig(OnPolicyConfig):
    """Hyperparameters of PPO (defaults follow Stable-Baselines3)."""

    type: Literal["ppo"] = "ppo"
    batch_size: int = Field(64, gt=0, description="minibatch size (at most the rollout size n_steps x num_envs)")
    n_epochs: int = Field(10, gt=0, description="passes over each rollout")
    clip_range: ScheduleOrFloat = Field(0.2, description="policy ratio clip range (float or schedule)")
    clip_range_vf: Optional[float] = Field(None, gt=0, description="value clip range; null disables")
    target_kl: Optional[float] = Field(None, gt=0, description="stop a rollout's epochs once approx KL > 1.5 x this")

    @field_validator("clip_range")
    @classmethod
    def _clip_range_positive(cls, v: ScheduleOrFloat) -> ScheduleOrFloat:
        """A float clip range is > 0; a schedule may decay to 0 but never goes negative."""
        return check_schedule_range(v, "clip_range", low=0.0, positive_float=True)

    def validate_run(self, env, train) -> None:
        """A minibatch cannot be larger than a rollout (``n_steps x env.num_envs`` samples).

        Raises:
            ConfigError: naming ``agent.batch_size``, ``agent.n_steps`` and ``env.num_envs``.
        """
        rollout = self.n_steps * env.num_envs
        if self.batch_size > rollout:
            raise ConfigError(
                f"'agent.batch_size' = {self.batch_size} is larger than a PPO rollout, which holds "
                f"agent.n_steps x env.num_envs = {self.n_steps} x {env.num_envs} = {rollout} samples; "
                f"set batch_size to at most {rollout} ({rollout} learns from the whole rollout at once) "
                f"or raise n_steps or num_envs."
            )


class PPOGraph(OnPolicyGraph):
    """The PPO root component: actor-critic, GAE and :class:`PPOLoss`."""

    @api
    def loss(self, obs, actions, old_log_probs, old_values, advantages, returns, clip_range):
        """PPO loss of a minibatch (see :class:`~rlgraph_core.components.pg_losses.PPOLoss`)."""
        log_probs, entropy, values = self.policy.evaluate(obs, actions)
        return self.pg_loss.loss(log_probs, old_log_probs, entropy, values, old_values, advantages, returns, clip_range)


class PPOAgent(OnPolicyAgent):
    """PPO-clip with GAE, minibatch epochs, optional value clipping and KL early stopping."""

    graph_class = PPOGraph
    algorithm = "ppo"

    def __init__(
        self,
        config: PPOConfig,
        observation_space,
        action_space,
        backend,
        *,
        seed: int = 0,
        num_envs: int = 1,
        memory=None,
        components=None,
    ):
        super().__init__(
            config,
            observation_space,
            action_space,
            backend,
            seed=seed,
            num_envs=num_envs,
            memory=memory,
            components=components,
        )
        self.clip_schedule = as_schedule(config.clip_range)

    def _make_loss(self, config):
        return PPOLoss(config.vf_coef, config.ent_coef, config.clip_range_vf, config.normalize_advantage)

    def _loss_spaces(self, obs_b, action_b, float_b):
        from rlgraph_core.spaces import FloatBox

        return {
            "obs": obs_b,
            "actions": action_b,
            "old_log_probs": float_b,
            "old_values": float_b,
            "advantages": float_b,
            "returns": float_b,
            "clip_range": FloatBox(shape=()),
        }

    def _learn(self, rollout):
        """``n_epochs`` of shuffled minibatch steps on a postprocessed rollout (module docstring)."""
        cfg = self.config
        to_t, to_np = self.backend.to_tensor, self.backend.to_numpy
        advantages, returns = rollout["advantages"], rollout["returns"]
        samples = {
            "obs": self._flat(rollout["obs"]),
            "actions": self._flat(rollout["actions"]),
            "log_probs": self._flat(rollout["log_probs"]),
            "values": self._flat(rollout["values"]),
            "advantages": self._flat(advantages),
            "returns": self._flat(returns),
        }
        clip_range = float(self.clip_schedule(self.timesteps))
        clip_t = to_t(np.float32(clip_range))
        batch_size = min(cfg.batch_size, len(samples["obs"]))
        outputs, early_stop = [], False
        for mb in iterate_minibatches(samples, batch_size, cfg.n_epochs, self.shuffle_rng):
            out = self.train_step(
                to_t(mb["obs"]),
                to_t(mb["actions"]),
                to_t(mb["log_probs"]),
                to_t(mb["values"]),
                to_t(mb["advantages"]),
                to_t(mb["returns"]),
                clip_t,
            )
            self.updates += 1
            outputs.append(out)
            if cfg.target_kl is not None and float(to_np(out[4])) > 1.5 * cfg.target_kl:
                early_stop = True  # SB3's rule; the KL is measured before this minibatch's step
                break
        names = ("loss", "pg_loss", "vf_loss", "entropy", "approx_kl", "clip_fraction")
        means = np.mean([[float(to_np(x)) for x in out] for out in outputs], axis=0)
        metrics = {name: float(m) for name, m in zip(names, means)}
        metrics.update(clip_range=clip_range, gradient_steps=len(outputs), early_stop=early_stop)
        return metrics
