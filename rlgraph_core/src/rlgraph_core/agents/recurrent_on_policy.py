"""What the recurrent on-policy agents share (PPO, IMPALA, A2C with ``network: {type: lstm | gru}``).

The assembly makes a recurrent agent for an on-policy algorithm when the network slot holds a
stateful network (:data:`rlgraph_core.assemble.RECURRENT_AGENTS`); the config and the algorithm
are the feed-forward one's, what changes is where the memory lives::

    acting:    act(obs, state, episode_start) -> (actions, state)      one step, T = 1; the state
               is reset where an episode starts (the env runner keeps it per env)
    rollout:   every step's episode start, and the state at the start of each sequence of
               seq_len steps (t = 0, seq_len, 2 seq_len, ...), before its reset
    learning:  the rollout [n_steps, N] is cut into n_steps / seq_len x N sequences of seq_len
               steps, each unrolled from its stored state with the state zeroed at the episode
               starts inside it (the algorithm's own: PPO's minibatches, IMPALA's and A2C's one step)

This is CleanRL's ``ppo_atari_lstm.py`` scheme (state stored at the rollout start, reset by the
done mask inside the unrolled cell) with sequences that may be shorter than the rollout; and
sb3-contrib's RecurrentPPO's separate actor and critic cores
(:mod:`rlgraph_core.components.recurrent_actor_critic`). Sequences do not stop at episode ends,
so no padding is needed, and the stored states are stale by at most one rollout's weight change.

Not supported (refused when the config is validated or the agent is built, naming what works): a
preprocessor, a legal-action mask in the observation. Images and Dict observations take a ``cnn`` or
``dict_encoder`` encoder in front of the cell (:mod:`rlgraph_core.components.recurrent`); their
frames stay uint8 in the rollouts.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from rlgraph_core.agents.observations import to_obs_array
from rlgraph_core.agents.on_policy import OnPolicyGraph
from rlgraph_core.agents.support import acting_starts, recurrent_pending_step, sequence_step_spaces, time_major
from rlgraph_core.components.gae import GAE
from rlgraph_core.components.recurrent_actor_critic import RecurrentActorCritic
from rlgraph_core.errors import ConfigError
from rlgraph_core.graph import Component, api
from rlgraph_core.memories.obs import batch_len, map_obs


class RecurrentOnPolicyGraph(OnPolicyGraph):
    """The root component of a recurrent on-policy agent: a :class:`RecurrentActorCritic` and GAE
    (subclasses add the algorithm's ``loss``).

    Every policy method takes time-major sequences ``[T, B, ...]`` with the state at their start
    and the episode-start mask ``reset [T, B]``.
    """

    def __init__(self, name, config, observation_space, action_space, loss, seed, components=None):
        Component.__init__(self, name)
        self.mask_layout = None
        self.obs_normalizer = None
        self.policy = RecurrentActorCritic(
            config.network, action_space, config.shared_trunk, seed, config.log_std_init, name="policy"
        )
        self.gae = GAE(config.gamma, config.gae_lambda)
        self.pg_loss = loss
        self.add_components(self.policy, self.gae, loss)

    @api
    def act(self, obs, state, reset, noise):
        """``(actions, log_probs, values, state)`` of one step (``obs [1, B, ...]``, ``noise [1, B, n]``)."""
        return self.policy.act(obs, state, reset, noise)

    @api
    def greedy(self, obs, state, reset):
        """``(the deterministic action, state)`` of one step."""
        return self.policy.deterministic(obs, state, reset)

    @api
    def value(self, obs, state, reset):
        """``V(obs)`` ``[T * B]`` from ``state``."""
        return self.policy.value(obs, state, reset)

    @api
    def evaluate_actions(self, obs, state, reset, actions):
        """``(log_probs, entropy, values)`` ``[T * B]`` of given actions ``[T, B, ...]`` along sequences."""
        return self.policy.evaluate(obs, state, reset, actions)


def sequences(x: np.ndarray, seq_len: int) -> np.ndarray:
    """``[T, N, ...] -> [seq_len, T / seq_len * N, ...]``: sequence ``i * N + n`` is env ``n``'s piece ``i``."""
    x = np.asarray(x)
    steps, envs, rest = x.shape[0], x.shape[1], x.shape[2:]
    pieces = steps // seq_len
    x = x.reshape(pieces, seq_len, envs, *rest).swapaxes(0, 1)
    return x.reshape(seq_len, pieces * envs, *rest)


class RecurrentActing:
    """Acting, rollout collection and export of a recurrent on-policy agent (module docstring): a
    mixin in front of the algorithm's :class:`~rlgraph_core.agents.on_policy.OnPolicyAgent` subclass."""

    def _sequence_length(self) -> int:
        """Steps per training sequence: the network's ``seq_len``."""
        return int(self.config.network.seq_len)

    def _sequence_loss_spaces(self, obs_b, action_b, float_b, *floats: str) -> dict:
        """Input spaces of a loss over sequences, all time-major: ``obs``, the ``state`` at the
        sequences' starts, the episode-start mask ``reset``, ``actions``, then a float per name in ``floats``."""
        float_t = time_major(float_b)
        return {
            **sequence_step_spaces(obs_b, self.graph.policy.state_space),
            "actions": time_major(action_b),
            **{name: float_t for name in floats},
        }

    def _setup_model(self) -> None:
        config = self.config
        if config.preprocessor is not None:
            raise ConfigError(
                f"'agent.preprocessor' = '{config.preprocessor.type}': a recurrent policy "
                f"('agent.network.type' = '{config.network.type}') takes no preprocessor yet; remove it, or "
                f"normalise observations with an env wrapper (env.wrappers), or use network: {{type: mlp}}."
            )
        self.seq_len = self._sequence_length()
        super()._setup_model()
        if self.mask is not None:
            raise ConfigError(
                f"The observation holds a legal-action mask, which a recurrent policy "
                f"('agent.network.type' = '{config.network.type}') does not take yet; use network: {{type: mlp}} "
                f"with the mask, or an env without one."
            )
        self.state_space = self.graph.policy.state_space
        self._seq_states: dict[str, np.ndarray] | None = None
        self._last_state: dict[str, np.ndarray] | None = None
        self._last_starts: np.ndarray | None = None

    def _policy_spaces(self, obs_b, action_b, noise_b) -> dict:
        step = sequence_step_spaces(obs_b, self.graph.policy.state_space)
        return {
            "act": {**step, "noise": time_major(noise_b)},
            "greedy": dict(step),
            "value": dict(step),
            "evaluate_actions": {**step, "actions": time_major(action_b)},
            "update_normalizer": {"obs": obs_b},
        }

    # --- acting ----------------------------------------------------------------------------
    def initial_state(self, batch: int) -> dict[str, np.ndarray]:
        """Zero state of ``batch`` envs (``{pi_h, pi_c, vf_h, vf_c}`` for separate LSTM cores)."""
        return self.graph.policy.initial_state(batch)

    def _tensors(self, obs, state, starts):
        to_t = self.backend.to_tensor
        return to_t(map_obs(lambda v: v[None], obs)), {k: to_t(v) for k, v in state.items()}, to_t(starts[None])

    def act(self, obs, explore=True, *, state=None, episode_start=None):
        """``(env actions, next state)`` for a batch of observations, acting from ``state`` (reset
        where ``episode_start``); with ``explore`` it caches what :meth:`observe` stores."""
        obs = self._obs(obs)
        n = batch_len(obs)
        starts = acting_starts(state, episode_start, n, f"A recurrent policy ('{self.config.network.type}')")
        to_np = self.backend.to_numpy
        obs_t, state_t, reset_t = self._tensors(obs, state, starts)
        if not explore:
            actions, out = self.graph.greedy(obs_t, state_t, reset_t)
            return self._to_env(to_np(actions)), {k: to_np(v) for k, v in out.items()}
        actions, log_probs, values, out = self.graph.act(
            obs_t, state_t, reset_t, self.backend.to_tensor(self._noise(n)[None])
        )
        raw = to_np(actions)
        env_actions = self._to_env(raw)
        next_state = {k: to_np(v) for k, v in out.items()}
        self._pending = (obs, raw, to_np(log_probs), to_np(values), env_actions, state, starts, next_state)
        return env_actions, next_state

    def _obs(self, obs):
        return to_obs_array(obs, self.observation_space)

    # --- rollouts --------------------------------------------------------------------------
    def observe(self, obs, actions, rewards, next_obs, terminated, truncated):
        """Store one vector step, with its episode starts and (at a sequence start) its state.

        A recurrent policy's step is known only with the state it acted from, so ``observe``
        must follow ``act(obs, explore=True, state=..., episode_start=...)`` of the same step.
        """
        obs = self._obs(obs)
        pending, self._pending = self._pending, None
        pending = recurrent_pending_step(pending, obs, "recurrent agent")
        _, raw, log_probs, values, env_actions, state, starts, next_state = pending
        if not (env_actions is actions or np.array_equal(env_actions, actions)):
            raw = self._from_env(actions)
            log_probs = self._evaluate_step(obs, state, starts, raw)
        terminated = np.asarray(terminated, bool)
        truncated = np.asarray(truncated, bool)
        next_obs = self._obs(next_obs)
        t = len(self.buffer)
        if t % self.seq_len == 0:
            self._store_state(t // self.seq_len, state)
        # V(true final observation) of a cut episode comes from the state the step left
        final_value = functools.partial(self._values, next_obs, next_state, np.zeros(len(rewards), bool))
        extras = {"episode_starts": starts}
        self._store_step(obs, raw, log_probs, values, rewards, terminated, truncated, next_obs, final_value, extras)
        if self.buffer.full:
            self._last_state = {k: np.copy(v) for k, v in next_state.items()}
            self._last_starts = terminated | truncated

    def _store_state(self, index: int, state: dict[str, np.ndarray]) -> None:
        if self._seq_states is None:
            count = self.config.n_steps // self.seq_len
            self._seq_states = {k: np.zeros((count, *np.shape(v)), np.float32) for k, v in state.items()}
        for k, v in state.items():
            self._seq_states[k][index] = v

    def _values(self, obs, state, starts) -> np.ndarray:
        return np.asarray(self.backend.to_numpy(self.graph.value(*self._tensors(obs, state, starts))), np.float32)

    def _evaluate_step(self, obs, state, starts, raw) -> np.ndarray:
        obs_t, state_t, reset_t = self._tensors(obs, state, starts)
        log_probs, _, _ = self.graph.evaluate_actions(obs_t, state_t, reset_t, self.backend.to_tensor(raw[None]))
        return self.backend.to_numpy(log_probs)

    def rollout(self) -> dict[str, Any]:
        """The on-policy rollout (with ``next_values`` for GAE) plus ``episode_starts [T, N]`` and ``sequence_states`` (``{key: [T / seq_len,
        N, units]}``: the state each sequence of ``seq_len`` steps starts from)."""
        data = {k: map_obs(np.copy, v) for k, v in self.buffer.data().items()}
        assert self._seq_states is not None and self._last_state is not None and self._last_starts is not None
        last_values = self._values(self._last_next_obs, self._last_state, self._last_starts)
        next_values = np.concatenate([data["values"][1:], last_values[None]], axis=0)
        data["next_values"] = np.where(data["truncated"], data.pop("final_values"), next_values).astype(np.float32)
        data["sequence_states"] = {k: np.copy(v) for k, v in self._seq_states.items()}
        return data

    def partial_rollout(self):
        """None: a resumed run starts a fresh rollout (the stored sequence states and the envs'
        policy state are not carried across a checkpoint)."""
        return None

    def partial_rollout_problem(self, fields):
        """A recurrent agent does not continue a partly collected rollout (see :meth:`partial_rollout`)."""
        return f"{type(self).__name__} does not continue a partly collected rollout"

    def set_state(self, arrays, counters):
        """The algorithm's, and the rollout's stored states are dropped with the rollout."""
        super().set_state(arrays, counters)
        self._seq_states = None
        self._last_state = None

    def policy_outputs(self, obs, state=None, episode_start=None):
        """One greedy step from ``state`` (zeroed where ``episode_start``): ``action``, ``logits`` /
        ``mean``, ``value`` and ``next_state.<key>`` for every key of :attr:`state_space` (see
        :meth:`rlgraph_core.agents.base.Agent.policy_outputs`; ``obs [B, ...]``, each state ``[B, units]``,
        ``episode_start [B]`` bool, all backend tensors)."""
        ops = self.backend.ops
        if state is None or episode_start is None:
            raise ValueError(
                "A recurrent policy's outputs are those of one step from a state: pass policy_outputs(obs, state, "
                "episode_start) (state as agent.initial_state(B) gives it, episode_start a [B] bool tensor)."
            )
        seq_obs, reset = map_obs(lambda v: ops.expand_dims(v, 0), obs), ops.expand_dims(episode_start, 0)
        out = self.graph.policy.policy_outputs(seq_obs, state, reset)
        next_state = out.pop("state")
        action = self._greedy_action(out, lambda: self.graph.policy.deterministic(seq_obs, state, reset)[0])
        return {"action": action, **out, **{f"next_state.{k}": v for k, v in next_state.items()}}
