"""IMPALA with a recurrent policy (``network: {type: lstm | gru}``): V-trace on sequences.

Acting and rollouts are those of every recurrent on-policy agent
(:mod:`rlgraph_core.agents.recurrent_on_policy`): each actor stores, besides the behaviour
log-probabilities, every step's episode start and the state at the start of each sequence of
``seq_len`` steps, and ships them with its fragment (``sequence_states``). The learner::

    cut the fragment [T, N] into T / seq_len x N sequences of L = seq_len steps
    each sequence, plus the observation after its last step (the next sequence's first, or the
    fragment's bootstrap observation), unrolled once from its stored state (reset at episode starts):
        log pi(a_t|x_t), H_t, V(x_t)  for t < L,   V(x_L)  (the state carried on, no reset)
        (the learner's batch is [L + 1, S]: the per-step fields are padded by one step, ignored)
    V(x_{t+1}) = V(x_L) at t = L - 1, the next step's V inside; at a truncation the behaviour
                 policy's V(final observation), computed by the actor from the state the step left
    vs, pg_adv = VTrace(...) over each sequence [L, S]; ImpalaLoss; one train step on all sequences

With ``seq_len = n_steps`` (the paper's scheme and the shipped config's) each fragment is one
sequence, unrolled whole from the state its actor had at the fragment start. A shorter
``seq_len`` truncates back-propagation through time and V-trace's recursion at the sequence ends,
as IMPALA's unroll length does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlgraph_core.agents.impala import ImpalaAgent
from rlgraph_core.agents.recurrent_on_policy import RecurrentActing, RecurrentOnPolicyGraph, sequences
from rlgraph_core.agents.support import time_major
from rlgraph_core.components.vtrace import VTrace
from rlgraph_core.graph import api
from rlgraph_core.memories.obs import map_obs, stored_obs
from rlgraph_core.spaces import BoolBox

#: The fields a recurrent IMPALA batch needs (time-major ``[T, N, ...]``; ``bootstrap_obs``
#: ``[1, N, ...]``, ``sequence_states`` ``{key: [T / seq_len, N, units]}``).
BATCH_KEYS = (
    "obs",
    "actions",
    "log_probs",
    "rewards",
    "terminated",
    "truncated",
    "final_values",
    "episode_starts",
    "bootstrap_obs",
    "sequence_states",
)


class RecurrentImpalaGraph(RecurrentOnPolicyGraph):
    """The root component of recurrent IMPALA: a recurrent actor-critic, V-trace and IMPALA's loss."""

    def __init__(self, name, config, observation_space, action_space, loss, seed, components=None):
        super().__init__(name, config, observation_space, action_space, loss, seed, components)
        self.vtrace = VTrace(config.gamma, config.rho_bar, config.c_bar, config.rho_bar_pg, config.gae_lambda)
        self.add_components(self.vtrace)

    @api
    def loss(self, obs, state, reset, actions, behaviour_log_probs, rewards, final_values, terminated, truncated):
        """IMPALA's loss of sequences of ``L + 1`` steps ``[L + 1, S, ...]`` (module docstring): the
        last step of each holds the observation after its ``L`` steps (the bootstrap value's) and
        padding in the per-step fields (``reset`` False there). Returns what
        :meth:`~rlgraph_core.agents.impala.ImpalaGraph.loss` returns."""
        ops = self.ops
        steps = int(rewards.shape[0]) - 1

        def first(x):  # [(L + 1) * S] or [L + 1, S] -> [L, S]
            return ops.reshape(x, [steps + 1, -1])[:-1]

        log_probs_ext, entropy_ext, values_ext = self.policy.evaluate(obs, state, reset, actions)
        log_probs, entropy = first(log_probs_ext), first(entropy_ext)
        values_ext = ops.reshape(values_ext, [steps + 1, -1])
        values = values_ext[:-1]
        truncated, terminated = first(truncated), first(terminated)
        behaviour_log_probs = first(behaviour_log_probs)
        next_values = ops.where(truncated, first(final_values), values_ext[1:])
        vs, pg_advantages = self.vtrace.targets(
            behaviour_log_probs, log_probs, first(rewards), values, next_values, terminated, truncated
        )

        def flat(x):
            return ops.reshape(x, [-1])

        log_probs, entropy = flat(log_probs), flat(entropy)
        loss, pg_loss, vf_loss, entropy_mean = self.pg_loss.loss(
            log_probs, entropy, flat(values), flat(vs), flat(pg_advantages)
        )
        ratio = ops.stop_gradient(ops.exp(log_probs - flat(behaviour_log_probs)))
        rho_truncated = ops.reduce_mean(ops.cast(ratio > 1.001 * self.vtrace.rho_bar, "float32"))
        c_truncated = ops.reduce_mean(ops.cast(ratio > 1.001 * self.vtrace.c_bar, "float32"))
        return loss, pg_loss, vf_loss, entropy_mean, rho_truncated, c_truncated


class RecurrentImpalaAgent(RecurrentActing, ImpalaAgent):
    """IMPALA with an LSTM or GRU policy (module docstring)."""

    graph_class = RecurrentImpalaGraph

    def _loss_spaces(self, obs_b, action_b, float_b):
        bool_t = time_major(BoolBox().with_batch_rank())
        floats = ("behaviour_log_probs", "rewards", "final_values")
        return {
            **self._sequence_loss_spaces(obs_b, action_b, float_b, *floats),
            "terminated": bool_t,
            "truncated": bool_t,
        }

    def rollout(self) -> dict[str, Any]:
        """The fragment (module docstring): per-step fields ``[T, N, ...]`` with ``episode_starts`` and
        ``final_values`` (the behaviour policy's V of the true final observation where an episode was
        truncated), ``bootstrap_obs`` ``[1, N, ...]`` and ``sequence_states``."""
        assert self._seq_states is not None and self._last_next_obs is not None
        data = {k: map_obs(np.copy, v) for k, v in self.buffer.data().items()}
        data["bootstrap_obs"] = map_obs(lambda v: np.copy(v)[None], self._last_next_obs)
        data["sequence_states"] = {k: np.copy(v) for k, v in self._seq_states.items()}
        return data

    def sequence_batch(self, rollout) -> list:
        """The learner's inputs of a batch, in the ``loss`` argument order, as numpy: observations
        ``[L + 1, S, ...]`` (each sequence and the observation after it), the stored states
        ``{key: [S, units]}``, then ``episode_starts, actions, log_probs, rewards, final_values,
        terminated, truncated``, each ``[L + 1, S]`` (the last step zero padding)."""
        missing = [k for k in BATCH_KEYS if k not in rollout]
        if missing:
            raise KeyError(
                f"a recurrent IMPALA batch needs the fields {list(BATCH_KEYS)}; missing {missing}. Collect it "
                f"with act(obs, explore=True, state=..., episode_start=...) and observe, then take_rollout."
            )
        seq_len = self.seq_len
        steps, envs = np.shape(rollout["rewards"])
        pieces = steps // seq_len

        def with_after(obs, bootstrap):
            # each sequence, then the observation after its last step: the next sequence's first, or the
            # bootstrap one; in the stored dtype (uint8 frames stay uint8 until the graph)
            obs = stored_obs(np.asarray(obs))
            after = np.concatenate([obs[seq_len::seq_len], stored_obs(np.asarray(bootstrap))], axis=0)
            after = after.reshape(1, pieces * envs, *after.shape[2:])
            return np.concatenate([sequences(obs, seq_len), after], axis=0)

        def seq(x, dtype):
            x = sequences(np.asarray(x, dtype), seq_len)
            return np.concatenate([x, np.zeros_like(x[:1])], axis=0)

        states = {
            k: np.asarray(v, np.float32).reshape(pieces * envs, -1) for k, v in rollout["sequence_states"].items()
        }
        obs = rollout["obs"]
        if isinstance(obs, dict):
            observations = {k: with_after(v, rollout["bootstrap_obs"][k]) for k, v in obs.items()}
        else:
            observations = with_after(obs, rollout["bootstrap_obs"])
        return [
            observations,
            states,
            seq(rollout["episode_starts"], bool),
            seq(rollout["actions"], None),
            *(seq(rollout[k], np.float32) for k in ("log_probs", "rewards", "final_values")),
            seq(rollout["terminated"], bool),
            seq(rollout["truncated"], bool),
        ]

    def _learn(self, rollout):
        """``n_epochs`` train steps on all sequences of the batch; the metrics are their means."""
        to_t = self.backend.to_tensor
        inputs = [map_obs(to_t, x) for x in self.sequence_batch(rollout)]
        return self._train_epochs(inputs)
