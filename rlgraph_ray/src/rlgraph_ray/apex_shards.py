"""``ray_apex``'s replay shards: the shard actors, their snapshots, restarts and checkpointed contents.

A run of several policies (a PettingZoo env, docs/multi_agent.md) has one :class:`ReplayShards` per
policy: its own ``executor.num_replay_shards`` shards of its own ``agent.memory``, snapshots under
``replay_snapshots/NAME/`` and its records under ``NAME/`` in the checkpoint's ``replay`` attachment.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np
import ray
from ray.exceptions import RayTaskError

from rlgraph_core.checkpoint import Attachments, Headers, read_attachment
from rlgraph_core.errors import CheckpointError, RLGraphError
from rlgraph_core.memories.snapshot import memory_state_check
from rlgraph_core.spaces import IntBox, Space
from rlgraph_ray.actors import ReplayShard, ShardsBox
from rlgraph_ray.base import WORKER_FAULTS, WorkerRestartsExceeded, fault_reason
from rlgraph_ray.cluster import actor_options, kill_all, wait_ready

#: The checkpoint attachment that holds the replay shards' contents (``executor.save_replay``).
REPLAY_ATTACHMENT = "replay"

#: Where a run folder keeps its replay shards' snapshots (``replay_snapshots/shard-<k>``).
SNAPSHOT_DIR = "replay_snapshots"

_SHARD_KEY = re.compile(r"^shard_(\d+)/(.+)$")


class ShardRestarts:
    """Shard restarts of a whole run, counted across the shard sets of its policies (one budget:
    ``executor.max_worker_restarts``)."""

    def __init__(self) -> None:
        self.count = 0


class ReplayShards:
    """The K replay shard actors of one ``ray_apex`` run, and the care they get.

    A dead shard is replaced by one that reloads its last snapshot (:meth:`restart`; what it had
    received since is counted in :meth:`lost_on_restart`); with ``executor.save_replay`` their
    contents go into every periodic and final checkpoint (:meth:`attachments`, the attachment
    ``replay``), and ``--resume`` loads them back into the new shards (:meth:`start`).

    Args:
        config: the run config.
        tag: the run's Ray actor name tag.
        out_dir: the run folder (None: snapshots go to a temporary folder removed by :meth:`stop`).
        resume_dir: the checkpoint a resumed run loads its replay from (None: a new run).
        learner_records: ``{field: Space}`` of one learner record (None: the agent declares none).
        on_restart: called with a shard's index once it was replaced, so the caller can forget
            what it holds of the dead one (sample requests, batches).
        policy: the policy whose replay these shards hold, in a run of several policies (None:
            the run's one agent).
        memory: that policy's ``agent.memory`` settings (None: the run's ``agent.memory``).
        lane: the policy's position among the run's policies (seeds its shards apart from the others').
        budget: the run's shard restarts, shared by the shard sets of its policies (None: these alone).
    """

    def __init__(
        self,
        config: Any,
        tag: str,
        out_dir: str | None,
        resume_dir: str | None,
        learner_records: dict[str, Space] | None,
        on_restart: Callable[[int], None],
        *,
        policy: str | None = None,
        memory: Any = None,
        lane: int = 0,
        budget: ShardRestarts | None = None,
    ):
        self.config, self.tag, self.out_dir, self.resume_dir = config, tag, out_dir, resume_dir
        self.policy, self.lane = policy, lane
        self.memory = config.agent.memory if memory is None else memory
        self.budget = ShardRestarts() if budget is None else budget
        #: where this set's arrays sit in the checkpoint's replay attachment ("" or "NAME/")
        self.prefix = "" if policy is None else f"{policy}/"
        #: one record as shards store it: the learner's, plus ``policy_version``
        self.records = (
            None
            if learner_records is None
            else {**learner_records, "policy_version": IntBox(0, np.iinfo(np.int64).max, shape=())}
        )
        self._on_restart = on_restart
        self.handles: list = []
        self.restarts = 0
        self.restored: int | None = None  # records loaded into the shards on resume
        self._generation: list[int] = []
        self._version = 0
        self._start: dict[tuple[int, int], int] = {}  # (shard, generation) -> its inserts at start
        self._acked: dict[tuple[int, int], int] = {}  # (shard, generation) -> inserts acknowledged
        self._lost: list[tuple[tuple[int, int], int]] = []  # dead (shard, generation), inserts restored
        # no run folder (the Python API's default): snapshots go to a temporary one
        self._scratch = tempfile.TemporaryDirectory(prefix="rlgraph-replay-") if out_dir is None else None

    # ------------------------------------------------------------------ names and places
    def names(self) -> list[str]:
        """The Ray actor names of the current shards."""
        return [self._name(k) for k in range(len(self._generation))]

    def _name(self, index: int) -> str:
        policy = "" if self.policy is None else f"{self.policy}-"
        return f"rlgraph-{self.tag}-{policy}shard-{index}-{self._generation[index]}"

    def _snapshot_dir(self, index: int) -> str:
        """The snapshot folder of shard ``index`` (absolute: shard processes may run elsewhere).

        The run folder is resolved, never the snapshot path itself: that is a link to the newest
        version, and a restarted shard given the version folder would write its snapshots beside
        it, where the next restart does not look (issue 19).
        """
        return str(self._snapshot_root() / f"shard-{index}")

    def _snapshot_root(self) -> Path:
        """The run folder's ``replay_snapshots``, or the temporary folder of a run without one."""
        if self._scratch is not None:
            return Path(self._scratch.name)
        root = Path(self.out_dir).resolve() / SNAPSHOT_DIR
        return root if self.policy is None else root / self.policy

    def capacity(self) -> int:
        """Records one shard holds at most: ``agent.memory.capacity / executor.num_replay_shards``
        (from the settings, not from the handles, which are still filling while shards start)."""
        return int(self.memory.capacity) // int(self.config.executor.num_replay_shards)

    def box(self) -> ShardsBox:
        """The current shard handles as workers are told about them: ``(version, handles)``."""
        return self._version, list(self.handles)

    # ------------------------------------------------------------------ life
    def _make(self, index: int, restore: bool):
        """A new shard actor ``index`` (not yet waited for); ``restore``: from its snapshot."""
        settings, cfg = self.config.executor, self.config
        memory = self.memory.model_dump()
        memory["capacity"] = self.capacity()
        generation = self._generation[index]
        return (
            ray.remote(ReplayShard)
            .options(**actor_options(self._name(index), 0))
            .remote(
                memory,
                cfg.train.seed + 7 * index + 1000 * generation + 100 * self.lane,
                index,
                generation,
                self._snapshot_dir(index),
                settings.replay_snapshot_interval,
                None if self.records is None else {k: v.to_json() for k, v in self.records.items()},
                restore,
                cfg.env.allow_nonfinite_obs,
            )
        )

    def start(self, count: int) -> None:
        """Start ``count`` shards (old snapshots in the run folder are removed first), empty or, on
        ``--resume`` with ``save_replay``, with the checkpoint's records (before any worker starts)."""
        shutil.rmtree(self._snapshot_root(), ignore_errors=True)
        self._generation = [0] * count
        self.handles = [self._make(k, restore=False) for k in range(count)]
        wait_ready(self.handles, self.config.executor.placement_timeout_s, "replay shards")
        self._start.update({(k, 0): 0 for k in range(count)})
        self._restore()

    def stop(self) -> None:
        """Stop every shard without waiting; remove the temporary snapshot folder, if any."""
        kill_all(self.handles)
        if self._scratch is not None:
            self._scratch.cleanup()

    def ensure(self, index: int, exc: BaseException | None = None) -> None:
        """Check that shard ``index`` answers (something suggested it died); restart it if not."""
        try:
            ray.get(self.handles[index].ready.remote(), timeout=self.config.executor.placement_timeout_s)
        except WORKER_FAULTS as dead:
            self.restart(index, exc if exc is not None else dead)

    def restart(self, index: int, exc: BaseException) -> None:
        """Replace dead shard ``index`` by one that reloads its last snapshot.

        The records it had received since that snapshot are lost; they count into
        :meth:`lost_on_restart` (exact once every worker has reported its last insert).

        Raises:
            WorkerRestartsExceeded: more shard restarts than ``executor.max_worker_restarts``.
        """
        settings = self.config.executor
        self.restarts += 1
        self.budget.count += 1
        if self.budget.count > settings.max_worker_restarts:
            raise WorkerRestartsExceeded(
                f"replay shard {self._shown(index)} failed ({fault_reason(exc)}); that is shard restart "
                f"{self.budget.count}, more "
                f"than executor.max_worker_restarts = {settings.max_worker_restarts}, so the run stops (the "
                f"learner is checkpointed; resume with --resume)."
            ) from exc
        dead = (index, self._generation[index])
        kill_all([self.handles[index]])
        self._generation[index] += 1
        shard = self._make(index, restore=True)
        wait_ready([shard], settings.placement_timeout_s, "restarted replay shards")
        counts = ray.get(shard.counts.remote())
        self.handles[index] = shard
        self._version += 1
        self._lost.append((dead, counts["inserted"]))
        self._start[(index, self._generation[index])] = counts["inserted"]
        self._on_restart(index)
        print(
            f"rlgraph-ray: replay shard {self._shown(index)} failed ({fault_reason(exc)}); restarted it "
            f"({self.budget.count}/{settings.max_worker_restarts}) from its snapshot ({counts['size']} records); "
            f"the records it received since are lost (replay_lost_on_restart)"
        )

    def _shown(self, index: int) -> str:
        """Shard ``index`` as messages name it (``'1'``, or ``'1 of policy NAME'``)."""
        return str(index) if self.policy is None else f"{index} of policy '{self.policy}'"

    # ------------------------------------------------------------------ counts
    def note_inserts(self, stats: dict[str, Any]) -> int:
        """Fold a worker's insert outcomes into these shards' (acknowledged inserts ``[policy, shard,
        generation, inserts]``; a shard that refused a batch, ``[policy, shard, records]``, is checked
        and restarted if dead); the records that were refused, lost."""
        for policy, k, generation, inserted in stats.get("acks", ()):
            if policy != self.policy:
                continue
            key = (int(k), int(generation))
            self._acked[key] = max(self._acked.get(key, 0), int(inserted))
        refused = 0
        for policy, k, records in stats.get("insert_failed", ()):
            if policy != self.policy:
                continue
            refused += int(records)
            self.ensure(int(k))
        return refused

    def lost_on_restart(self) -> int:
        """Records that restarted shards had received after their last snapshot (inserts since it)."""
        lost = 0
        for key, restored in self._lost:
            received = max(self._start.get(key, 0), self._acked.get(key, 0))
            lost += max(0, received - restored)
        return lost

    def sizes(self) -> list[int]:
        """Records each shard holds (a shard found dead is restarted first)."""
        timeout = self.config.executor.placement_timeout_s
        try:
            return [int(n) for n in ray.get([s.size.remote() for s in self.handles], timeout=timeout)]
        except WORKER_FAULTS:
            sizes = []
            for k in range(len(self.handles)):
                self.ensure(k)
                sizes.append(int(ray.get(self.handles[k].size.remote(), timeout=timeout)))
            return sizes

    # ------------------------------------------------------------------ checkpoints
    def attachments(self) -> Attachments:
        """Every shard's memory state, for a checkpoint (``executor.save_replay``)."""
        return {REPLAY_ATTACHMENT: self.attachment_part()}

    def attachment_part(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """``(arrays, info)`` of these shards in the ``replay`` attachment: arrays ``[NAME/]shard_K/...``,
        info ``{"shards", "capacity", "inserted"}`` (a run of several policies keeps each policy's
        info under ``info["policies"][NAME]``, :func:`replay_attachments`)."""
        timeout = self.config.executor.placement_timeout_s
        states = ray.get([s.state.remote() for s in self.handles], timeout=timeout)
        arrays = {f"{self.prefix}shard_{k}/{key}": v for k, (state, _) in enumerate(states) for key, v in state.items()}
        info = {
            "shards": len(self.handles),
            "capacity": self.capacity(),
            "inserted": [int(meta["inserted"]) for _, meta in states],
        }
        return arrays, info

    def _restore(self) -> None:
        """On ``--resume`` with ``executor.save_replay``: load the checkpoint's replay into the new shards.

        A checkpoint without replay (written with ``save_replay`` off) leaves the shards empty.

        Raises:
            CheckpointError: the attachment is corrupt or was written for other shards (count or
                capacity); nothing was loaded.
        """
        if self.resume_dir is None or not self.handles or not self.config.executor.save_replay:
            return
        count, capacity = len(self.handles), self.capacity()
        shown = f"Checkpoint '{self.resume_dir}' ({REPLAY_ATTACHMENT}.npz)"
        if self.policy is not None:
            shown += f", policy '{self.policy}'"
        per_shard = memory_state_check(capacity, self.records, shown)
        prefix, own = self.prefix, self._own_keys

        def check(headers: Headers) -> None:
            by_shard: dict[int, Headers] = {}
            for key, header in headers.items():
                if not own(key):
                    continue  # another policy's (each policy's shards check their own)
                name = key[len(prefix) :]
                m = _SHARD_KEY.match(name)
                if m is None or int(m.group(1)) >= count:
                    raise CheckpointError(
                        f"{shown}: array '{key}' belongs to no replay shard of this run ({count} shards; "
                        f"executor.num_replay_shards must be what the checkpoint was written with)."
                    )
                by_shard.setdefault(int(m.group(1)), {})[m.group(2)] = header
            for shard_headers in by_shard.values():
                per_shard(shard_headers)

        found = read_attachment(self.resume_dir, REPLAY_ATTACHMENT, check)
        if found is None:
            print(f"rlgraph-ray: {self.resume_dir} holds no replay (executor.save_replay was off); shards start empty")
            return
        info, arrays = found
        if self.policy is not None:
            policies = info.get("policies")
            info = policies.get(self.policy) if isinstance(policies, dict) else None
            if not isinstance(info, dict):
                raise CheckpointError(
                    f"{shown}: the checkpoint holds no replay of policy '{self.policy}' (it holds "
                    f"{sorted(policies) if isinstance(policies, dict) else 'one agent'}'s); resume with the policies "
                    f"it was written with, or set executor.save_replay=false to start with empty shards."
                )
        if info.get("shards") != count or info.get("capacity") != capacity:
            raise CheckpointError(
                f"{shown} holds {info.get('shards')!r} replay shards of {info.get('capacity')!r} records, but this run "
                f"has {count} of {capacity} (executor.num_replay_shards, agent.memory.capacity): resume with the "
                f"settings the checkpoint was written with, or set executor.save_replay=false on the resumed run "
                f"to start with empty shards."
            )
        inserted = info.get("inserted")
        if not isinstance(inserted, list) or len(inserted) != count or not all(isinstance(n, int) for n in inserted):
            raise CheckpointError(f"{shown} records inserts {inserted!r}, not one count per shard; corrupt checkpoint.")
        parts: list[dict] = [{} for _ in range(count)]
        for key, value in arrays.items():
            if not own(key):
                continue
            m = _SHARD_KEY.match(key[len(prefix) :])
            assert m is not None  # checked above
            parts[int(m.group(1))][m.group(2)] = value
        try:
            sizes = ray.get([s.restore.remote(parts[k], inserted[k]) for k, s in enumerate(self.handles)])
        except RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, RLGraphError):
                raise cause from None
            raise
        for k in range(count):
            self._start[(k, 0)] = int(inserted[k])
        self.restored = int(sum(sizes))
        whose = "" if self.policy is None else f" of policy '{self.policy}'"
        print(f"rlgraph-ray: restored {self.restored} replay records into {count} shards{whose} from {self.resume_dir}")

    def _own_keys(self, key: str) -> bool:
        """Whether attachment array ``key`` is one of these shards' (``[NAME/]shard_K/...``)."""
        if self.policy is None:
            return True
        return key.startswith(self.prefix)


def replay_attachments(sets: list[ReplayShards]) -> Attachments:
    """The checkpoint's ``replay`` attachment of a run's shard sets: one set's as it is; several
    policies' arrays side by side (``NAME/shard_K/...``), their infos under ``info["policies"][NAME]``."""
    if len(sets) == 1 and sets[0].policy is None:
        return sets[0].attachments()
    arrays: dict[str, np.ndarray] = {}
    infos: dict[str, Any] = {}
    for shards in sets:
        own, info = shards.attachment_part()
        arrays.update(own)
        infos[str(shards.policy)] = info
    return {REPLAY_ATTACHMENT: (arrays, {"policies": infos})}
