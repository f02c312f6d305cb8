"""A2C with a recurrent policy (``network: {type: lstm | gru}``): one step on all sequences.

Acting, rollouts and the sequence layout are those of every recurrent on-policy agent
(:mod:`rlgraph_core.agents.recurrent_on_policy`); A2C's part is unchanged: GAE on the rollout,
then one optimizer step on :class:`~rlgraph_core.components.pg_losses.A2CLoss` over the whole
rollout, here as ``n_steps / seq_len x N`` sequences, each unrolled from its stored state. With
``seq_len = n_steps`` (A2C's rollouts are short: 5 steps by default) the rollout of each env is
one sequence unrolled from the state it started from, CleanRL's scheme.
"""

from __future__ import annotations

import numpy as np

from rlgraph_core.agents.a2c import A2CAgent
from rlgraph_core.agents.recurrent_on_policy import RecurrentActing, RecurrentOnPolicyGraph, sequences
from rlgraph_core.graph import api
from rlgraph_core.memories.obs import map_obs


class RecurrentA2CGraph(RecurrentOnPolicyGraph):
    """The root component of recurrent A2C: a recurrent actor-critic, GAE and A2C's loss."""

    @api
    def loss(self, obs, state, reset, actions, advantages, returns):
        """A2C's loss of sequences ``[L, S, ...]`` unrolled from ``state`` (``[S, units]`` each)."""
        log_probs, entropy, values = self.policy.evaluate(obs, state, reset, actions)
        flat = [self.ops.reshape(x, [-1]) for x in (advantages, returns)]
        return self.pg_loss.loss(log_probs, entropy, values, flat[0], flat[1])


class RecurrentA2CAgent(RecurrentActing, A2CAgent):
    """A2C with an LSTM or GRU policy (module docstring)."""

    graph_class = RecurrentA2CGraph

    def _loss_spaces(self, obs_b, action_b, float_b):
        return self._sequence_loss_spaces(obs_b, action_b, float_b, "advantages", "returns")

    def _learn(self, rollout):
        """One step over every sequence of the postprocessed rollout."""
        to_t, to_np = self.backend.to_tensor, self.backend.to_numpy
        seq_len = self.seq_len
        steps, envs = np.shape(rollout["rewards"])
        count = steps // seq_len * envs
        states = {k: np.asarray(v, np.float32).reshape(count, -1) for k, v in rollout["sequence_states"].items()}
        out = self.train_step(
            to_t(map_obs(lambda x: sequences(x, seq_len), rollout["obs"])),
            {k: to_t(v) for k, v in states.items()},
            to_t(sequences(rollout["episode_starts"], seq_len)),
            *(to_t(sequences(rollout[k], seq_len)) for k in ("actions", "advantages", "returns")),
        )
        self.updates += 1
        names = ("loss", "pg_loss", "vf_loss", "entropy")
        return {name: float(to_np(x)) for name, x in zip(names, out)}
