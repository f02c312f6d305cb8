"""IMPALA: importance-weighted actor-learner with V-trace (Espeholt et al. 2018).

The whole algorithm, top to bottom::

    actor (any number of them, each with a copy of the weights at version v):
        collect n_steps steps of N envs with its policy mu             (act / observe)
        keep log mu(a_t|x_t) (``log_probs``), x_{t+1} (``next_obs``)   (the true next observation)
        postprocess: tag the rollout with ``policy_version = v``      (no GAE: the learner's job)
    learner (weights at version v' >= v; batches of several actors concatenated on axis 1):
        one train step, repeated n_epochs times (default 1):
            log pi(a_t|x_t), H, V(x_t)   = actor_critic(x_t, a_t)     (current weights, with gradient)
            V(x_{t+1})                   = actor_critic.value(x_{t+1})
            vs, pg_adv = VTrace(log mu, log pi, r, V(x_t), V(x_{t+1}), terminated, truncated)
                                                                     (components/vtrace.py, no gradient)
            loss = ImpalaLoss(log pi, H, V(x_t), vs, pg_adv)          (components/pg_losses.py)
                 = -mean(pg_adv * log pi) + vf_coef * 0.5 * mean((vs - V)^2) - ent_coef * mean(H)
            RMSprop / Adam step, gradient-norm clipping
        report policy_lag = v' - mean(policy_version)                 (also as ``staleness``)

The learner bootstraps from *its own* values: every step carries its true next observation
(the final observation where an episode ended), so ``V(x_{t+1})`` is recomputed like ``V(x_t)``,
terminations are never bootstrapped and truncations are. Under the local executor the actor is
the learner (policy lag 0: ``pi == mu`` on the first pass, V-trace reduces to n-step returns
with ``lambda = 1``); ``ray_impala`` runs actors and the learner apart. Later passes over one
batch (``n_epochs > 1``, RLlib's ``num_sgd_iter``) are off-policy too and corrected the same way.

``gae_lambda`` is V-trace's ``lambda`` (``c_t = lambda * min(c_bar, rho_t)``; on-policy the
targets are then GAE(lambda)'s returns); ``normalize_advantage`` normalises ``pg_adv``.
"""

from __future__ import annotations

from typing import ClassVar, Literal, Optional

import numpy as np
from pydantic import Field

from rlgraph_core.agents.base import LearnResult
from rlgraph_core.agents.on_policy import (
    OnPolicyAgent,
    OnPolicyConfig,
    OnPolicyGraph,
    OnPolicyOptimizerConfig,
)
from rlgraph_core.components.pg_losses import ImpalaLoss
from rlgraph_core.components.vtrace import VTrace
from rlgraph_core.config.common import ScheduleOrFloat
from rlgraph_core.graph import api
from rlgraph_core.spaces import BoolBox, Dict, FloatBox, IntBox

#: The fields an IMPALA batch needs, time-major ``[T, N, ...]``.
BATCH_KEYS = ("obs", "actions", "log_probs", "rewards", "next_obs", "terminated", "truncated")


class ImpalaOptimizerConfig(OnPolicyOptimizerConfig):
    """RMSprop as in the paper (decay 0.99, no momentum), gradient-norm clip 40.; eps 1e-5 from the
    on-policy defaults, alpha 0.99 from :class:`~rlgraph_core.config.common.OptimizerConfig`."""

    type: Literal["adam", "rmsprop", "sgd"] = "rmsprop"
    learning_rate: ScheduleOrFloat = Field(6e-4, description="float or a schedule over env steps")
    max_grad_norm: Optional[float] = Field(40.0, gt=0, description="global gradient-norm clip; null disables")


class ImpalaConfig(OnPolicyConfig):
    """Hyperparameters of IMPALA (defaults follow the paper where it applies)."""

    capabilities: ClassVar[frozenset[str]] = frozenset({"rollouts", "vtrace"})
    #: A stateful network (``network: {type: lstm | gru}``) makes the assembly build
    #: :class:`~rlgraph_core.agents.recurrent_impala.RecurrentImpalaAgent`, which learns on sequences.
    recurrent_networks: ClassVar[bool] = True

    type: Literal["impala"] = "impala"
    n_steps: int = Field(20, gt=0, description="env steps per env in each rollout fragment (the unroll length)")
    gae_lambda: float = Field(1.0, ge=0, le=1, description="V-trace lambda: c_t = lambda * min(c_bar, rho_t)")
    rho_bar: float = Field(1.0, gt=0, description="truncation of the importance weights in V-trace's TD errors")
    c_bar: float = Field(1.0, gt=0, description="truncation of V-trace's trace coefficients")
    rho_bar_pg: Optional[float] = Field(
        None, gt=0, description="truncation of the policy-gradient importance weights; null: rho_bar"
    )
    n_epochs: int = Field(
        1, gt=0, description="train steps on each batch (later ones are off-policy, V-trace corrected)"
    )
    ent_coef: float = Field(0.01, ge=0, description="weight of the entropy bonus")
    vf_coef: float = Field(0.5, ge=0, description="weight of the value loss 0.5 * mean((vs - V)^2)")
    normalize_advantage: bool = Field(False, description="normalise the policy-gradient advantages per batch")
    optimizer: ImpalaOptimizerConfig = Field(default_factory=ImpalaOptimizerConfig)


class ImpalaGraph(OnPolicyGraph):
    """The IMPALA root component: actor-critic, V-trace and :class:`ImpalaLoss`."""

    def __init__(self, name, config: ImpalaConfig, observation_space, action_space, loss, seed, components=None):
        super().__init__(name, config, observation_space, action_space, loss, seed, components)
        self.vtrace = VTrace(config.gamma, config.rho_bar, config.c_bar, config.rho_bar_pg, config.gae_lambda)
        self.add_components(self.vtrace)

    @api
    def loss(self, obs, actions, behaviour_log_probs, rewards, next_obs, terminated, truncated):
        """IMPALA loss of a time-major ``[T, N, ...]`` batch (module docstring).

        Returns ``(loss, pg_loss, vf_loss, entropy, rho_truncated, c_truncated)``: the last two
        are the fractions of steps whose importance ratio ``pi / mu`` exceeds ``rho_bar`` and
        ``c_bar`` by more than 0.1% (so that float noise of an on-policy batch counts as none).
        """
        ops = self.ops
        horizon = int(rewards.shape[0])

        def merge(x):  # [T, N, ...] -> [T * N, ...] (per key of a Dict observation)
            if isinstance(x, dict):
                return {k: merge(v) for k, v in x.items()}
            return ops.reshape(x, [-1, *(int(d) for d in x.shape[2:])])

        def split(x):  # [T * N] -> [T, N]
            return ops.reshape(x, [horizon, -1])

        log_probs, entropy, values = self.policy.evaluate(merge(obs), merge(actions))
        next_values = self.policy.value(merge(next_obs))
        vs, pg_advantages = self.vtrace.targets(
            behaviour_log_probs, split(log_probs), rewards, split(values), split(next_values), terminated, truncated
        )
        loss, pg_loss, vf_loss, entropy_mean = self.pg_loss.loss(
            log_probs, entropy, values, merge(vs), merge(pg_advantages)
        )
        ratio = ops.stop_gradient(ops.exp(log_probs - merge(behaviour_log_probs)))
        rho_truncated = ops.reduce_mean(ops.cast(ratio > 1.001 * self.vtrace.rho_bar, "float32"))
        c_truncated = ops.reduce_mean(ops.cast(ratio > 1.001 * self.vtrace.c_bar, "float32"))
        return loss, pg_loss, vf_loss, entropy_mean, rho_truncated, c_truncated


def _env_major(space, n: int):
    """``space`` with an env axis of ``n`` in front (and a batch rank: time), of the same kind and
    dtype, so the loss is built for the observations acting was built for (uint8 images too; a
    Dict observation per key, its legal-action mask included)."""
    return _with_env_axis(space, n).with_batch_rank()


def _with_env_axis(space, n: int):
    if isinstance(space, Dict):
        return Dict({k: _with_env_axis(child, n) for k, child in space.items()})
    shape = (n, *space.shape)
    if isinstance(space, BoolBox):
        return BoolBox(shape=shape)
    if isinstance(space, IntBox):
        low, high = np.broadcast_to(space.low, shape), np.broadcast_to(space.high, shape)
        return IntBox(low, high, shape=shape, dtype=space.dtype)
    return FloatBox(shape=shape)


class ImpalaAgent(OnPolicyAgent):
    """IMPALA: actors record behaviour log-probabilities, the learner corrects the lag with V-trace.

    Batches (:meth:`take_rollout` / :meth:`postprocess` on an actor, :meth:`learn` on the learner)
    are time-major ``[T, N, ...]`` with keys ``obs, actions, log_probs`` (behaviour), ``rewards,
    next_obs, terminated, truncated, policy_version`` (plus ``values`` and ``next_values`` of the
    actor, unused by the learner). ``learn`` reports ``policy_lag`` (= ``staleness``: the learner's
    weights version minus the batch's mean ``policy_version``), and ``rho_truncated`` /
    ``c_truncated``, the fractions of steps whose importance ratio was truncated.
    """

    graph_class = ImpalaGraph
    algorithm = "impala"

    def _make_loss(self, config):
        return ImpalaLoss(config.vf_coef, config.ent_coef, config.normalize_advantage)

    def _loss_spaces(self, obs_b, action_b, float_b):
        """Time-major spaces: the batch rank is time, each value holds the N envs of one step."""
        n = self.num_envs
        if self.multi:
            high = np.broadcast_to(np.asarray(self.nvec) - 1, (n, len(self.nvec)))
            actions = IntBox(0, high, shape=(n, len(self.nvec)))
        elif self.discrete:
            actions = IntBox(0, self.num_actions - 1, shape=(n,))
        else:
            actions = FloatBox(shape=(n, self.action_dim))
        env_f = FloatBox(shape=(n,)).with_batch_rank()
        env_b = BoolBox(shape=(n,)).with_batch_rank()
        obs = _env_major(self.observation_space, n)
        return {
            "obs": obs,
            "actions": actions.with_batch_rank(),
            "behaviour_log_probs": env_f,
            "rewards": env_f,
            "next_obs": obs,
            "terminated": env_b,
            "truncated": env_b,
        }

    def _step_extras(self, next_obs):
        """The true next observation of every step: the learner bootstraps from its own V(x_{t+1})."""
        return {"next_obs": next_obs}

    def _is_postprocessed(self, batch):
        return "policy_version" in batch

    def postprocess(self, trajectory: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Actor role: the rollout tagged with ``policy_version`` (V-trace runs on the learner)."""
        batch = dict(trajectory)
        if "policy_version" not in batch:
            batch["policy_version"] = np.full(np.shape(batch["rewards"]), self.weights_version, np.int64)
        return batch

    def learn(self, batch: dict[str, np.ndarray]) -> LearnResult:
        """Learner role: ``n_epochs`` V-trace train steps on a time-major batch (module docstring).

        Batches of several actors may be concatenated along the env axis (axis 1).
        """
        result = super().learn(batch)
        if "staleness" in result.metrics:
            result.metrics["policy_lag"] = result.metrics["staleness"]
        return result

    def update(self, batch=None):
        """Learn once a fragment of ``n_steps`` steps per env is collected (policy lag 0 here)."""
        metrics = super().update(batch)
        if metrics is not None:
            metrics.pop("policy_lag", None)  # always 0 in the single-process loop
        return metrics

    def _learn(self, rollout):
        """``n_epochs`` train steps on the whole batch; the metrics are their means."""
        missing = [k for k in BATCH_KEYS if k not in rollout]
        if missing:
            raise KeyError(
                f"an IMPALA batch needs the time-major fields {list(BATCH_KEYS)}; missing {missing}. "
                f"Collect it with ImpalaAgent.observe / take_rollout (it records next_obs, the true next "
                f"observation of each step, so that the learner bootstraps from its own values)."
            )
        to_t = self.backend.to_tensor
        inputs = [
            to_t(
                rollout[k]
                if isinstance(rollout[k], dict)
                else np.asarray(rollout[k], np.float32 if k in ("log_probs", "rewards") else None)
            )
            for k in BATCH_KEYS
        ]
        return self._train_epochs(inputs)

    def _train_epochs(self, inputs) -> dict[str, float]:
        """``n_epochs`` train steps on the same batch ``inputs`` (tensors): the means of their metrics."""
        to_np = self.backend.to_numpy
        outputs = []
        for _ in range(self.config.n_epochs):
            outputs.append([float(to_np(x)) for x in self.train_step(*inputs)])
            self.updates += 1
        names = ("loss", "pg_loss", "vf_loss", "entropy", "rho_truncated", "c_truncated")
        metrics = {name: float(m) for name, m in zip(names, np.mean(outputs, axis=0))}
        metrics["gradient_steps"] = len(outputs)
        return metrics
