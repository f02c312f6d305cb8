"""PPO with a recurrent policy (``network: {type: lstm | gru}``), trained on sequences.

Acting, rollouts and the sequence layout are those of every recurrent on-policy agent
(:mod:`rlgraph_core.agents.recurrent_on_policy`); PPO's part: a minibatch is ``batch_size /
seq_len`` whole sequences, each unrolled from its stored state, ``n_epochs`` times over the
rollout. GAE, the clipped loss and the optimizer are PPO's. Fused rounds are not supported (the
epochs run step by step, in eager and static mode alike).
"""

from __future__ import annotations

import numpy as np

from rlgraph_core.agents.ppo import PPOAgent
from rlgraph_core.agents.recurrent_on_policy import RecurrentActing, RecurrentOnPolicyGraph, sequences
from rlgraph_core.graph import api
from rlgraph_core.memories.obs import map_obs
from rlgraph_core.spaces import FloatBox

#: The per-step rollout fields a sequence minibatch takes (besides observations and states).
_STEP_FIELDS = ("actions", "log_probs", "values", "advantages", "returns")


class RecurrentPPOGraph(RecurrentOnPolicyGraph):
    """The root component of recurrent PPO: a recurrent actor-critic, GAE and PPO's loss."""

    @api
    def loss(self, obs, state, reset, actions, old_log_probs, old_values, advantages, returns, clip_range):
        """PPO's loss of a minibatch of sequences: ``obs [L, S, ...]`` unrolled from ``state``
        (``[S, units]`` each), every per-step input ``[L, S, ...]``."""
        log_probs, entropy, values = self.policy.evaluate(obs, state, reset, actions)
        flat = [self.ops.reshape(x, [-1]) for x in (old_log_probs, old_values, advantages, returns)]
        return self.pg_loss.loss(log_probs, flat[0], entropy, values, flat[1], flat[2], flat[3], clip_range)


class RecurrentPPOAgent(RecurrentActing, PPOAgent):
    """PPO-clip on sequences with an LSTM or GRU policy (module docstring)."""

    graph_class = RecurrentPPOGraph

    def _loss_spaces(self, obs_b, action_b, float_b):
        floats = ("old_log_probs", "old_values", "advantages", "returns")
        return {**self._sequence_loss_spaces(obs_b, action_b, float_b, *floats), "clip_range": FloatBox(shape=())}

    # --- learning --------------------------------------------------------------------------
    def _fuses_round(self, total: int, batch_size: int) -> bool:
        return False

    def _learn(self, rollout):
        """``n_epochs`` of shuffled minibatches of whole sequences (module docstring)."""
        cfg = self.config
        to_t, to_np = self.backend.to_tensor, self.backend.to_numpy
        seq_len = self.seq_len
        steps, envs = np.shape(rollout["rewards"])
        pieces = steps // seq_len

        obs = map_obs(lambda x: sequences(x, seq_len), rollout["obs"])
        starts = sequences(rollout["episode_starts"], seq_len)
        fields = {k: sequences(rollout[k], seq_len) for k in _STEP_FIELDS}
        states = {
            k: np.asarray(v, np.float32).reshape(pieces * envs, -1) for k, v in rollout["sequence_states"].items()
        }
        count = pieces * envs
        per_batch = max(1, min(cfg.batch_size, steps * envs) // seq_len)
        clip_range = float(self.clip_schedule(self.timesteps))
        clip_t = to_t(np.float32(clip_range))
        outputs, early_stop = [], False
        for _ in range(cfg.n_epochs):
            order = self.shuffle_rng.permutation(count)
            for first in range(0, count, per_batch):
                idx = order[first : first + per_batch]
                out = self.train_step(
                    to_t(map_obs(lambda v: v[:, idx], obs)),
                    {k: to_t(v[idx]) for k, v in states.items()},
                    to_t(starts[:, idx]),
                    *(to_t(f[:, idx]) for f in fields.values()),
                    clip_t,
                )
                self.updates += 1
                outputs.append(out)
                if cfg.target_kl is not None and float(to_np(out[4])) > 1.5 * cfg.target_kl:
                    early_stop = True
                    break
            if early_stop:
                break
        per_step = np.array([[float(to_np(x)) for x in out] for out in outputs])
        names = ("loss", "pg_loss", "vf_loss", "entropy", "approx_kl", "clip_fraction")
        metrics = {name: float(m) for name, m in zip(names, np.mean(per_step, axis=0))}
        metrics.update(clip_range=clip_range, gradient_steps=len(per_step), early_stop=early_stop)
        return metrics
