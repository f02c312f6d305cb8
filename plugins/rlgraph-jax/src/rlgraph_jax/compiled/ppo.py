"""PPO's whole training loop as one JAX program, built from the PPO agent's own components.

Nothing of the algorithm is written again here. The program calls, inside one trace:

* ``agent.graph.act(obs, noise)`` -- the actor-critic's sampling, as the local executor's ``act``;
* the gymnax env's pure ``step``, vmapped over ``env.num_envs`` envs;
* ``agent.graph.value`` (bootstrap values), ``agent.graph.advantages`` (the GAE component);
* ``agent._minibatch_step`` -- the body of PPO's fused round (``train_step.inline`` on
  ``PPOLoss``) -- in the backend's ``lax.scan`` loop over ``n_epochs x minibatches`` steps;
* ``agent.graph.update_normalizer`` when the agent has a running observation normaliser.

What moves into the program is only what the host did between those calls: the sampling noise and
the minibatch permutations are drawn from a JAX key (``jax.random``) instead of the agent's numpy
generators, and the learning-rate and clip-range schedules are evaluated on the host for every
rollout of a chunk and handed in as arrays. One call runs ``I`` rollouts (a ``lax.scan``); the
executor calls it chunk after chunk. The program is a pure function of the backend's cell values
and the env carry, so ``jax.vmap`` over both trains several independent agents in one call.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rlgraph_jax.compiled.envs import ChunkOut, EnvCarry, env_step, init_env_carry
from rlgraph_jax.compiled.program import CompiledProgram
from rlgraph_jax.gymnax_envs import PureEnv
from rlgraph_jax.state import swapped

#: the names of PPO's loss outputs (the order of ``PPOLoss.loss``), as the agent reports them
LOSS_NAMES = ("loss", "pg_loss", "vf_loss", "entropy", "approx_kl", "clip_fraction")
_TINY = float(np.finfo(np.float32).tiny)


class PPOPlan(NamedTuple):
    """The host's plan of a chunk: the program's inputs ``(learning rates [I], clip ranges [I])``."""

    inputs: tuple


class CompiledPPO(CompiledProgram):
    """The pure chunk function of one PPO agent on one gymnax env (see the module docstring).

    Args:
        agent: a built :class:`~rlgraph_core.agents.ppo.PPOAgent` on the jax backend.
        env: the gymnax env's :class:`~rlgraph_jax.gymnax_envs.PureEnv`.
        num_envs: envs stepped at once (the agent's ``num_envs``).
    """

    def __init__(self, agent, env: PureEnv, num_envs: int):
        if not agent.discrete or getattr(agent, "multi", False):
            raise ValueError(
                f"The compiled loop's PPO acts in Discrete action spaces; '{env.name}' has {env.action_space!r}."
            )
        super().__init__(agent, env, num_envs, agent._minibatch_step)
        cfg = agent.config
        self.n_steps = int(cfg.n_steps)
        self.rollout_size = self.n_steps * self.num_envs
        self.batch_size = int(cfg.batch_size)
        self.n_epochs = int(cfg.n_epochs)
        self.steps_per_rollout = self.n_epochs * (self.rollout_size // self.batch_size)
        self.steps_per_iteration = self.rollout_size

    # ------------------------------------------------------------------ the host's side
    def plan(self, timesteps: int, iterations: int) -> PPOPlan:
        """The learning rate and clip range of each of the next ``iterations`` rollouts."""
        agent = self.agent
        steps = timesteps + self.rollout_size * np.arange(1, iterations + 1)
        lrs = np.asarray([agent.lr_schedule(int(t)) for t in steps], np.float32)
        clips = np.asarray([agent.clip_schedule(int(t)) for t in steps], np.float32)
        return PPOPlan((lrs, clips))

    def finish(self, plan: PPOPlan, losses: np.ndarray) -> dict:
        """Move the agent's counters past the chunk; its metrics (the last rollout's mean losses)."""
        agent = self.agent
        lrs, clips = plan.inputs
        steps = len(lrs) * self.steps_per_rollout
        agent.updates += steps
        agent.weights_version += steps
        agent.train_step.learning_rate = float(lrs[-1])
        metrics = {name: float(v) for name, v in zip(LOSS_NAMES, losses[-1])}
        metrics.update(clip_range=float(clips[-1]), gradient_steps=self.steps_per_rollout, early_stop=False)
        agent._last_metrics = metrics
        return metrics

    def resume_carry(self, carry: EnvCarry) -> EnvCarry:
        """A resumed run starts fresh episodes: the carry as it is."""
        return carry

    def store_memory(self, carry: EnvCarry) -> None:
        """PPO keeps no memory between rollouts."""

    # ------------------------------------------------------------------ inside the program
    def init_carry(self, seed: int) -> EnvCarry:
        """Fresh episodes in every env, keyed by ``seed`` (a pure function: vmap it over seeds)."""
        return init_env_carry(self.env, self.num_envs, seed)

    def _rollout(self, carry: EnvCarry):
        """``n_steps`` steps of every env with the current policy: ``(carry, trajectory, episodes)``."""
        graph, env, n = self.agent.graph, self.env, self.num_envs
        start = int(self.agent.action_start)

        def step(c: EnvCarry, _):
            key, noise_key, env_key = jax.random.split(c.key, 3)
            noise = jax.random.uniform(noise_key, (n, self.agent.num_actions), jnp.float32, _TINY, 1.0)
            actions, log_probs, values = graph.act(c.obs, noise)
            new, (reward, terminated, truncated, final), episodes = env_step(
                env, c._replace(key=key), env_key, actions.astype(jnp.int32) + start
            )
            # A cut episode bootstraps from V(its true final observation), as the agent's observe does.
            final_values = jax.lax.cond(
                jnp.any(truncated),
                lambda: jnp.where(truncated, graph.value(final), 0.0).astype(jnp.float32),
                lambda: jnp.zeros((n,), jnp.float32),
            )
            traj = {
                "obs": c.obs,
                "actions": actions,
                "log_probs": log_probs,
                "values": values,
                "rewards": reward,
                "terminated": terminated,
                "truncated": truncated,
                "final_values": final_values,
            }
            return new, (traj, episodes)

        return jax.lax.scan(step, carry, None, length=self.n_steps)

    def _learn(self, traj: dict, last_obs, clip_range, key):
        """GAE and the ``n_epochs x minibatches`` PPO steps on one rollout: mean loss outputs ``[6]``."""
        graph = self.agent.graph
        next_values = jnp.concatenate([traj["values"][1:], graph.value(last_obs)[None]], axis=0)
        next_values = jnp.where(traj["truncated"], traj["final_values"], next_values)
        advantages, returns = graph.advantages(
            traj["rewards"], traj["values"], next_values, traj["terminated"], traj["truncated"]
        )

        def flat(x):
            return jnp.reshape(x, (-1, *x.shape[2:]))

        samples = [flat(traj[k]) for k in ("obs", "actions", "log_probs", "values")] + [flat(advantages), flat(returns)]
        perms = jax.vmap(lambda k: jax.random.permutation(k, self.rollout_size))(jax.random.split(key, self.n_epochs))
        indices = jnp.reshape(perms, (self.steps_per_rollout, self.batch_size))
        *outputs, _ok = self.loop.traced([indices], [*samples, clip_range])
        if graph.obs_normalizer is not None:
            graph.update_normalizer(samples[0])
        return jnp.stack([jnp.mean(o) for o in outputs])

    def chunk(self, values: list, carry: EnvCarry, inputs: tuple):
        """Rollouts and updates for every entry of ``inputs = (learning rates [I], clip ranges
        [I])`` (a ``lax.scan``): a pure function ``(cell values, carry, inputs) -> (cell values,
        carry, ChunkOut)``."""
        cells = self.cells
        learning_rates, clip_ranges = inputs

        def rollout_and_learn(c, xs):
            vals, env_carry = c
            lr, clip = xs
            with swapped(cells, vals) as state:
                self._lr_cell.value = jnp.asarray(lr, jnp.float32)
                key, learn_key = jax.random.split(env_carry.key)
                env_carry, (traj, episodes) = self._rollout(env_carry._replace(key=key))
                losses = self._learn(traj, env_carry.obs, clip, learn_key)
                new = state.current()
            return (new, env_carry), (losses, *episodes)

        (values, carry), (losses, done, rets, lens) = jax.lax.scan(
            rollout_and_learn, (list(values), carry), (learning_rates, clip_ranges)
        )
        return values, carry, ChunkOut(losses, done, rets, lens)
