"""Settings models of the Ray executors (the run config's ``executor:`` section).

Only pydantic is imported here, so validating a config never imports ray.
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal, Optional

from pydantic import Field, field_validator

from rlgraph_core.agents.support import agent_capabilities
from rlgraph_core.errors import ConfigError
from rlgraph_core.execution.settings import ExecutorSettings

#: What ``executor.address`` may hold (besides null: a private local Ray).
ADDRESS_PATTERN = re.compile(r"auto|local|(?:ray://)?[A-Za-z0-9_.\-\[\]:]+:\d{1,5}")


class RaySettings(ExecutorSettings):
    """Settings every Ray executor shares."""

    address: Optional[str] = Field(
        None,
        description="null or local: start a private local Ray; auto, host:port or ray://host:port: join that cluster",
    )
    connect_timeout_s: float = Field(
        10.0, gt=0, description="seconds to reach executor.address (host:port, ray://host:port) before the run fails"
    )
    num_workers: int = Field(2, gt=0, description="worker actors, each with its own vector env and agent copy")
    envs_per_worker: Optional[int] = Field(
        None, gt=0, description="envs each worker steps; null = env.num_envs split evenly across the workers"
    )
    num_cpus_per_worker: float = Field(1.0, gt=0, description="CPUs Ray reserves per worker (fractions allowed)")
    fragment_length: Optional[int] = Field(None, gt=0, description="env steps per env in each worker fragment")
    weight_sync_interval: int = Field(1, gt=0, description="learner updates between weight broadcasts")
    max_worker_restarts: int = Field(
        3, ge=0, description="worker deaths tolerated (each restarted) before the run stops"
    )
    placement_timeout_s: float = Field(
        120.0, gt=0, description="seconds for all actors to be placed and built before the run fails"
    )
    worker_backend: Optional[str] = Field(
        None,
        min_length=1,
        description="backend the workers build (e.g. tf under a torch learner; weights travel as numpy); "
        "null = train.backend",
    )
    worker_mode: Optional[Literal["eager", "static"]] = Field(None, description="workers' mode; null = train.mode")

    @field_validator("address")
    @classmethod
    def _address_form(cls, v: Optional[str]) -> Optional[str]:
        """``auto``, ``local``, ``host:port`` or ``ray://host:port`` (null: a private local Ray)."""
        if v is not None and not ADDRESS_PATTERN.fullmatch(v.strip()):
            raise ValueError(
                f"unknown Ray address {v!r}; use null (a private local Ray), auto (the cluster this machine "
                f"belongs to), host:port (a head node's GCS) or ray://host:port (Ray Client)"
            )
        return None if v is None else v.strip()

    def workers_envs(self, env) -> int:
        """Envs per worker: ``envs_per_worker``, by default ``env.num_envs / num_workers`` (at least 1)."""
        return self.envs_per_worker or max(1, env.num_envs // self.num_workers)


class RaySyncSettings(RaySettings):
    """``ray_sync``: synchronous sampling for on-policy agents (PPO, A2C).

    Each round every worker collects ``fragment_length`` (= ``agent.n_steps``) steps on each of
    its envs with the newest weights and returns the rollout with GAE computed on the worker;
    the learner concatenates the fragments along the env axis and learns once. A PettingZoo env's
    policies (docs/multi_agent.md) run too: each worker's policy set returns every policy's rollout,
    each policy learns on its part, and the weights carry each policy's version and update count.
    A recurrent policy's rollout carries the state at the start of each of its sequences
    (``sequence_states``), concatenated along the env axis like every other field, so the learner
    unrolls each sequence from the state its worker stored (docs/recurrent.md).
    """

    #: a multi-agent run's PolicySet plays the worker's rows and learns on the driver
    runs_several_policies: ClassVar[bool] = True

    sample_timeout_s: Optional[float] = Field(
        None, gt=0, description="a worker that returns no fragment within this many seconds is restarted"
    )

    def validate_run(self, agent, env, train) -> None:
        """On-policy agents only; a fragment is one rollout (``agent.n_steps``); a minibatch fits a round."""
        if "rollouts" not in agent_capabilities(agent):
            raise ConfigError(
                f"'train.executor' = 'ray_sync' runs on-policy agents that collect rollouts of agent.n_steps "
                f"(ppo, a2c); agent.type '{agent.type}' does not declare the 'rollouts' capability: use ray_apex "
                f"for DQN-family agents or the local executor."
            )
        n_steps = agent.n_steps
        if self.fragment_length is not None and self.fragment_length != n_steps:
            raise ConfigError(
                f"'executor.fragment_length' = {self.fragment_length} differs from 'agent.n_steps' = {n_steps}: "
                f"a ray_sync worker returns one rollout of agent.n_steps steps per env; leave fragment_length "
                f"null or set it to {n_steps}."
            )
        if self.envs_per_worker is None and env.num_envs % self.num_workers:
            raise ConfigError(
                f"'env.num_envs' = {env.num_envs} cannot be split evenly across 'executor.num_workers' = "
                f"{self.num_workers}: ray_sync learns from the same total batch as the local executor, so set "
                f"env.num_envs to a multiple of num_workers or executor.envs_per_worker explicitly."
            )
        batch_size = getattr(agent, "batch_size", None)
        rollout = n_steps * self.workers_envs(env) * self.num_workers
        if batch_size is not None and batch_size > rollout:
            raise ConfigError(
                f"'agent.batch_size' = {batch_size} is larger than one ray_sync round, which holds agent.n_steps "
                f"x envs_per_worker x num_workers = {rollout} samples; lower batch_size or add workers or envs."
            )


class RayApexSettings(RaySettings):
    """``ray_apex``: distributed prioritized replay (Ape-X) for DQN-family agents.

    Worker ``i`` of ``N`` explores with ``epsilon ** (1 + epsilon_alpha * i / (N - 1))``; its
    fragments are n-step folded and given initial priorities on the worker and sent straight to
    one of ``num_replay_shards`` replay shards (``agent.memory`` split into equal parts). A
    PettingZoo env's policies run as independent DQN (docs/multi_agent.md): each policy has its own
    ``num_replay_shards`` shards of its own memory, optimizer, target network and replay ratio.
    """

    #: a multi-agent run's PolicySet plays the worker's rows; each policy learns from its own shards
    runs_several_policies: ClassVar[bool] = True

    fragment_length: Optional[int] = Field(
        50, gt=0, description="env steps per env a worker collects before sending them to a shard"
    )
    weight_sync_interval: int = Field(16, gt=0, description="learner updates between weight broadcasts")
    num_replay_shards: int = Field(1, gt=0, description="replay shard actors; each holds agent.memory.capacity / K")
    sample_batches: int = Field(
        4, gt=0, description="batches per sample request to a shard (fewer round trips; one request in flight)"
    )
    epsilon: float = Field(0.4, gt=0, le=1, description="Ape-X base epsilon")
    epsilon_alpha: float = Field(7.0, ge=0, description="Ape-X epsilon exponent spread across workers")
    throttle: bool = Field(
        True,
        description="keep the agent's replay ratio (gradient_steps per train_freq env steps, as the local "
        "executor): the learner never runs ahead and workers wait while it is over one round behind; "
        "false: workers and learner run as fast as they can (Ape-X)",
    )

    replay_snapshot_interval: Optional[int] = Field(
        10_000,
        gt=0,
        description="records a shard inserts between snapshots of its memory (into <out>/replay_snapshots); a "
        "restarted shard reloads its last one; null: no snapshots (a restarted shard starts empty)",
    )
    save_replay: bool = Field(
        False,
        description="store the shards' contents in every periodic and final checkpoint, so that --resume "
        "restores them (checkpoints grow by the replay's size)",
    )

    def worker_epsilon(self, i: int) -> float:
        """Exploration rate of worker ``i``: ``epsilon ** (1 + epsilon_alpha * i / (N - 1))``."""
        n = self.num_workers
        return float(self.epsilon ** (1 + self.epsilon_alpha * i / (n - 1))) if n > 1 else float(self.epsilon)

    def validate_run(self, agent, env, train) -> None:
        """DQN-family agents only (epsilon-greedy exploration, a replay memory); shards hold a batch."""
        if not {"replay", "exploration"} <= agent_capabilities(agent):
            raise ConfigError(
                f"'train.executor' = 'ray_apex' runs DQN-family agents (epsilon-greedy exploration and a "
                f"replay memory); agent.type '{agent.type}' is not one: use ray_sync for ppo or a2c, or the "
                f"local executor."
            )
        exploration_type = getattr(agent.exploration, "type", None)
        if exploration_type != "epsilon_greedy":
            raise ConfigError(
                f"'agent.exploration.type' = '{exploration_type}': ray_apex gives each worker its own fixed "
                f"epsilon (executor.epsilon, executor.epsilon_alpha), so it needs epsilon_greedy exploration; "
                f"use agent.exploration: epsilon_greedy (or a float), or the local executor for other explorations."
            )
        per_shard = agent.memory.capacity // self.num_replay_shards
        if per_shard < agent.batch_size:
            raise ConfigError(
                f"'executor.num_replay_shards' = {self.num_replay_shards} splits agent.memory.capacity = "
                f"{agent.memory.capacity} into shards of {per_shard} records, fewer than agent.batch_size = "
                f"{agent.batch_size}: a shard could never hold a batch; use fewer shards or a larger memory."
            )


class RayImpalaSettings(RaySettings):
    """``ray_impala``: asynchronous actor-learner with V-trace (IMPALA, Espeholt et al. 2018).

    Workers collect fragments of ``fragment_length`` steps per env (default ``agent.n_steps``)
    with whatever weights they hold and tag them with that weights version; the learner takes
    ``learner_batch_fragments`` fragments at a time from a bounded queue of at most
    ``queue_size`` fragments (waiting or being collected: when it is full, workers wait), learns
    with V-trace and publishes its weights every ``weight_sync_interval`` updates.
    """

    weight_sync_interval: int = Field(
        1, gt=0, description="learner updates (gradient steps) between weight publications to the object store"
    )
    queue_size: int = Field(
        8,
        gt=0,
        description="fragments waiting for the learner or being collected, at most; when it is full, workers "
        "wait (memory stays bounded)",
    )
    learner_batch_fragments: int = Field(
        2, gt=0, description="fragments concatenated along the env axis into one learner batch"
    )
    sample_timeout_s: Optional[float] = Field(
        None,
        gt=0,
        description="a worker that delivers no fragment within this many seconds of starting one is restarted "
        "(its requests are dropped, so it never holds queue slots for ever)",
    )
    fragments_in_flight: int = Field(
        2,
        gt=0,
        description="fragments each worker is asked for ahead (1: it waits for the driver between fragments; "
        "2: it starts the next one at once, one weights version older)",
    )

    def validate_run(self, agent, env, train) -> None:
        """V-trace agents only (``impala``); the queue must hold one learner batch."""
        if not {"rollouts", "vtrace"} <= agent_capabilities(agent):
            raise ConfigError(
                f"'train.executor' = 'ray_impala' runs V-trace agents that correct the policy lag of "
                f"asynchronous actors (impala); agent.type '{agent.type}' is not one: use ray_sync for ppo or "
                f"a2c, ray_apex for DQN-family agents, or the local executor."
            )
        if self.learner_batch_fragments > self.queue_size:
            raise ConfigError(
                f"'executor.learner_batch_fragments' = {self.learner_batch_fragments} is larger than "
                f"'executor.queue_size' = {self.queue_size}: the queue could never hold one learner batch; "
                f"raise queue_size or lower learner_batch_fragments."
            )
        network = getattr(agent, "network", None)
        steps = self.fragment_steps(agent)
        if getattr(network, "stateful", False) and steps % int(network.seq_len):
            raise ConfigError(
                f"'executor.fragment_length' = {steps} is not a whole number of sequences of "
                f"'agent.network.seq_len' = {network.seq_len} steps: each worker ships the state at the start of "
                f"every sequence of its fragment and the learner unrolls whole sequences; use a fragment_length "
                f"that is a multiple of seq_len (e.g. {network.seq_len * max(1, steps // int(network.seq_len))}), "
                f"or leave it null (agent.n_steps)."
            )

    def fragment_steps(self, agent) -> int:
        """Env steps per env in one fragment: ``fragment_length``, by default ``agent.n_steps``."""
        return int(self.fragment_length or agent.n_steps)
