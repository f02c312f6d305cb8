"""The Ray actors of the executors: rollout workers and replay shards.

The classes are plain Python; :func:`remote` turns one into a Ray actor class. Every worker
builds its own backend and agent from the run config (so a worker process imports only the
framework its backend needs), steps its own gymnasium vector env with ``act``, and turns what it
collected into learner batches with the agent's actor role (``take_rollout`` / ``postprocess``).
Weights arrive as :class:`~rlgraph_core.agents.base.VersionedWeights` of numpy arrays.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import ray

from rlgraph_core.agents.base import VersionedWeights
from rlgraph_core.execution.local import true_next_obs

#: What a worker is told about the newest weights: ``(version, [ObjectRef])`` (the reference is
#: wrapped in a list so that Ray does not fetch the weights unless the worker needs them).
WeightsBox = tuple[int, list]


def writable(weights: VersionedWeights) -> VersionedWeights:
    """Copies of weights read from the object store (zero-copy numpy arrays there are read-only)."""
    return VersionedWeights(weights.version, {k: np.array(v, copy=True) for k, v in weights.arrays.items()})


class _Worker:
    """What both kinds of worker share: the agent, the vector env, weights and episode returns."""

    def __init__(self, config_dict: dict, index: int, seed: int, num_envs: int, agent_update: dict | None = None):
        from rlgraph_ray.worker_entry import worker_assembly

        self.index = index
        self.assembly = worker_assembly(config_dict, num_envs=num_envs, agent_update=agent_update)
        self.envs = self.assembly.make_vector_env(seed)
        self.agent = self.assembly.make_agent(
            self.envs.single_observation_space,
            self.envs.single_action_space,
            num_envs=num_envs,
            seed=seed,
            with_memory=False,
        )
        self.obs, _ = self.envs.reset(seed=seed)
        self.ep_returns = np.zeros(num_envs)
        self.finished: list[float] = []
        self._synced: int | None = None

    def ready(self) -> bool:
        """Answered once the worker is built (the executor waits for it with a timeout)."""
        return True

    def weights_version(self) -> int:
        """The version of the weights this worker acts with."""
        return self.agent.weights_version

    def describe(self) -> dict[str, Any]:
        """What this worker runs: ``{"backend", "mode", "weights_version"}`` (cheap; for tests and tools)."""
        train = self.assembly.config.train
        return {"backend": train.backend, "mode": train.mode, "weights_version": int(self.agent.weights_version)}

    def sync_weights(self, box: WeightsBox) -> int:
        """Take the weights of ``box`` now (if newer than this worker's); returns the version acted with."""
        self._sync(box)
        return int(self.agent.weights_version)

    def get_weights(self) -> dict[str, np.ndarray]:
        """The worker agent's weights as numpy arrays."""
        return self.agent.get_weights()

    def call_graph(self, method: str, *arrays: np.ndarray) -> list[np.ndarray]:
        """Outputs of the agent graph's API ``method`` on numpy inputs, as numpy (a tuple output as a
        list): lets a test compare a worker's policy with the learner's on the same inputs."""
        backend = self.agent.backend
        out = getattr(self.agent.graph, method)(*(backend.to_tensor(np.asarray(a)) for a in arrays))
        return [backend.to_numpy(o) for o in (out if isinstance(out, (tuple, list)) else (out,))]

    def _sync(self, box: WeightsBox | None) -> None:
        """Take the newest weights when they are newer than this worker's."""
        if box is not None and box[0] != self._synced:
            self.agent.set_weights(writable(ray.get(box[1][0])))
            self._synced = box[0]

    def _env_step(self) -> tuple:
        """One vector step with the exploring policy; returns the transition with the true next obs."""
        obs = self.obs
        actions = self.agent.act(obs)
        next_obs, rewards, terminated, truncated, infos = self.envs.step(actions)
        self.ep_returns += rewards
        done = np.logical_or(terminated, truncated)
        if done.any():
            self.finished.extend(self.ep_returns[done].tolist())
            self.ep_returns[done] = 0.0
        self.obs = next_obs
        return obs, actions, rewards, true_next_obs(next_obs, infos), terminated, truncated

    def _stats(self, steps: int, t0: float, **more) -> dict[str, Any]:
        finished, self.finished = self.finished, []
        return {
            "worker": self.index,
            "steps": steps,
            "seconds": time.perf_counter() - t0,
            "episode_returns": finished,
            "version": self.agent.weights_version,
            **more,
        }


class SyncWorker(_Worker):
    """``ray_sync`` worker: one on-policy rollout (``agent.n_steps`` steps per env) per call, with GAE."""

    def sample(self, box: WeightsBox | None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Collect one rollout with the newest weights; ``(postprocessed rollout, stats)``."""
        self._sync(box)
        t0, steps = time.perf_counter(), 0
        batch = None
        while batch is None:
            obs, actions, rewards, next_obs, terminated, truncated = self._env_step()
            self.agent.observe(obs, actions, rewards, next_obs, terminated, truncated)
            steps += len(obs)
            batch = self.agent.take_rollout()
        return batch, self._stats(steps, t0)


class ApexWorker(_Worker):
    """``ray_apex`` worker: collects fragments, folds n-step transitions and initial priorities on
    the worker, and inserts them into replay shards directly (the driver never relays samples)."""

    def __init__(self, config_dict, index, seed, num_envs, agent_update, shards: list, fragment_length: int):
        super().__init__(config_dict, index, seed, num_envs, agent_update)
        self.shards = shards
        self.fragment_length = fragment_length
        self.sent = 0
        self._pending_insert = None

    def collect(self, box: WeightsBox | None) -> dict[str, Any]:
        """Collect ``fragment_length`` vector steps, postprocess them and send them to a shard."""
        self._sync(box)
        t0 = time.perf_counter()
        keys = ("obs", "actions", "rewards", "next_obs", "terminated", "truncated")
        trajectory: dict[str, list] = {k: [] for k in keys}
        for _ in range(self.fragment_length):
            for k, v in zip(keys, self._env_step()):
                trajectory[k].append(np.asarray(v))
        batch = self.agent.postprocess({k: np.stack(v) for k, v in trajectory.items()})
        records = len(batch.get("rewards", ()))
        shard_sizes = None
        if self._pending_insert is not None:  # one insert in flight: the previous one is done first
            shard_sizes = ray.get(self._pending_insert)
            self._pending_insert = None
        if records:
            shard = self.shards[(self.index + self.sent) % len(self.shards)]
            self.sent += 1
            self._pending_insert = shard.add.remote(batch)
        steps = self.fragment_length * len(self.obs)
        return self._stats(steps, t0, records=records, shard_size=shard_sizes)


class ReplayShard:
    """One replay shard: the configured memory with ``capacity / K`` records (prioritized or not).

    ``add`` inserts a whole batch and then sets its initial priorities, in one actor call, so a
    worker that dies never leaves half a batch behind.
    """

    def __init__(self, memory_settings: dict, seed: int):
        from rlgraph_ray.worker_entry import shard_memory

        self.memory = shard_memory(memory_settings, seed)
        self.prioritized = bool(getattr(self.memory, "prioritized", False))
        self.inserted = 0

    def ready(self) -> bool:
        """Answered once the shard is built."""
        return True

    def add(self, batch: dict[str, np.ndarray]) -> int:
        """Insert a postprocessed batch (initial priorities from the worker); returns the shard's size."""
        batch = dict(batch)
        priorities = batch.pop("priorities", None)
        indices = self.memory.insert(batch)
        if self.prioritized and priorities is not None:
            self.memory.update_priorities(indices, priorities)
        self.inserted += len(batch["rewards"])
        return len(self.memory)

    def sample(self, batch_size: int, count: int = 1) -> list[dict[str, np.ndarray]] | None:
        """``count`` batches (each with ``indices`` and, prioritized, ``weights``), or None while the
        shard holds fewer than ``batch_size`` records."""
        if len(self.memory) < batch_size:
            return None
        return [self.memory.sample(batch_size) for _ in range(count)]

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        """New priorities from the learner for the records at ``indices``."""
        if self.prioritized:
            self.memory.update_priorities(indices, priorities)

    def size(self) -> int:
        """Records held."""
        return len(self.memory)


def remote(cls: type):
    """``cls`` as a Ray actor class (made when first needed)."""
    return ray.remote(cls)
