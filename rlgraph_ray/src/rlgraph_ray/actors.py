"""The Ray actors of the executors: rollout workers and replay shards.

The classes are plain Python; :func:`remote` turns one into a Ray actor class. Every worker
builds its own backend and agent from the run config (so a worker process imports only the
framework its backend needs), steps its own gymnasium vector env with ``act``, and turns what it
collected into learner batches with the agent's actor role (``take_rollout`` / ``postprocess``).
Weights arrive as :class:`~rlgraph_core.agents.base.VersionedWeights` of numpy arrays.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import ray
from ray.exceptions import RayError

from rlgraph_core.agents.base import VersionedWeights
from rlgraph_core.agents.policy_set import policy_batches
from rlgraph_core.errors import NonFiniteError
from rlgraph_core.execution.env_runner import EnvRunner
from rlgraph_core.memories.snapshot import load_memory_snapshot, load_memory_state, save_memory_snapshot
from rlgraph_core.spaces import Space
from rlgraph_ray.worker_entry import shard_memory, worker_assembly

#: What a worker is told about the newest weights: ``(version, [ObjectRef])`` (the reference is
#: wrapped in a list so that Ray does not fetch the weights unless the worker needs them).
WeightsBox = tuple[int, list]

#: What an Ape-X worker is told about the replay shards: ``(version, {policy: [actor handles]})``
#: (policy None: the run's one agent); the version changes when a shard is restarted.
ShardsBox = tuple[int, dict]


def writable(weights: VersionedWeights) -> VersionedWeights:
    """Copies of weights read from the object store (zero-copy numpy arrays there are read-only)."""
    return VersionedWeights(weights.version, {k: np.array(v, copy=True) for k, v in weights.arrays.items()})


class _Worker:
    """What both kinds of worker share: the agent, the vector env stepped by the shared
    :class:`~rlgraph_core.execution.env_runner.EnvRunner` (final observations, episode
    bookkeeping, step counts), and the weights."""

    def __init__(self, config_dict: dict, index: int, seed: int, num_envs: int, agent_update: dict | None = None):
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
        self.runner = EnvRunner(self.agent, self.envs, seed)
        self._synced: int | None = None
        #: the run records a dataset (``train.record_dataset``): calls return the env steps they took
        self.recording = self.assembly.config.train.record_dataset is not None

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

    def _stats(self, steps: int, t0: float, **more) -> dict[str, Any]:
        """What a call reports besides its data: env steps, seconds, finished episodes, weights version."""
        finished = self.runner.take_episodes()
        return {
            "worker": self.index,
            "steps": steps,
            "seconds": time.perf_counter() - t0,
            "episode_returns": finished.returns,
            "episode_lengths": finished.lengths,
            "version": self.agent.weights_version,
            **more,
        }


class SyncWorker(_Worker):
    """``ray_sync`` worker: one on-policy rollout (``agent.n_steps`` steps per env) per call, with GAE."""

    def sample(self, box: WeightsBox | None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Collect one rollout with the newest weights; ``(postprocessed rollout, stats)``. A run that
        records a dataset gets the rollout's vector steps (:class:`~rlgraph_core.execution.env_runner.Step`,
        true next observations) in order in ``stats["env_steps"]``."""
        self._sync(box)
        t0, start = time.perf_counter(), self.runner.env_steps
        batch = None
        taken = []
        while batch is None:
            step = self.runner.step()
            if self.recording:
                taken.append(step)
            batch = self.agent.take_rollout()
        more = {"env_steps": taken} if self.recording else {}
        return batch, self._stats(self.runner.env_steps - start, t0, **more)


class ApexWorker(_Worker):
    """``ray_apex`` worker: collects fragments, folds n-step transitions and initial priorities on
    the worker, and inserts them into replay shards directly (the driver never relays samples).
    With several policies (a PettingZoo env) each policy's records go to that policy's shards.

    One insert per policy is in flight at a time; its outcome is reported with the next fragment's
    stats (``acks``: ``[policy, shard, generation, shard inserts after it]``; ``insert_failed``:
    ``[policy, shard, records]`` when the shard died), so the driver can tell what a dead shard had
    received.
    """

    def __init__(self, config_dict, index, seed, num_envs, agent_update, shards: ShardsBox, fragment_length: int):
        super().__init__(config_dict, index, seed, num_envs, agent_update)
        self.shards_version, self.shards = shards
        self.fragment_length = fragment_length
        self.sent = 0
        self._pending_inserts: list[tuple[str | None, int, int, Any]] = []  # (policy, shard, records, ref)

    def collect(self, box: WeightsBox | None, shards: ShardsBox | None = None) -> dict[str, Any]:
        """Collect ``fragment_length`` vector steps, postprocess them and send them to a shard.

        ``shards`` (``(version, handles)``) replaces the shard handles when its version is newer
        (a shard was restarted).
        """
        self._sync(box)
        if shards is not None and shards[0] != self.shards_version:
            self.shards_version, self.shards = shards
        t0, start = time.perf_counter(), self.runner.env_steps
        # time-major [T, N, ...]; dtypes kept (uint8 frames stay uint8), Dict observations per key
        batches = policy_batches(self.agent, self.runner.trajectory(self.fragment_length))
        acks, failed = [], []
        pending, self._pending_inserts = self._pending_inserts, []
        for policy, k, n, ref in pending:  # one insert per policy in flight: the previous ones are done first
            ray.wait([ref])
            try:
                generation, inserted = ray.get(ref)
                acks.append([policy, k, generation, inserted])
            except RayError:  # the shard died: those records never made it (the driver restarts it)
                failed.append([policy, k, n])
        records = 0
        for policy, batch in batches.items():
            n = len(batch.get("rewards", ()))
            if n:
                shards = self.shards[policy]
                k = (self.index + self.sent) % len(shards)
                self._pending_inserts.append((policy, k, n, shards[k].add.remote(batch)))
                records += n
        if records:
            self.sent += 1
        return self._stats(self.runner.env_steps - start, t0, records=records, acks=acks, insert_failed=failed)


class ReplayShard:
    """One replay shard: the configured memory with ``capacity / K`` records (prioritized or not).

    ``add`` inserts a whole batch and then sets its initial priorities, in one actor call, so a
    worker that dies never leaves half a batch behind. ``inserted`` counts every record ever
    inserted (carried on through snapshots and checkpoints). With ``snapshot_dir`` and
    ``snapshot_interval`` the shard writes its memory there every ``snapshot_interval`` inserted
    records (an atomic array folder, :func:`rlgraph_core.memories.snapshot.save_memory_snapshot`);
    a shard started with ``restore=True`` reloads that snapshot (checked against its capacity and
    the record spaces first) and so continues from it.

    Args:
        memory_settings: ``agent.memory`` as a dict, with the shard's capacity.
        seed: seeds the memory's sampling.
        index / generation: which shard this is, and how many times it was restarted.
        snapshot_dir: where its snapshot lives (None: no snapshots).
        snapshot_interval: inserted records between snapshots (None: no snapshots).
        record_spaces: ``{field: Space.to_json()}`` of one record, to check what is loaded.
        restore: load the snapshot in ``snapshot_dir`` if there is one.
        allow_nonfinite_obs: the run's ``env.allow_nonfinite_obs``: NaN/inf observations in a loaded
            snapshot or checkpoint are accepted (any other non-finite record is refused).
    """

    def __init__(
        self,
        memory_settings: dict,
        seed: int,
        index: int = 0,
        generation: int = 0,
        snapshot_dir: str | None = None,
        snapshot_interval: int | None = None,
        record_spaces: dict | None = None,
        restore: bool = False,
        allow_nonfinite_obs: bool = False,
    ):
        self.memory = shard_memory(memory_settings, seed)
        self.prioritized = bool(getattr(self.memory, "prioritized", False))
        self.index, self.generation = index, generation
        self.snapshot_dir, self.snapshot_interval = snapshot_dir, snapshot_interval
        self.records = None if record_spaces is None else {k: Space.from_json(v) for k, v in record_spaces.items()}
        self.allow_nonfinite_obs = allow_nonfinite_obs
        self.inserted = 0
        self.snapshot_inserted = 0
        self.snapshot_error: str | None = None
        if restore and snapshot_dir is not None and os.path.lexists(snapshot_dir):
            info = load_memory_snapshot(snapshot_dir, self.memory, self.records, allow_nonfinite_obs)
            self.inserted = self.snapshot_inserted = int(info.get("inserted", 0))

    def ready(self) -> bool:
        """Answered once the shard is built."""
        return True

    def add(self, batch: dict[str, np.ndarray]) -> tuple[int, int]:
        """Insert a postprocessed batch (initial priorities from the worker); ``(generation, inserted)``."""
        batch = dict(batch)
        priorities = batch.pop("priorities", None)
        indices = self.memory.insert(batch)
        if self.prioritized and priorities is not None:
            self.memory.update_priorities(indices, priorities)
        self.inserted += len(batch["rewards"])
        if self.snapshot_interval and self.inserted - self.snapshot_inserted >= self.snapshot_interval:
            self.snapshot()
        return self.generation, self.inserted

    def snapshot(self) -> None:
        """Write the snapshot now (a failed or refused write, e.g. a NaN record, is kept in
        ``counts()['snapshot_error']``; the previous snapshot stays and the shard goes on)."""
        if self.snapshot_dir is None:
            return
        info = {"inserted": self.inserted, "shard": self.index, "capacity": self.memory.capacity}
        try:
            save_memory_snapshot(self.snapshot_dir, self.memory, info, self.allow_nonfinite_obs)
        except (OSError, NonFiniteError) as exc:
            self.snapshot_error = f"{type(exc).__name__}: {exc}"
            return
        self.snapshot_inserted, self.snapshot_error = self.inserted, None

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

    def counts(self) -> dict[str, Any]:
        """``size``, ``inserted`` (ever), ``snapshot_inserted`` (inserted at the last snapshot), ``generation``."""
        return {
            "size": len(self.memory),
            "inserted": self.inserted,
            "snapshot_inserted": self.snapshot_inserted,
            "generation": self.generation,
            "snapshot_error": self.snapshot_error,
        }

    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The memory's ``state_dict`` and ``{"inserted", "capacity"}``, for a checkpoint."""
        return self.memory.state_dict(), {"inserted": self.inserted, "capacity": self.memory.capacity}

    def restore(self, state: dict[str, np.ndarray], inserted: int) -> int:
        """Load a memory state (from a checkpoint, headers already checked) and snapshot it; the size.

        Raises:
            CheckpointError: the records do not fit this shard (its memory is unchanged then).
        """
        load_memory_state(
            self.memory, state, self.records, f"The checkpoint's replay shard {self.index}", self.allow_nonfinite_obs
        )
        self.inserted = int(inserted)
        self.snapshot()
        return len(self.memory)


def remote(cls: type):
    """``cls`` as a Ray actor class (made when first needed)."""
    return ray.remote(cls)
