"""DQN's whole training loop as one JAX program, built from the DQN agent's own components.

Nothing of the algorithm is written again here. The program calls, inside one trace:

* ``agent.graph.act(obs, noise, epsilon)`` -- the Q-network and the exploration component
  (epsilon-greedy), as the local executor's ``act``;
* the gymnax env's pure ``step``, vmapped over ``env.num_envs`` envs;
* ``agent._round_step`` -- the body of DQN's fused update round (``train_step.inline`` on the DQN
  loss, then ``target_sync.sync_if(due)``) -- in the backend's ``lax.scan`` loop over
  ``gradient_steps`` steps, where the agent's schedule asks for a round.

What moves into the program is only what the host did between those calls: the replay memory is
a ring of fixed capacity in the program's carry (the fields the agent's one-step transitions
have: obs, actions, rewards, next_obs = the true final obs of an ended episode, terminals =
terminated, discounts = gamma), sampled uniformly with replacement as the core replay memory
samples; the exploration noise (``[uniform draw, random action]``, epsilon-greedy's layout) and
the batch indices come from a JAX key. The schedules are planned on the host for every env step
of a chunk and handed in as arrays, with the agent's own functions: epsilon
(``exploration.value``), the learning rate, whether a round is due
(:func:`~rlgraph_core.agents.off_policy.round_due`: ``learning_starts``, ``train_freq``, a
batch stored) and after which of its steps the target moves
(:func:`~rlgraph_core.agents.off_policy.target_due`). The program is a pure function of the
backend's cell values and the carry, so ``jax.vmap`` trains several independent agents at once.

Between chunks the executor copies the ring into the agent's replay memory, so a checkpoint holds
the replay and a resumed run samples from it again.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rlgraph_core.agents.off_policy import round_due, target_due
from rlgraph_jax.compiled.envs import ChunkOut, env_step, init_env_carry
from rlgraph_jax.compiled.program import CompiledProgram
from rlgraph_jax.gymnax_envs import PureEnv
from rlgraph_jax.state import swapped

#: the replay ring's fields, in the order of the DQN loss's inputs (weights are all ones)
FIELDS = ("obs", "actions", "rewards", "next_obs", "terminals", "discounts")


class DQNPlan(NamedTuple):
    """The host's plan of one chunk of ``S`` env steps (each of ``num_envs`` envs), as the agent's
    schedule would run them: program inputs (``epsilon``, ``learning_rate``, ``train``, ``due``
    ``[S, gradient_steps]``, ring ``write`` position and ``stored`` records after the step's
    insert) and the agent's counters after the chunk."""

    epsilon: Any
    learning_rate: Any
    train: Any
    due: Any
    write: Any
    stored: Any
    last_train: int
    updates: int
    next_index: int
    size: int

    @property
    def inputs(self) -> tuple:
        """What the compiled chunk takes, per env step."""
        return (self.epsilon, self.learning_rate, self.train, self.due, self.write, self.stored)


class CompiledDQN(CompiledProgram):
    """The pure chunk function of one DQN agent on one gymnax env (see the module docstring).

    Args:
        agent: a built :class:`~rlgraph_core.agents.dqn.DQNAgent` on the jax backend.
        env: the gymnax env's :class:`~rlgraph_jax.gymnax_envs.PureEnv`.
        num_envs: envs stepped at once.
    """

    def __init__(self, agent, env: PureEnv, num_envs: int):
        super().__init__(agent, env, num_envs, agent._round_step)
        cfg = agent.config
        self.capacity = int(cfg.memory.capacity)
        if self.capacity < self.num_envs:
            raise ValueError(
                f"agent.memory.capacity {self.capacity} is smaller than env.num_envs {self.num_envs}: one env "
                f"step would overwrite its own records (raise the capacity)."
            )
        self.batch_size = int(cfg.batch_size)
        self.gradient_steps = int(cfg.gradient_steps)
        self.gamma = float(cfg.gamma)
        self.steps_per_iteration = self.num_envs
        #: records in the ring and its next write position (the host's count; the ring is in the carry)
        self.size = 0
        self.next_index = 0

    # ------------------------------------------------------------------ the host's side
    def plan(self, timesteps: int, iterations: int) -> DQNPlan:
        """The schedules of the next ``iterations`` env steps from the agent's counters."""
        agent, cfg, n = self.agent, self.agent.config, self.num_envs
        last_train, updates = int(agent._last_train), int(agent.updates)
        size, index = self.size, self.next_index
        eps, lrs, train, write, stored = (
            np.zeros(iterations, dt) for dt in (np.float32,) * 2 + (bool, np.int32, np.int32)
        )
        due = np.zeros((iterations, self.gradient_steps), np.float32)
        for i in range(iterations):
            eps[i] = agent.exploration.value(timesteps)  # act reads the counter before the step
            write[i] = index
            timesteps += n
            index = (index + n) % self.capacity
            size = min(self.capacity, size + n)
            stored[i] = size
            lrs[i] = agent.lr_schedule(timesteps)
            if round_due(cfg, timesteps, size, last_train):
                train[i] = True
                last_train = timesteps
                due[i] = target_due(updates, self.gradient_steps, cfg.target_update_interval)
                updates += self.gradient_steps
        return DQNPlan(eps, lrs, train, due, write, stored, last_train, updates, index, size)

    def finish(self, plan: DQNPlan, losses: np.ndarray) -> dict:
        """Move the agent's counters past the chunk; its metrics (the last round's loss)."""
        agent = self.agent
        steps = plan.updates - agent.updates
        agent.updates = plan.updates
        agent.weights_version += steps
        agent._last_train = plan.last_train
        self.size, self.next_index = plan.size, plan.next_index
        if plan.train.any():
            agent.train_step.learning_rate = float(plan.learning_rate[np.flatnonzero(plan.train)[-1]])
            agent._last = {"loss": jnp.asarray(losses[np.flatnonzero(plan.train)[-1]])}
        return agent.metrics()

    def init_carry(self, seed):
        """Fresh episodes and an empty ring, keyed by ``seed`` (a pure function: vmap it over seeds)."""
        obs_shape = tuple(self.agent.observation_space.shape)
        c = self.capacity
        ring = {
            "obs": jnp.zeros((c, *obs_shape), jnp.float32),
            "actions": jnp.zeros((c,), jnp.int32),
            "rewards": jnp.zeros((c,), jnp.float32),
            "next_obs": jnp.zeros((c, *obs_shape), jnp.float32),
            "terminals": jnp.zeros((c,), bool),
            "discounts": jnp.zeros((c,), jnp.float32),
        }
        return init_env_carry(self.env, self.num_envs, seed), ring

    def resume_carry(self, carry):
        """``carry`` with the ring holding the agent's replay memory (a resumed run's records)."""
        memory = self.agent.memory
        self.size, self.next_index = len(memory), 0
        if not len(memory):
            return carry
        state = memory.state_dict()
        self.next_index = int(state["next_index"]) % self.capacity
        env_carry, ring = carry
        ring = {k: ring[k].at[: len(memory)].set(jnp.asarray(state[f"data/{k}"], ring[k].dtype)) for k in FIELDS}
        return env_carry, ring

    def store_memory(self, carry) -> None:
        """Copy the ring (one agent's carry) into the agent's replay memory, for its checkpoint."""
        memory = self.agent.memory
        state = {k: v for k, v in memory.state_dict().items() if not k.startswith("data/")}
        state.update(size=np.array(self.size, np.int64), next_index=np.array(self.next_index, np.int64))
        ring = carry[1]
        dtype = self.agent.action_space.dtype
        for k in FIELDS:
            value = np.asarray(ring[k][: self.size])
            state[f"data/{k}"] = value.astype(dtype) if k == "actions" else value
        memory.load_state_dict(state)

    # ------------------------------------------------------------------ inside the program
    def _act_and_store(self, carry, ring, epsilon, write):
        """One env step with epsilon-greedy actions; the transitions written into the ring."""
        agent, n = self.agent, self.num_envs
        key, noise_key, action_key, env_key = jax.random.split(carry.key, 4)
        noise = jnp.stack(
            [
                jax.random.uniform(noise_key, (n,), jnp.float32),
                jax.random.randint(action_key, (n,), 0, agent.num_actions).astype(jnp.float32),
            ],
            axis=-1,
        )
        actions = agent.graph.act(carry.obs, noise, epsilon).astype(jnp.int32)
        new, (reward, terminated, _truncated, final), episodes = env_step(
            self.env, carry._replace(key=key), env_key, actions + int(agent.action_start)
        )
        rows = (write + jnp.arange(n)) % self.capacity
        record = {
            "obs": carry.obs,
            "actions": actions,
            "rewards": reward,
            "next_obs": final,
            "terminals": terminated,
            "discounts": jnp.full((n,), self.gamma, jnp.float32),
        }
        ring = {k: ring[k].at[rows].set(record[k].astype(ring[k].dtype)) for k in FIELDS}
        return new, ring, episodes

    def _round(self, values, ring, key, learning_rate, due, stored):
        """``gradient_steps`` DQN steps on uniform samples of the ring: (new values, last loss)."""
        with swapped(self.cells, values) as state:
            self._lr_cell.value = jnp.asarray(learning_rate, jnp.float32)
            idx = jax.random.randint(key, (self.gradient_steps, self.batch_size), 0, stored)
            batch = [ring[k][idx] for k in FIELDS] + [jnp.ones((self.gradient_steps, self.batch_size), jnp.float32)]
            loss, _td, _ok = self.loop.traced(batch + [due])
            return state.current(), loss[-1].astype(jnp.float32)

    def chunk(self, values: list, carry, inputs: tuple):
        """Env steps and rounds for every entry of the plan's inputs (a ``lax.scan``): a pure
        function ``(cell values, carry, inputs) -> (cell values, carry, ChunkOut)``."""
        cells = self.cells

        def step(c, xs):
            vals, (env_carry, ring) = c
            epsilon, lr, train, due, write, stored = xs
            with swapped(cells, vals):
                key, learn_key = jax.random.split(env_carry.key)
                env_carry, ring, episodes = self._act_and_store(env_carry._replace(key=key), ring, epsilon, write)
            vals, loss = jax.lax.cond(
                train,
                self._round,
                lambda v, *_: (list(v), jnp.float32(jnp.nan)),
                list(vals),
                ring,
                learn_key,
                lr,
                due,
                stored,
            )
            return (vals, (env_carry, ring)), (loss, *episodes)

        (values, carry), (losses, done, rets, lens) = jax.lax.scan(step, (list(values), carry), inputs)
        return values, carry, ChunkOut(losses, done, rets, lens)
