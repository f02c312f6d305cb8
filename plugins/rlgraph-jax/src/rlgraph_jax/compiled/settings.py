"""The ``compiled`` executor's ``executor:`` settings and what it refuses (no JAX import)."""

from __future__ import annotations

from typing import Optional

from pydantic import Field

from rlgraph_core.errors import ConfigError
from rlgraph_core.execution.settings import ExecutorSettings

#: the env class the compiled loop can trace (``env.id`` in module:Class form)
GYMNAX_ENV_ID = "rlgraph_jax.gymnax_envs:GymnaxEnv"
#: the agents whose learning step the compiled loop traces
ALGORITHMS = ("ppo", "dqn")


class CompiledSettings(ExecutorSettings):
    """``compiled``: env steps, acting and PPO or DQN updates of a gymnax env as one ``jax.jit`` program.

    Each call of the program runs ``chunk_timesteps`` env steps (PPO: a ``lax.scan`` over
    rollouts, each a ``lax.scan`` over ``agent.n_steps`` steps of ``env.num_envs`` envs vmapped;
    DQN: a ``lax.scan`` over env steps, each followed by the update round the agent's schedule
    asks for, from a replay ring in the program); between calls the run reports metrics,
    evaluates, checkpoints and may stop, as every executor does.
    """

    chunk_timesteps: Optional[int] = Field(
        None,
        gt=0,
        description="env steps per compiled call (rounded up to whole rollouts of agent.n_steps x env.num_envs); "
        "metrics, evaluation, checkpoints and stopping happen between calls; null: the smaller of "
        "train.eval_interval and train.checkpoint_interval",
    )
    num_seeds: int = Field(
        1,
        ge=1,
        description="train this many independent agents at once (vmapped), seeds train.seed, train.seed+1, ...; "
        "the run follows, evaluates and checkpoints the first, and writes each one's final checkpoint "
        "to seeds/seed_<seed>",
    )

    compilation_cache_dir: Optional[str] = Field(
        "~/.cache/rlgraph-jax/xla",
        description="JAX's persistent compilation cache (process-wide, every program of the process): a second "
        "run with the same shapes loads its programs from here instead of compiling them; null turns it off",
    )

    def validate_run(self, agent, env, train) -> None:
        """A gymnax env, the jax backend; PPO without host-side early stopping and with whole
        minibatches, or DQN with one-step returns, uniform replay and epsilon-greedy exploration.

        Raises:
            ConfigError: one paragraph naming what is not supported and what would work.
        """
        problems = []
        if train.backend != "jax":
            problems.append(
                f"train.backend is '{train.backend}' (the compiled loop is a JAX program: set train.backend=jax)"
            )
        if env.id != GYMNAX_ENV_ID:
            problems.append(
                f"env.id '{env.id}' is not a JAX environment (use env.id '{GYMNAX_ENV_ID}' with "
                f"env.kwargs.name a gymnax env such as CartPole-v1 or Breakout-MinAtar)"
            )
        if env.wrappers:
            problems.append("env.wrappers are gymnasium wrappers, which a compiled program cannot trace (remove them)")
        if agent.type not in ALGORITHMS:
            problems.append(f"agent.type '{agent.type}' has no compiled learning step (use {', '.join(ALGORITHMS)})")
        elif agent.type == "dqn":
            if agent.n_step != 1:
                problems.append(
                    f"agent.n_step is {agent.n_step} (the compiled replay stores one-step transitions: set 1)"
                )
            if agent.memory.type != "replay":
                problems.append(
                    f"agent.memory.type is '{agent.memory.type}' (the compiled replay samples uniformly: use 'replay')"
                )
            exploration = getattr(agent.exploration, "type", None)
            if exploration != "epsilon_greedy":
                problems.append(
                    f"agent.exploration.type is '{exploration}' (the compiled loop draws epsilon-greedy's noise: "
                    f"use 'epsilon_greedy')"
                )
            capacity = getattr(agent.memory, "capacity", 0)
            if capacity < env.num_envs:
                problems.append(f"agent.memory.capacity {capacity} is below env.num_envs {env.num_envs}")
        else:
            if getattr(agent, "target_kl", None) is not None:
                problems.append("agent.target_kl stops epochs on the host (set it to null)")
            rollout = agent.n_steps * env.num_envs
            if rollout % agent.batch_size:
                problems.append(
                    f"agent.batch_size {agent.batch_size} does not divide a rollout of agent.n_steps x env.num_envs "
                    f"= {rollout} samples (the compiled epochs take whole minibatches)"
                )
        if problems:
            raise ConfigError(
                "'train.executor' = 'compiled' runs PPO or DQN on a gymnax environment with the jax backend as one "
                "compiled program, and this config does not fit: " + "; ".join(problems) + ". For any other "
                "environment or agent use the local executor (train.executor=local), which runs every "
                "agent on every backend."
            )
