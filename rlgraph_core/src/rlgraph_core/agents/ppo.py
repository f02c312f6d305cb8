"""Proximal Policy Optimization (Schulman et al. 2017), clipped-surrogate variant.

The whole algorithm, top to bottom. Every step that is PPO's own is in this file (the config, the
loss, its wiring and the epoch/minibatch loop, in that order); the rest is the on-policy family's,
shared with A2C and written once in :mod:`rlgraph_core.agents.on_policy`::

    repeat:
        collect n_steps steps of N envs with pi_old                  OnPolicyAgent.act / observe
        V(s_{t+1}) from the true next observation; 0 after termination     OnPolicyAgent.rollout
        A, R = GAE(r, V, V_next, terminated, truncated)              OnPolicyAgent.postprocess
                                                                     (components/gae.py)
        for epoch in 1..n_epochs:                                    PPOAgent._learn
            for each shuffled minibatch of batch_size samples:
                log pi(a|s), H, V(s) of the current weights          PPOGraph.loss
                one Adam step on the clipped loss                    PPOLoss.loss
                stop early if approx KL > 1.5 * target_kl            (optional)
        update the observation normaliser (optional)                 OnPolicyAgent.learn

The learning rate and the clip range may be schedules over env steps (RL-Zoo's ``lin_`` values
are ``{type: linear, start: x, end: 0, steps: total_timesteps}``).

Fused rounds: in static mode on a backend that compiles whole loops (``backend.fuses_loops``),
the ``n_epochs x minibatches`` steps of a rollout run as one compiled program
(:meth:`PPOAgent._fused_epochs`). The minibatch permutations are drawn on the host exactly as the
minibatch loop draws them (:func:`~rlgraph_core.memories.rollout_buffer.minibatch_indices`), so
both paths take the same steps. The step-by-step loop runs instead with ``fuse_rounds: false``,
with ``target_kl`` (its early stop reads each step's KL on the host), with a gradient hook
(Horovod averages each step's gradients on the host) or when ``batch_size`` does not divide the
rollout (a smaller last minibatch does not stack).
"""

from __future__ import annotations

from typing import ClassVar, Literal, Optional

import numpy as np
from pydantic import Field, field_validator

from rlgraph_core.agents.on_policy import OnPolicyAgent, OnPolicyConfig, OnPolicyGraph, validate_sequences
from rlgraph_core.backend import FusedLoop
from rlgraph_core.components.pg_losses import normalize_advantages
from rlgraph_core.components.schedules import as_schedule, check_schedule_range
from rlgraph_core.config.common import ScheduleOrFloat
from rlgraph_core.errors import ConfigError
from rlgraph_core.graph import Component, api
from rlgraph_core.memories.rollout_buffer import iterate_minibatches, minibatch_indices
from rlgraph_core.spaces import Dict, FloatBox

#: The rollout fields a minibatch step takes, in the order of the loss's arguments.
MINIBATCH_FIELDS = ("obs", "actions", "log_probs", "values", "advantages", "returns")


class PPOConfig(OnPolicyConfig):
    """Hyperparameters of PPO (defaults follow Stable-Baselines3)."""

    #: A stateful network (``network: {type: lstm | gru}``) makes the assembly build
    #: :class:`~rlgraph_core.agents.recurrent_ppo.RecurrentPPOAgent`, which trains on sequences.
    recurrent_networks: ClassVar[bool] = True

    type: Literal["ppo"] = "ppo"
    batch_size: int = Field(64, gt=0, description="minibatch size (at most the rollout size n_steps x num_envs)")
    n_epochs: int = Field(10, gt=0, description="passes over each rollout")
    clip_range: ScheduleOrFloat = Field(0.2, description="policy ratio clip range (float or schedule)")
    clip_range_vf: Optional[float] = Field(None, gt=0, description="value clip range; null disables")
    target_kl: Optional[float] = Field(None, gt=0, description="stop a rollout's epochs once approx KL > 1.5 x this")
    fuse_rounds: bool = Field(
        True,
        description="static mode on a backend that compiles loops: run a rollout's n_epochs x minibatches "
        "steps as one compiled program (same minibatches, same result as step by step); it runs step by "
        "step anyway with target_kl, a gradient hook (Horovod) or a batch_size that does not divide the rollout",
    )

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
        if getattr(self.network, "stateful", False):  # whole sequences of seq_len steps per minibatch
            validate_sequences(self, rollout, self.batch_size)
        if self.batch_size > rollout:
            raise ConfigError(
                f"'agent.batch_size' = {self.batch_size} is larger than a PPO rollout, which holds "
                f"agent.n_steps x env.num_envs = {self.n_steps} x {env.num_envs} = {rollout} samples; "
                f"set batch_size to at most {rollout} ({rollout} learns from the whole rollout at once) "
                f"or raise n_steps or num_envs."
            )


class PPOLoss(Component):
    """PPO-clip loss with optional value clipping and an entropy bonus.

    The math, top to bottom (B = minibatch; every mean is over B)::

        A        = normalize(A)  if normalize_advantage          # per minibatch
        ratio    = exp(log pi(a|s) - log pi_old(a|s))
        pg_loss  = mean(max(-A * ratio, -A * clip(ratio, 1 - eps, 1 + eps)))
        v_clip   = V_old + clip(V - V_old, -eps_v, eps_v)        # if clip_range_vf is set
        vf_loss  = mean(max((V - R)^2, (v_clip - R)^2))          # else mean((V - R)^2)
        entropy  = mean(H(pi(.|s)))
        loss     = pg_loss + vf_coef * vf_loss - ent_coef * entropy
        approx_kl     = mean((ratio - 1) - log ratio)            # KL(pi_old || pi) estimate, >= 0
        clip_fraction = mean(|ratio - 1| > eps)

    ``vf_loss`` is the plain mean squared error (as in Stable-Baselines3, so RL-Zoo ``vf_coef``
    values carry over); value clipping takes the pessimistic maximum of the clipped and unclipped
    errors (as in OpenAI baselines). ``eps`` (``clip_range``) is an input so that a schedule can
    change it without rebuilding or recompiling.

    Args:
        vf_coef: weight of the value loss.
        ent_coef: weight of the entropy bonus.
        clip_range_vf: value clipping range ``eps_v`` (None: no value clipping).
        normalize_advantage: normalise advantages per minibatch.
        name: component name.

    Returns (from :meth:`loss`): ``(loss, pg_loss, vf_loss, entropy, approx_kl, clip_fraction)``.
    """

    def __init__(
        self,
        vf_coef: float = 0.5,
        ent_coef: float = 0.0,
        clip_range_vf: float | None = None,
        normalize_advantage: bool = True,
        name: str = "ppo_loss",
    ):
        super().__init__(name)
        if clip_range_vf is not None and clip_range_vf <= 0:
            raise ValueError(f"clip_range_vf must be positive or None, got {clip_range_vf}.")
        self.vf_coef = float(vf_coef)
        self.ent_coef = float(ent_coef)
        self.clip_range_vf = None if clip_range_vf is None else float(clip_range_vf)
        self.normalize_advantage = normalize_advantage

    @api
    def loss(self, log_probs, old_log_probs, entropy, values, old_values, advantages, returns, clip_range):
        """The PPO loss and its diagnostics for one minibatch (see the class docstring)."""
        ops = self.ops
        if self.normalize_advantage:
            advantages = normalize_advantages(ops, advantages)
        log_ratio = log_probs - old_log_probs
        ratio = ops.exp(log_ratio)
        surrogate = -advantages * ratio
        surrogate_clipped = -advantages * ops.clip(ratio, 1.0 - clip_range, 1.0 + clip_range)
        pg_loss = ops.reduce_mean(ops.maximum(surrogate, surrogate_clipped))

        vf_error = ops.square(values - returns)
        if self.clip_range_vf is not None:
            values_clipped = old_values + ops.clip(values - old_values, -self.clip_range_vf, self.clip_range_vf)
            vf_error = ops.maximum(vf_error, ops.square(values_clipped - returns))
        vf_loss = ops.reduce_mean(vf_error)

        entropy_mean = ops.reduce_mean(entropy)
        loss = pg_loss + self.vf_coef * vf_loss - self.ent_coef * entropy_mean

        approx_kl = ops.reduce_mean((ratio - 1.0) - log_ratio)
        clip_fraction = ops.reduce_mean(ops.cast(ops.abs(ratio - 1.0) > clip_range, "float32"))
        sg = ops.stop_gradient
        return loss, sg(pg_loss), sg(vf_loss), sg(entropy_mean), sg(approx_kl), sg(clip_fraction)


class PPOGraph(OnPolicyGraph):
    """The PPO root component: actor-critic, GAE and :class:`PPOLoss`."""

    @api
    def loss(self, obs, actions, old_log_probs, old_values, advantages, returns, clip_range):
        """PPO loss of a minibatch: the current policy's view of it, then :class:`PPOLoss`."""
        log_probs, entropy, values = self.policy.evaluate(obs, actions)
        return self.pg_loss.loss(log_probs, old_log_probs, entropy, values, old_values, advantages, returns, clip_range)


class PPOAgent(OnPolicyAgent):
    """PPO-clip with GAE, minibatch epochs, optional value clipping and KL early stopping."""

    graph_class = PPOGraph
    algorithm = "ppo"

    def _setup_model(self) -> None:
        config = self.config
        super()._setup_model()
        self.clip_schedule = as_schedule(config.clip_range)
        self._epoch_loop: FusedLoop | None = None  # the fused round, made on first use

    def _make_loss(self, config):
        return PPOLoss(config.vf_coef, config.ent_coef, config.clip_range_vf, config.normalize_advantage)

    def _loss_spaces(self, obs_b, action_b, float_b):
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
        """``n_epochs`` of shuffled minibatch steps on a rollout (module docstring): ``rollout`` is
        time-major ``[T, N, ...]`` and postprocessed, i.e. it holds GAE's ``advantages`` and
        ``returns`` (:meth:`OnPolicyAgent.postprocess`) beside what the actor saw and did."""
        cfg = self.config
        samples = {k: self._flat(rollout[k]) for k in MINIBATCH_FIELDS}  # [T * N, ...]
        clip_range = float(self.clip_schedule(self.timesteps))
        clip_t = self.backend.to_tensor(np.float32(clip_range))
        batch_size = min(cfg.batch_size, len(samples["returns"]))
        if self._fuses_round(len(samples["returns"]), batch_size):
            per_step, early_stop = self._fused_epochs(samples, batch_size, clip_t), False
        else:
            per_step, early_stop = self._minibatch_epochs(samples, batch_size, clip_t)
        names = ("loss", "pg_loss", "vf_loss", "entropy", "approx_kl", "clip_fraction")
        metrics = {name: float(m) for name, m in zip(names, np.mean(per_step, axis=0))}
        metrics.update(clip_range=clip_range, gradient_steps=len(per_step), early_stop=early_stop)
        return metrics

    def _fuses_round(self, total: int, batch_size: int) -> bool:
        """Whether this rollout's epochs run as one fused program (module docstring)."""
        cfg = self.config
        return (
            cfg.fuse_rounds
            and self.backend.fuses_loops
            and self.train_step.gradient_hook is None
            and cfg.target_kl is None
            and total % batch_size == 0
            and self._obs_leaf_keys() is not None
        )

    def _obs_leaf_keys(self) -> tuple[str, ...] | None:
        """The keys of a Dict observation whose values are arrays (a masked env's ``{observation,
        action_mask}``), passed to the fused loop as one tensor each; ``()`` for an array
        observation; None for a nested Dict (the loop takes flat tensors: step by step then)."""
        space = self.observation_space
        if not isinstance(space, Dict):
            return ()
        if any(isinstance(child, Dict) for _, child in space.items()):
            return None
        return tuple(space.keys())

    def _minibatch_epochs(self, samples, batch_size: int, clip_t) -> tuple[np.ndarray, bool]:
        """The epochs step by step: ``([K, 6] loss outputs per step, early_stop)``."""
        cfg = self.config
        to_t, to_np = self.backend.to_tensor, self.backend.to_numpy
        outputs, early_stop = [], False
        for mb in iterate_minibatches(samples, batch_size, cfg.n_epochs, self.shuffle_rng):
            out = self.train_step(*(to_t(mb[k]) for k in MINIBATCH_FIELDS), clip_t)
            self.updates += 1
            outputs.append(out)
            if cfg.target_kl is not None and float(to_np(out[4])) > 1.5 * cfg.target_kl:
                early_stop = True  # SB3's rule; the KL is measured before this minibatch's step
                break
        return np.array([[float(to_np(x)) for x in out] for out in outputs]), early_stop

    def _fused_epochs(self, samples, batch_size: int, clip_t) -> np.ndarray:
        """All ``n_epochs x minibatches`` steps as one program: ``[K, 6]`` loss outputs per step.

        The minibatches' sample indices (the same permutations the minibatch loop draws) are the
        per-step inputs; the rollout and the clip range are constants the body takes rows of.
        """
        to_t, to_np = self.backend.to_tensor, self.backend.to_numpy
        indices = minibatch_indices(len(samples["returns"]), batch_size, self.config.n_epochs, self.shuffle_rng)
        loop = self._epoch_loop
        if loop is None:
            loop = self._epoch_loop = self.backend.fused_loop(self._minibatch_step)
        keys, obs = self._obs_leaf_keys(), samples["obs"]
        leaves = [to_t(obs[k]) for k in keys] if keys else [to_t(obs)]
        constants = leaves + [to_t(samples[k]) for k in MINIBATCH_FIELDS[1:]] + [clip_t]
        outputs = loop([to_t(indices)], constants)
        self.updates += len(indices)
        return np.stack([to_np(x) for x in outputs], axis=1).astype(np.float64)

    def _minibatch_step(self, idx, *rollout):
        """Body of the fused round: one PPO step on the minibatch ``idx`` (rows of the rollout).

        ``rollout``: the observation (one tensor per key of a Dict observation, in
        :meth:`_obs_leaf_keys` order), then actions, log-probs, values, advantages, returns and
        the clip range."""
        take = self.backend.ops.take
        keys = self._obs_leaf_keys() or ()
        leaves, (actions, log_probs, values, advantages, returns, clip_range) = (
            rollout[: len(keys) or 1],
            rollout[len(keys) or 1 :],
        )
        obs = {k: take(v, idx) for k, v in zip(keys, leaves)} if keys else take(leaves[0], idx)
        return self.train_step.inline(
            obs,
            take(actions, idx),
            take(log_probs, idx),
            take(values, idx),
            take(advantages, idx),
            take(returns, idx),
            clip_range,
        )
