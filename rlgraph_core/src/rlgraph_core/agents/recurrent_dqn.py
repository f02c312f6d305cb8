"""R2D2-style recurrent DQN (``type: dqn`` with ``network: {type: lstm | gru}``), trained on replayed sequences.

The assembly makes this agent for ``type: dqn`` when the network slot holds a stateful network
(:data:`rlgraph_core.assemble.RECURRENT_AGENTS`); the config and the algorithm are DQN's
(:mod:`rlgraph_core.agents.dqn`: double Q, dueling, n-step, target syncs, prioritized replay),
what changes is what replay holds and how the loss reads it (Kapturowski et al. 2019, R2D2)::

    acting:   act(obs, state, episode_start) -> (actions, state)     one step; the state is zeroed
              where an episode starts (the env runner keeps it per env)
    replay:   records are windows of network.seq_len steps of one env, with the state its first
              step acted from (memories/sequences.py); windows overlap by burn_in steps
    learning: unroll the online network over a window's first burn_in steps from the stored state
              without gradient, then over the rest; the target network over the whole window;
              n-step double-Q targets of the trained steps inside the window, DQN's loss
    priority: per sequence, eta * max |TD| + (1 - eta) * mean |TD| over its trained steps

``batch_size`` and ``memory.capacity`` count sequences (records), as R2D2's batch of 64 sequences.
Sequences run across episode ends with the state reset there (as this library's recurrent PPO),
so no padding; a step whose n-step window meets a truncation is left out of the loss (its
bootstrap would need the final observation). Images and Dict observations go through the
network's ``cnn`` / ``dict_encoder`` (folded over a window's steps); replay keeps uint8 frames
uint8 and stores each distinct frame once, the windows holding frame slots
(:mod:`rlgraph_core.memories.frames`). Not supported (refused when the config is validated or the
agent is built): a preprocessor, a legal-action mask and fused rounds (rounds run step by step). ONNX export writes one greedy step with the
state as extra inputs and outputs, as for recurrent PPO.
"""

from __future__ import annotations


import numpy as np

from rlgraph_core.agents.dqn import DQNAgent
from rlgraph_core.agents.observations import check_observation_space, to_obs_array
from rlgraph_core.agents.off_policy import TRAJECTORY_KEYS, OffPolicyAgent, check_trajectory_keys
from rlgraph_core.agents.slots import make_exploration
from rlgraph_core.agents.support import (
    acting_starts,
    action_space_hint,
    recurrent_pending_step,
    sequence_step_spaces,
    time_major,
)
from rlgraph_core.components.dqn_loss import DQNLoss
from rlgraph_core.components.masks import mask_layout
from rlgraph_core.components.recurrent_q import RecurrentQNetwork
from rlgraph_core.components.target_sync import TargetSync
from rlgraph_core.errors import ConfigError
from rlgraph_core.graph import Component, api, build
from rlgraph_core.memories.obs import SEP, batch_len, flatten_fields, map_obs, unflatten_fields
from rlgraph_core.memories.sequences import SequenceAssembler, sequence_batch, sequence_priorities
from rlgraph_core.spaces import BoolBox, Discrete, FloatBox, IntBox, Space

__all__ = ["RecurrentDQNAgent", "RecurrentDQNGraph"]


class RecurrentDQNGraph(Component):
    """The root component of recurrent DQN: online and target :class:`RecurrentQNetwork`,
    DQN's loss over sequences with burn-in, exploration and target sync.

    Policy methods take time-major sequences ``[T, B, ...]`` (acting: ``T = 1``) with the state at
    their start and the episode-start mask ``reset [T, B]``.
    """

    def __init__(self, config, obs_space, num_actions: int, seed: int, components=None):
        super().__init__("dqn")
        net = config.network
        self.num_actions = num_actions
        self.burn_in = int(config.burn_in)
        self.policy = RecurrentQNetwork(net, num_actions, config.dueling, seed, name="policy")
        self.target = RecurrentQNetwork(net, num_actions, config.dueling, seed, name="target").freeze()
        self.dqn_loss = DQNLoss(config.loss_type, config.double_q)
        self.exploration = make_exploration(
            config.exploration, components, field="agent.exploration", num_actions=num_actions
        )
        self.target_sync = TargetSync(self.policy, self.target, config.tau)
        self.add_components(self.policy, self.target, self.dqn_loss, self.exploration, self.target_sync)

    @api
    def act(self, obs, state, reset, noise, value):
        """``(exploring actions [T * B], state)`` (acting: one step, ``obs [1, B, ...]``, ``noise [1, B, ...]``)."""
        q, out = self.policy.call(obs, state, reset)
        shape = list(self.input_spaces["act"]["noise"].shape)
        return self.exploration.explore(q, self.ops.reshape(noise, [-1, *shape]), value), out

    @api
    def greedy(self, obs, state, reset):
        """``(argmax_a Q [T * B], state)``."""
        q, out = self.policy.call(obs, state, reset)
        return self.ops.argmax(q, axis=-1), out

    @api
    def q_values(self, obs, state, reset):
        """Q-values ``[T * B, num_actions]`` of the online network along sequences."""
        return self.policy.call(obs, state, reset)[0]

    @api
    def loss(self, burn_obs, burn_reset, obs, reset, state, rows, boot_rows, actions, returns, discounts, weights):
        """``(loss, |TD| per trained step)`` of a batch of windows, DQN's loss on the trained steps.

        ``burn_obs`` / ``burn_reset`` ``[burn_in, B, ...]``: the burn-in steps (ignored when
        ``burn_in`` is 0); ``obs`` / ``reset`` ``[S + 1, B, ...]``: the trained steps and the last
        observation; ``state``: the state at the window start. The Q-values of the unrolled ``obs``
        are rows ``t * B + b``: ``rows`` are the trained steps', ``boot_rows`` those each one
        bootstraps from; ``actions``, n-step ``returns``, bootstrap ``discounts`` and ``weights``
        (importance weight times the loss mask) are per row of ``rows``.
        """
        ops = self.ops
        online_state = target_state = state
        if self.burn_in:  # warm the state up from the stored one; no gradient through the burn-in
            _, warm = self.policy.call(burn_obs, state, burn_reset)
            online_state = {k: ops.stop_gradient(v) for k, v in warm.items()}
            _, target_state = self.target.call(burn_obs, state, burn_reset)
        q_online, _ = self.policy.call(obs, online_state, reset)
        q_target, _ = self.target.call(obs, target_state, reset)
        return self.dqn_loss.loss(
            ops.take(q_online, rows),
            actions,
            returns,
            ops.zeros_like(returns),
            discounts,
            ops.take(q_target, boot_rows),
            ops.take(q_online, boot_rows),
            weights,
        )

    @api
    def sync_target(self):
        """Synchronise the target network (hard or Polyak, as configured)."""
        return self.target_sync.sync()


class RecurrentDQNAgent(DQNAgent):
    """DQN on replayed sequences with an LSTM or GRU Q-network (module docstring)."""

    supports_fused_rounds = False
    graph_class = RecurrentDQNGraph  # type: ignore[assignment]

    def _setup_model(self) -> None:
        config, observation_space, action_space, backend, seed, components = self._setup_arguments()
        net = config.network
        if not isinstance(action_space, Discrete):
            raise ConfigError(
                f"DQN supports only a single Discrete action space (n actions, like CartPole's); this "
                f"environment's is {action_space!r}. {action_space_hint(action_space)}"
            )
        if mask_layout(observation_space, action_space, "DQN") is not None:
            raise ConfigError(
                f"The observation holds a legal-action mask, which a recurrent DQN ('agent.network.type' = "
                f"'{net.type}') does not take yet; use network: {{type: mlp}} with the mask, or an env without one."
            )
        if config.preprocessor is not None:
            raise ConfigError(
                f"'agent.preprocessor' = '{config.preprocessor.type}': a recurrent DQN ('agent.network.type' = "
                f"'{net.type}') takes no preprocessor yet; remove it, or normalise observations with an env wrapper."
            )
        check_observation_space(observation_space, net, "DQN")
        OffPolicyAgent._setup_model(self)
        self.mask = None
        self.num_actions = int(action_space.n)
        self.action_start = int(action_space.start)
        self.burn_in = int(config.burn_in)
        self.seq_len = int(net.seq_len)
        self.graph = RecurrentDQNGraph(config, observation_space, self.num_actions, seed, components)
        self.exploration = self.graph.exploration
        self.state_space = self.graph.policy.state_space
        self.assembler = SequenceAssembler(self.num_envs, self.burn_in, self.seq_len)
        #: record fields of 2-d uint8 images, stored with a channel axis so that replay shares their frames
        self._plane_fields = {
            "obs" + (SEP + key if key else "")
            for key, leaf in observation_space.flatten().items()
            if len(leaf.shape) == 2 and np.dtype(leaf.dtype) == np.uint8
        }

        step = sequence_step_spaces(observation_space.with_batch_rank(), self.state_space)
        float_b = FloatBox(shape=()).with_batch_rank()
        rows_b = IntBox(0, 2**31 - 1, shape=()).with_batch_rank()
        self.build_report = build(
            self.graph,
            {
                "act": {
                    **step,
                    "noise": time_major(FloatBox(shape=self.exploration.noise_shape).with_batch_rank()),
                    "value": FloatBox(shape=()),
                },
                "greedy": dict(step),
                "q_values": dict(step),
                "loss": {
                    "burn_obs": step["obs"],
                    "burn_reset": step["reset"],
                    "obs": step["obs"],
                    "reset": step["reset"],
                    "state": step["state"],
                    "rows": rows_b,
                    "boot_rows": rows_b,
                    "actions": IntBox(0, self.num_actions - 1, shape=()).with_batch_rank(),
                    "returns": float_b,
                    "discounts": float_b,
                    "weights": float_b,
                },
                "sync_target": {},
            },
            backend,
            compile_apis=("act", "greedy", "q_values"),
        )
        self._setup_train_step()
        self._pending: tuple | None = None

    # --- acting ----------------------------------------------------------------------------
    def initial_state(self, batch: int) -> dict[str, np.ndarray]:
        """Zero state of ``batch`` envs (``{h, c}`` for an LSTM, ``{h}`` for a GRU)."""
        return self.graph.policy.initial_state(batch)

    def act(self, obs, explore=True, *, state=None, episode_start=None):  # type: ignore[override]
        """``(env actions, next state)`` for a batch of observations, acting from ``state`` (reset
        where ``episode_start``); with ``explore`` (epsilon-greedy ...) it notes what :meth:`observe`
        stores."""
        obs = to_obs_array(obs, self.observation_space)
        n = batch_len(obs)
        starts = acting_starts(state, episode_start, n, f"A recurrent DQN ('{self.config.network.type}')")
        to_t, to_np = self.backend.to_tensor, self.backend.to_numpy
        obs_t, state_t, reset_t = (
            to_t(map_obs(lambda v: v[None], obs)),
            {k: to_t(v) for k, v in state.items()},
            to_t(starts[None]),
        )
        if not explore:
            actions, out = self.graph.greedy(obs_t, state_t, reset_t)
        else:
            noise = np.asarray(self.exploration.draw_noise(self.rng, n), np.float32)
            value = np.float32(self.exploration.value(self.timesteps))
            actions, out = self.graph.act(obs_t, state_t, reset_t, to_t(noise[None]), to_t(value))
            self._pending = (obs, state, starts)
        next_state = {k: to_np(v) for k, v in out.items()}
        return to_np(actions) + self.action_start, next_state

    # --- replay ----------------------------------------------------------------------------
    def observe(self, obs, actions, rewards, next_obs, terminated, truncated):
        """Add one vector step to the sequences in progress; insert the windows it completes.

        A recurrent step is known only with the state it acted from, so ``observe`` must follow
        ``act(obs, explore=True, state=..., episode_start=...)`` of the same step.
        """
        obs = to_obs_array(obs, self.observation_space)
        pending, self._pending = self._pending, None
        pending = recurrent_pending_step(pending, obs, "recurrent DQN agent")
        _, state, starts = pending
        self._count_env_steps(len(rewards))
        record = self.assembler.add(
            self._channels(obs, 1), starts, state, self._stored_actions(actions), rewards, terminated, truncated
        )
        if record is not None:
            self.memory.insert(record)

    def postprocess(self, trajectory):
        """Actor role (``ray_apex`` workers): the sequence records a time-major trajectory completes.

        ``trajectory`` is what :meth:`~rlgraph_core.execution.env_runner.EnvRunner.trajectory` gives
        for a stateful agent: the :data:`~rlgraph_core.agents.off_policy.TRAJECTORY_KEYS`, each
        ``[T, N, ...]``, plus ``episode_starts`` ``[T, N]`` and ``states`` (``{key: [T, N, units]}``,
        the state each step acted from). Steps are cut into windows as :meth:`observe` cuts them;
        windows still open at the end carry over to the next call (the worker's envs continue), so
        each record ships with the state its first step acted from. The result has the records
        plus ``policy_version`` and, for a prioritized memory, ``priorities`` (R2D2's sequence
        priority under this worker's weights). Counts the ``T * N`` env steps into :attr:`timesteps`.
        """
        keys = (*TRAJECTORY_KEYS, "episode_starts", "states")
        check_trajectory_keys(
            trajectory, keys, "A recurrent DQN's", "; EnvRunner.trajectory gives them for a stateful agent"
        )
        parts = []
        for t in range(len(trajectory["rewards"])):
            rewards = trajectory["rewards"][t]
            self._count_env_steps(len(rewards))
            record = self.assembler.add(
                self._channels(to_obs_array(trajectory["obs"][t], self.observation_space), 1),
                trajectory["episode_starts"][t],
                {k: v[t] for k, v in trajectory["states"].items()},
                self._stored_actions(trajectory["actions"][t]),
                rewards,
                trajectory["terminated"][t],
                trajectory["truncated"][t],
            )
            if record is not None:
                parts.append(record)
        return self._insert_batch(parts)

    def _channels(self, obs, add: int):
        """``obs`` with a channel axis added to (``add`` 1) or removed from (``add`` 0) its 2-d uint8
        images: replay shares the ``(H, W)`` frames of ``(..., H, W, C)`` records only
        (:func:`rlgraph_core.memories.frames.slot_layout`), and a window of 2-d images is ``(T, H, W)``."""
        if not self._plane_fields:
            return obs
        fields = flatten_fields({"obs": obs})
        for name in self._plane_fields:
            fields[name] = fields[name][..., None] if add else fields[name][..., 0]
        return unflatten_fields(fields)["obs"]

    def replay_record_spaces(self):
        """One sequence record as :class:`~rlgraph_core.memories.sequences.SequenceAssembler` makes it:
        ``L + 1`` observations per key of a Dict observation (``obs/<key>``), float ones as float32,
        others (uint8 frames) in their dtype and bounds; a 2-d image with a channel axis."""
        length = self.seq_len
        spaces: dict[str, Space] = {}
        for key, leaf in self.observation_space.flatten().items():
            name = "obs" + (SEP + key if key else "")
            channel = (1,) if name in self._plane_fields else ()  # 2-d images get a channel axis (_channels)
            shape = (length + 1, *leaf.shape, *channel)
            if np.dtype(leaf.dtype).kind == "f":
                stored: Space = FloatBox(shape=shape)
            elif isinstance(leaf, IntBox):
                low, high = (np.reshape(b, (*leaf.shape, *channel)) for b in (leaf.low, leaf.high))
                stored = IntBox(np.broadcast_to(low, shape), np.broadcast_to(high, shape), shape, leaf.dtype)
            elif isinstance(leaf, BoolBox):
                stored = BoolBox(shape=shape)
            else:
                return None
            spaces[name] = stored
        spaces.update(
            {
                "starts": BoolBox(shape=(length + 1,)),
                "actions": IntBox(0, self.num_actions - 1, shape=(length,), dtype=self.action_space.dtype),
                "rewards": FloatBox(shape=(length,)),
                "terminated": BoolBox(shape=(length,)),
                "truncated": BoolBox(shape=(length,)),
            }
        )
        spaces.update({f"state/{k}": FloatBox(shape=s.shape) for k, s in self.state_space.items()})
        return spaces

    # --- learning --------------------------------------------------------------------------
    def _loss_inputs(self, sample):
        """The loss's inputs of a sample of windows (see :meth:`RecurrentDQNGraph.loss`)."""
        return self._sequence_inputs(sample)[0]

    def _sequence_inputs(self, sample) -> tuple[tuple, np.ndarray]:
        """``(loss inputs as tensors, loss mask [S, B])`` of a sample of windows."""
        cfg = self.config
        sample = dict(sample, obs=self._channels(sample["obs"], 0))
        inputs, mask = sequence_batch(sample, self.burn_in, cfg.n_step, cfg.gamma)
        to_t = self.backend.to_tensor
        return tuple({k: to_t(v) for k, v in x.items()} if isinstance(x, dict) else to_t(x) for x in inputs), mask

    def _gradient_step(self, sample):
        inputs, mask = self._sequence_inputs(sample)
        loss, td = self.train_step(*inputs)
        if not self.prioritized:
            return {"loss": loss}, td
        td = np.asarray(self.backend.to_numpy(td)).reshape(mask.shape)
        return {"loss": loss}, sequence_priorities(td, mask, self.config.priority_eta)

    def _td_errors(self, batch):
        inputs, mask = self._sequence_inputs(batch)
        td = np.asarray(self.backend.to_numpy(self._evaluate_loss_inputs(inputs)[1])).reshape(mask.shape)
        return sequence_priorities(td, mask, self.config.priority_eta)

    def _evaluate_loss_inputs(self, inputs):
        if self._eval_loss is None:
            self._eval_loss = self.backend.function(self.graph.loss)
        return self._eval_loss(*inputs)

    def set_state(self, arrays, counters):
        """DQN's; the sequences in progress are dropped (a resumed run starts fresh episodes)."""
        super().set_state(arrays, counters)
        self.assembler.reset()
        self._pending = None

    def partial_rollout(self):
        """None: the sequences in progress and the envs' policy state are not carried across a checkpoint."""
        return None

    def policy_outputs(self, obs, state=None, episode_start=None):
        """One greedy step from ``state`` (zeroed where ``episode_start``): ``action`` (argmax Q, plus
        the action space's start), ``q_values`` and ``next_state.<key>`` for every key of
        :attr:`state_space` (see :meth:`rlgraph_core.agents.base.Agent.policy_outputs`; ``obs [B, ...]``,
        each state ``[B, units]``, ``episode_start [B]`` bool, all backend tensors)."""
        ops = self.backend.ops
        if state is None or episode_start is None:
            raise ValueError(
                "A recurrent policy's outputs are those of one step from a state: pass policy_outputs(obs, state, "
                "episode_start) (state as agent.initial_state(B) gives it, episode_start a [B] bool tensor)."
            )
        seq_obs = map_obs(lambda v: ops.expand_dims(v, 0), obs)
        q, next_state = self.graph.policy.call(seq_obs, state, ops.expand_dims(episode_start, 0))
        action = ops.argmax(q, axis=-1)
        return {
            "action": action + self.action_start if self.action_start else action,
            "q_values": q,
            **{f"next_state.{k}": v for k, v in next_state.items()},
        }
