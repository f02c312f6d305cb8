"""DQN and its family: double Q, dueling heads, n-step returns, prioritized replay.

All four are switches in :class:`DQNConfig`; the algorithm is composed from backend-neutral
components (Q-network, DQN loss, epsilon-greedy, target sync) and runs on any backend.
"""

from __future__ import annotations

from typing import Literal, Optional

import numpy as np
from pydantic import Field

from rlgraph_core.agents.base import Agent
from rlgraph_core.agents.off_policy import due_gradient_steps, replay_state, restore_replay_state
from rlgraph_core.components.dqn_loss import DQNLoss
from rlgraph_core.components.exploration import EpsilonGreedy
from rlgraph_core.components.network import NetworkSpec
from rlgraph_core.components.preprocessors import BoxNormalizer
from rlgraph_core.components.q_head import QNetwork
from rlgraph_core.components.schedules import LinearSchedule, as_schedule
from rlgraph_core.components.target_sync import TargetSync
from rlgraph_core.config.common import MemoryConfig, OptimizerConfig, ScheduleOrFloat, StrictModel
from rlgraph_core.errors import ConfigError
from rlgraph_core.graph import Component, api, build
from rlgraph_core.memories import NStepAssembler
from rlgraph_core.spaces import BoolBox, Discrete, FloatBox, IntBox, SpaceError


class DQNConfig(StrictModel):
    """Hyperparameters of the DQN family."""

    type: Literal["dqn"] = "dqn"
    network: NetworkSpec = Field(default_factory=NetworkSpec)
    dueling: bool = False
    double_q: bool = True
    n_step: int = Field(1, ge=1)
    gamma: float = Field(0.99, gt=0, le=1)
    loss_type: Literal["huber", "mse"] = "huber"
    batch_size: int = Field(64, gt=0)
    learning_starts: int = Field(1_000, ge=0, description="env steps before the first update")
    train_freq: int = Field(4, gt=0, description="env steps between update rounds")
    gradient_steps: int = Field(1, gt=0, description="gradient steps per update round")
    target_update_interval: int = Field(500, gt=0, description="gradient steps between target syncs")
    tau: float = Field(1.0, gt=0, le=1, description="1 = hard copy, < 1 = Polyak averaging")
    exploration: ScheduleOrFloat = Field(
        default_factory=lambda: LinearSchedule(start=1.0, end=0.05, steps=10_000),
        description="epsilon as a float or a schedule over env steps")
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    preprocessor: Literal["none", "box_normalize"] = "none"


class DQNGraph(Component):
    """The root component of DQN: policy and target Q-networks, loss, exploration, sync."""

    def __init__(self, config: DQNConfig, obs_space: FloatBox, num_actions: int, seed: int):
        super().__init__("dqn")
        self.num_actions = num_actions
        self.double_q = config.double_q

        def preprocessor():
            if config.preprocessor == "box_normalize":
                return BoxNormalizer(obs_space.low, obs_space.high, name="preprocessor")
            return None

        self.policy = QNetwork(config.network, num_actions, config.dueling, preprocessor(), seed, name="policy")
        self.target = QNetwork(config.network, num_actions, config.dueling, preprocessor(), seed, name="target").freeze()
        self.dqn_loss = DQNLoss(config.loss_type, config.double_q)
        self.exploration = EpsilonGreedy()
        self.target_sync = TargetSync(self.policy, self.target, config.tau)
        self.add_components(self.policy, self.target, self.dqn_loss, self.exploration, self.target_sync)

    @api
    def act(self, obs, random_actions, draws, epsilon):
        """Epsilon-greedy actions."""
        greedy = self.ops.argmax(self.policy.call(obs), axis=-1)
        return self.exploration.explore(greedy, random_actions, draws, epsilon)

    @api
    def greedy(self, obs):
        """Greedy actions."""
        return self.ops.argmax(self.policy.call(obs), axis=-1)

    @api
    def q_values(self, obs):
        """Q-values of the online network."""
        return self.policy.call(obs)

    @api
    def loss(self, obs, actions, rewards, next_obs, terminals, discounts, weights):
        """DQN loss and |TD| for a batch of (n-step) transitions."""
        q = self.policy.call(obs)
        q_next_target = self.target.call(next_obs)
        q_next_online = self.policy.call(next_obs) if self.double_q else q_next_target
        return self.dqn_loss.loss(q, actions, rewards, terminals, discounts, q_next_target, q_next_online, weights)

    @api
    def sync_target(self):
        """Synchronise the target network (hard or Polyak, as configured)."""
        return self.target_sync.sync()


def _memory_from_config(cfg: MemoryConfig, seed: int):
    from rlgraph_core.plugins import get_plugin_manager

    cls = get_plugin_manager().get("components", cfg.type, field="agent.memory.type")
    if getattr(cls, "prioritized", False):
        return cls(cfg.capacity, alpha=cfg.alpha, beta=cfg.beta, beta_final=cfg.beta_final,
                   beta_annealing_steps=cfg.beta_annealing_steps, seed=seed)
    return cls(cfg.capacity, seed=seed)


class DQNAgent(Agent):
    """Deep Q-learning (Mnih et al. 2015) with double Q, dueling, n-step and PER switches."""

    def __init__(self, config: DQNConfig, observation_space, action_space, backend, seed: int = 0,
                 num_envs: int = 1):
        super().__init__(config, observation_space, action_space, backend, seed)
        if not isinstance(action_space, Discrete):
            raise ConfigError(f"DQN needs a Discrete action space; this environment's is {action_space!r}. "
                              f"Use an algorithm for continuous actions, or a discretised environment.")
        if not isinstance(observation_space, FloatBox) or len(observation_space.shape) != 1:
            raise ConfigError(f"DQN's MLP needs a rank-1 float observation space; got {observation_space!r}.")
        self.num_actions = int(action_space.n)
        self.action_start = int(action_space.start)
        self.epsilon = as_schedule(config.exploration)
        self.lr_schedule = as_schedule(config.optimizer.learning_rate)
        self.memory = _memory_from_config(config.memory, seed)
        self.prioritized = bool(getattr(self.memory, "prioritized", False))
        self.nstep = NStepAssembler(num_envs, config.n_step, config.gamma)
        self._num_envs = num_envs
        self.graph = DQNGraph(config, observation_space, self.num_actions, seed)

        obs_b = observation_space.with_batch_rank()
        act_b = IntBox(0, self.num_actions - 1, shape=()).with_batch_rank()
        float_b = FloatBox(shape=()).with_batch_rank()
        self.build_report = build(self.graph, {
            "act": {"obs": obs_b, "random_actions": act_b, "draws": float_b, "epsilon": FloatBox(shape=())},
            "greedy": {"obs": obs_b},
            "q_values": {"obs": obs_b},
            "loss": {"obs": obs_b, "actions": act_b, "rewards": float_b, "next_obs": obs_b,
                     "terminals": BoolBox(shape=()).with_batch_rank(), "discounts": float_b, "weights": float_b},
            "sync_target": {},
        }, backend, compile_apis=("act", "greedy", "q_values"))
        self.graph.sync_target()
        self._params = list(self.graph.policy.variables(trainable_only=True).values())
        self.train_step = backend.train_step(self.graph.loss, self._params,
                                             config.optimizer.backend_spec(self.lr_schedule(0)))
        self._last_train = 0
        self._last_loss = None

    # --- acting ----------------------------------------------------------------------------
    def act(self, obs, explore=True):
        to_t = self.backend.to_tensor
        obs = np.asarray(obs, np.float32)
        if not explore:
            return self.backend.to_numpy(self.graph.greedy(to_t(obs))) + self.action_start
        n = len(obs)
        random_actions = self.rng.integers(0, self.num_actions, n)
        draws = self.rng.random(n, dtype=np.float32)
        epsilon = np.float32(self.epsilon(self.timesteps))
        if np.all(draws < epsilon):
            # Every env explores, so the greedy actions would be discarded: skip the network.
            # The same draws are made either way, so a seed gives the same actions as always.
            return random_actions + self.action_start
        actions = self.graph.act(to_t(obs), to_t(random_actions), to_t(draws), to_t(epsilon))
        return self.backend.to_numpy(actions) + self.action_start

    def observe(self, obs, actions, rewards, next_obs, terminated, truncated):
        self.timesteps += len(obs)
        actions = np.asarray(actions) - self.action_start
        out = self.nstep.add(obs, actions, rewards, next_obs, terminated, truncated)
        if out is not None:
            self.memory.insert(out)

    # --- learning --------------------------------------------------------------------------
    def update(self, batch=None):
        cfg = self.config
        steps = due_gradient_steps(self, batch)
        if steps == 0:
            return None
        lr = self.lr_schedule(self.timesteps)
        if lr != self.train_step.learning_rate:
            self.train_step.learning_rate = lr
        for _ in range(steps):
            sample = batch if batch is not None else self.memory.sample(cfg.batch_size)
            loss, td = self._train_on(sample)
            self.updates += 1
            if self.updates % cfg.target_update_interval == 0 or cfg.tau < 1.0:
                self.graph.sync_target()
        self._last_loss = loss
        return {"loss": loss}

    def _train_on(self, sample):
        to_t = self.backend.to_tensor
        weights = sample.get("weights")
        if weights is None:
            weights = np.ones(len(sample["rewards"]), np.float32)
        discounts = sample.get("discounts")
        if discounts is None:
            discounts = np.full(len(sample["rewards"]), self.config.gamma, np.float32)
        loss, td = self.train_step(
            to_t(sample["obs"]), to_t(sample["actions"]), to_t(sample["rewards"]), to_t(sample["next_obs"]),
            to_t(sample["terminals"]), to_t(discounts), to_t(weights))
        if self.prioritized and "indices" in sample:
            self.memory.update_priorities(sample["indices"], self.backend.to_numpy(td))
        return loss, td

    def loss_on(self, batch: dict[str, np.ndarray]) -> float:
        """The loss on ``batch`` without updating (for tests and diagnostics)."""
        to_t = self.backend.to_tensor
        if getattr(self, "_eval_loss", None) is None:
            self._eval_loss = self.backend.function(self.graph.loss)  # traced/compiled once
        out = self._eval_loss(
            *[to_t(batch[k]) for k in ("obs", "actions", "rewards", "next_obs", "terminals", "discounts", "weights")])
        return float(self.backend.to_numpy(out[0]))

    def metrics(self) -> dict[str, float]:
        """Latest training metrics (converting the last loss to a float only here)."""
        out = {"epsilon": float(self.epsilon(self.timesteps)), "updates": self.updates,
               "learning_rate": self.train_step.learning_rate}
        if self._last_loss is not None:
            out["loss"] = float(self.backend.to_numpy(self._last_loss))
        return out

    # --- weights and state -----------------------------------------------------------------
    def variables(self):
        return {f"{k}": v for k, v in self.graph.variables().items()}

    def get_state(self):
        """Optimizer state, the replay memory (``memory/*``) and counters, for a checkpoint.

        The memory's ``state_dict`` (records, counters, sampling RNG) is stored so a resumed run
        samples from the same experience. Pending n-step transitions are not stored: a resumed
        run starts new episodes (the envs are reset), so those partial transitions could never
        be completed correctly.
        """
        return replay_state(self, {f"optimizer/{k}": v for k, v in self.train_step.get_state().items()})

    def set_state(self, arrays, counters):
        """Restore :meth:`get_state`'s output; the memory is validated and loaded first."""
        restore_replay_state(self, arrays, counters)
        opt = {k[len("optimizer/"):]: v for k, v in arrays.items() if k.startswith("optimizer/")}
        if opt:
            self.train_step.set_state(opt)
