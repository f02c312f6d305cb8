"""What the Ray executors share: the learner, the recorder, Ray set-up, workers and their restarts."""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any, Callable

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from rlgraph_core.agents.base import VersionedWeights
from rlgraph_core.checkpoint import Attachments, Headers, read_attachment, read_meta, resolve_checkpoint
from rlgraph_core.errors import CheckpointError, ConfigError, PluginError, RLGraphError
from rlgraph_core.execution.base import Executor
from rlgraph_core.execution.recorder import RunRecorder
from rlgraph_core.execution.stopping import StopRequest
from rlgraph_core.memories.snapshot import memory_state_check
from rlgraph_ray.cluster import (
    RayPlacementError,
    RayProcessDied,
    actor_options,
    check_cpus,
    kill_all,
    ray_process_death,
    ray_session,
    run_tag,
    wait_ready,
)

#: What a dead or broken worker raises on the driver: killed (RayActorError), its env or agent
#: raised (RayTaskError), or it did not answer in time (GetTimeoutError).
WORKER_FAULTS = (RayActorError, RayTaskError, GetTimeoutError)


#: The checkpoint attachment that holds the replay shards' contents (``executor.save_replay``).
REPLAY_ATTACHMENT = "replay"

#: Where a run folder keeps its replay shards' snapshots (``replay_snapshots/shard-<k>``).
SNAPSHOT_DIR = "replay_snapshots"

_SHARD_KEY = re.compile(r"^shard_(\d+)/(.+)$")


class WorkerRestartsExceeded(RuntimeError):
    """More workers (or replay shards) died than ``executor.max_worker_restarts`` allows; the run stops."""


def _stopped_at_start(reason: str) -> Callable[[RunRecorder, StopRequest], None]:
    """A run loop that stops at once for ``reason`` (a signal that arrived while Ray was starting)."""

    def loop(recorder: RunRecorder, stop: StopRequest) -> None:
        stop.request(reason)

    return loop


def _naming_ray_deaths(
    loop: Callable[[RunRecorder, StopRequest], None], session: dict
) -> Callable[[RunRecorder, StopRequest], None]:
    """``loop``, whose error, if one of Ray's own processes died first, says so (:class:`RayProcessDied`).

    Ray does not always end a driver whose raylet is gone at once: it may live on until actors
    can no longer be placed and fail with an error of its own (e.g. ``RayPlacementError`` on a
    cluster of 0 CPUs), which would not say what died.
    """

    def named(recorder: RunRecorder, stop: StopRequest) -> None:
        try:
            loop(recorder, stop)
        except Exception as exc:
            died = ray_process_death(session)
            if died is None:
                raise
            raise RayProcessDied(
                f"Ray's {died[0]} (pid {died[1]}) of this run's private Ray session died, and the run could not go on "
                f"without it ({type(exc).__name__}: {exc})"
            ) from exc

    return named


def _leading_dim(zf: zipfile.ZipFile, member: str) -> int:
    """The first dimension of ``.npy`` member ``member`` of an open npz, from its header only."""
    from numpy.lib import format as npy_format

    with zf.open(member) as f:
        version = npy_format.read_magic(f)
        read = npy_format.read_array_header_1_0 if version == (1, 0) else npy_format.read_array_header_2_0
        shape = read(f)[0]
    return int(shape[0]) if shape else 0


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


class RayExecutor(Executor):
    """Base of the Ray executors: builds the learner on the driver, connects to Ray, starts the
    actors, runs the executor's loop under a :class:`~rlgraph_core.execution.recorder.RunRecorder`
    and stops every actor however the run ends.

    Subclasses implement :meth:`_learner_envs`, :meth:`_start_actors`, :meth:`_make_worker` and
    :meth:`_loop`; executors with replay shards also :meth:`_make_shard`.

    Replay shards (``self.shards``), where an executor has them, get the same care here whatever
    the executor: a dead shard is replaced by one that reloads its last snapshot
    (:meth:`_restart_shard`; what it had received since is counted in ``replay_lost_on_restart``),
    with ``executor.save_replay`` their contents go into every periodic and final checkpoint (the
    attachment ``replay``), and ``--resume`` loads them back into the new shards.
    """

    def run(self) -> dict:
        cfg, settings, parts = self.config, self.config.executor, self.assembly
        self._check_worker_backend()
        self._refuse_agent_replay()
        eval_env = parts.make_eval_env()
        try:
            self.learner = parts.make_agent(
                eval_env.observation_space, eval_env.action_space, num_envs=self._learner_envs(), with_memory=False
            )
            recorder = RunRecorder(
                cfg, self.out_dir, assembly=parts, agent=self.learner, resume_dir=self.resume_dir, eval_env=eval_env
            )
        except BaseException:
            eval_env.close()
            raise
        self.tag = run_tag()
        self.workers: list = []
        self.shards: list = []
        self.restarts = 0
        self.samples_lost = 0
        self.shard_restarts = 0
        self.replay_restored: int | None = None  # records loaded into the shards on resume
        self._shard_generation: list[int] = []
        self._shards_version = 0
        self._shard_start: dict[tuple[int, int], int] = {}  # (shard, generation) -> its inserts at start
        self._shard_acked: dict[tuple[int, int], int] = {}  # (shard, generation) -> inserts acknowledged
        self._shard_lost: list[tuple[tuple[int, int], int]] = []  # dead (shard, generation), inserts restored
        self._worker_steps = np.zeros(settings.num_workers)
        self._worker_seconds = np.zeros(settings.num_workers)
        self._generation = [0] * settings.num_workers
        self._published_version: int | None = None
        self._worker_versions: list[int | None] = [None] * settings.num_workers
        self._resumed_at = self.learner.timesteps
        with contextlib.ExitStack() as stack:
            if self.out_dir is None:  # no run folder (the Python API's default): shard snapshots in a temp one
                self._replay_scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rlgraph-replay-")))
            # A Ctrl-C or SIGTERM while Ray and the actors start is held until they have started (a
            # second Ctrl-C aborts at once); the run then stops as it would at its first step.
            with StopRequest() as starting:
                session = stack.enter_context(
                    ray_session(
                        settings.address,
                        connect_timeout_s=settings.connect_timeout_s,
                        run_dir=None if self.out_dir is None else str(Path(self.out_dir).resolve()),
                    )
                )
                self.session = session
                stack.callback(lambda: kill_all(self.workers + self.shards))
                if starting.reason is None:
                    try:
                        self._start_actors()
                    except BaseException:
                        eval_env.close()
                        raise
            recorder.summary_extra = self._totals
            if session.get("snapshot") is not None:
                recorder.snapshot_path = Path(session["snapshot"])
            if self.shards and getattr(settings, "save_replay", False):
                recorder.checkpoint_attachments = self._replay_attachments
            info = {
                "ray": {
                    "tag": self.tag,
                    "workers": self.worker_names(),
                    "shards": self.shard_names(),
                    "where": session["where"],
                    "gcs_address": session.get("gcs_address"),
                    "own_cluster": session.get("own_cluster"),
                    "worker_backend": self._worker_train("backend"),
                    "worker_mode": self._worker_train("mode"),
                }
            }
            loop = _naming_ray_deaths(self._loop, session)
            if starting.reason is not None:
                print(
                    f"rlgraph-ray: {starting.reason.upper()} while Ray and the run's actors were starting; nothing "
                    f"was trained, so the run stops now (final checkpoint and summary.json, as for any stop)."
                )
                loop = _stopped_at_start(starting.reason)
            return recorder.run(loop, run_info=info)

    # ------------------------------------------------------------------ subclass parts
    def _learner_envs(self) -> int:
        """``num_envs`` of the learner agent."""
        return 1

    def _start_actors(self) -> None:
        """Create and wait for the run's actors (workers, shards)."""
        raise NotImplementedError

    def _make_worker(self, index: int, seed: int):
        """A new worker actor ``index`` (not yet waited for)."""
        raise NotImplementedError

    def _loop(self, recorder: RunRecorder, stop) -> None:
        """Train until ``recorder.done(stop)``."""
        raise NotImplementedError

    def _make_shard(self, index: int, restore: bool):
        """A new replay shard actor ``index`` (not yet waited for); ``restore``: from its snapshot."""
        raise NotImplementedError

    def _shard_restarted(self, index: int) -> None:
        """Forget what the loop holds of shard ``index``'s dead predecessor (requests, batches)."""

    # ------------------------------------------------------------------ workers
    def _worker_train(self, field: str) -> str:
        """``train.backend`` / ``train.mode`` of the workers (``executor.worker_backend`` / ``worker_mode``)."""
        override = getattr(self.config.executor, f"worker_{field}", None)
        return override if override is not None else getattr(self.config.train, field)

    def _check_worker_backend(self) -> None:
        """``executor.worker_backend`` must name a backend registered here; fail before Ray starts."""
        name = self.config.executor.worker_backend
        if name is None:
            return
        try:
            self.assembly.plugin_manager.get("backends", name, field="executor.worker_backend")
        except PluginError as exc:
            raise ConfigError(
                f"{exc} executor.worker_backend names the backend the Ray workers build (the learner keeps "
                f"train.backend '{self.config.train.backend}'); it must be installed where the driver runs too."
            ) from None

    def _refuse_agent_replay(self) -> None:
        """Refuse to resume a checkpoint that holds the agent's own replay memory (a local run's).

        The learner of a Ray executor has no replay memory (Ape-X keeps replay in its shards), so
        such a checkpoint cannot be resumed here without dropping its replay; that is refused before
        Ray starts, in one paragraph, instead of the loader's complaint about the learner's capacity.
        Only the member names of ``state.npz`` are read.
        """
        if self.resume_dir is None:
            return
        try:
            with zipfile.ZipFile(resolve_checkpoint(self.resume_dir) / "state.npz") as zf:
                records = max((_leading_dim(zf, n) for n in zf.namelist() if n.startswith("memory/data/")), default=0)
        except (OSError, ValueError, zipfile.BadZipFile, CheckpointError):
            return  # a missing or corrupt checkpoint is reported by the load, naming the file
        if records <= 1:  # a Ray learner's own placeholder memory (capacity 1), or nothing stored
            return
        try:
            written_by = read_meta(self.resume_dir)[1]["train"]["executor"]
        except (CheckpointError, KeyError, TypeError):
            written_by = "another"
        raise CheckpointError(
            f"Checkpoint '{self.resume_dir}' was written by the '{written_by}' executor and holds the agent's own "
            f"replay memory ({records} records); executor '{self.config.train.executor}' cannot resume it: its "
            f"learner has no replay "
            f"memory (ray_apex keeps replay in executor.num_replay_shards shards) and an agent's replay is not "
            f"split into shards. Resume it with --executor {written_by}, or start a new "
            f"'{self.config.train.executor}' run (a ray_apex checkpoint written with executor.save_replay=true "
            f"resumes with its shards' replay)."
        )

    def _worker_config(self) -> dict:
        """The run config a worker assembles: the driver's, with the worker backend and mode applied.

        Weights travel as backend-neutral numpy, so a worker may build another backend than the learner.
        """
        raw = self.config.to_dict()
        raw["train"]["backend"] = self._worker_train("backend")
        raw["train"]["mode"] = self._worker_train("mode")
        if raw["train"]["backend"] != self.config.train.backend:
            raw.pop("backend", None)  # the learner backend's settings; the workers' backend keeps its defaults
        return raw

    def worker_names(self) -> list[str]:
        """The Ray actor names of the current workers (``ray.get_actor(name)`` finds one)."""
        return [self._worker_name(i) for i in range(self.config.executor.num_workers)]

    def _worker_name(self, index: int) -> str:
        return f"rlgraph-{self.tag}-worker-{index}-{self._generation[index]}"

    def _worker_seed(self, index: int) -> int:
        # Worker 0 gets train.seed, as the local executor's envs and agent do: ray_sync with one
        # worker then learns exactly as the local executor (the same env stream, action samples and
        # updates). A resumed run's workers do not replay the episodes the run started with, and a
        # restarted worker does not replay its predecessor's.
        resumed_at = getattr(self, "_resumed_at", 0)
        return self.config.train.seed + 1000 * index + 100_000 * self._generation[index] + resumed_at

    def _worker_options(self, index: int) -> dict:
        return actor_options(self._worker_name(index), self.config.executor.num_cpus_per_worker)

    def _spawn_worker(self, actor_class: type, index: int, seed: int, *extra):
        """Start worker actor ``index`` of ``actor_class`` (not yet waited for): every worker gets the
        worker config, its index and seed and its number of envs, then the executor's ``extra``."""
        envs = self.config.executor.workers_envs(self.config.env)
        return (
            ray.remote(actor_class)
            .options(**self._worker_options(index))
            .remote(self._worker_config(), index, seed, envs, *extra)
        )

    def _start_workers(self) -> None:
        settings = self.config.executor
        check_cpus(settings.num_workers * settings.num_cpus_per_worker, f"{settings.num_workers} workers")
        self.workers = [self._make_worker(i, self._worker_seed(i)) for i in range(settings.num_workers)]
        wait_ready(self.workers, settings.placement_timeout_s, "workers")

    def _restart_worker(self, index: int, exc: BaseException, lost_samples: int, wait: bool = True):
        """Replace a dead (or broken) worker, counting the restart and the samples it lost.

        With ``wait`` the replacement is awaited here (placement and build, up to
        ``executor.placement_timeout_s``); without it its ``ready()`` reference is returned and the
        caller goes on (``ray_apex`` learns meanwhile) and checks it with :meth:`_worker_started`.

        Raises:
            WorkerRestartsExceeded: past ``executor.max_worker_restarts``.
        """
        settings = self.config.executor
        self.restarts += 1
        self.samples_lost += int(lost_samples)
        reason = _reason(exc)
        if self.restarts > settings.max_worker_restarts:
            raise WorkerRestartsExceeded(
                f"worker {index} failed ({reason}); that is restart {self.restarts}, more than "
                f"executor.max_worker_restarts = {settings.max_worker_restarts}, so the run stops (the learner is "
                f"checkpointed; resume with --resume)."
            ) from exc
        print(
            f"rlgraph-ray: worker {index} failed ({reason}); restarting it "
            f"({self.restarts}/{settings.max_worker_restarts}), {lost_samples} samples dropped"
        )
        kill_all([self.workers[index]])
        self._generation[index] += 1
        self.workers[index] = self._make_worker(index, self._worker_seed(index))
        if not wait:
            return self.workers[index].ready.remote()
        wait_ready([self.workers[index]], settings.placement_timeout_s, "restarted workers")
        return None

    def _worker_started(self, index: int, ref, since: float) -> bool | None:
        """Whether replacement worker ``index`` (its ``ready()`` reference ``ref``, asked for at
        ``since``, ``time.monotonic()``) is built: True, False while it is still starting, None when
        it died while being built (a restart like any other: the caller restarts it again).

        Raises:
            RayPlacementError: not built within ``executor.placement_timeout_s``.
        """
        done, _ = ray.wait([ref], timeout=0)
        if not done:
            timeout = self.config.executor.placement_timeout_s
            if time.monotonic() - since > timeout:
                kill_all([self.workers[index]])
                raise RayPlacementError(
                    f"restarted worker {index} was not placed and built within executor.placement_timeout_s = "
                    f"{timeout:g} s (the cluster has {ray.available_resources().get('CPU', 0):g} CPUs free)."
                )
            return False
        try:
            ray.get(ref)
        except WORKER_FAULTS:
            return None
        return True

    # ------------------------------------------------------------------ replay shards
    def shard_names(self) -> list[str]:
        """The Ray actor names of the current replay shards (none for executors without them)."""
        return [self._shard_name(k) for k in range(len(self._shard_generation))]

    def _shard_name(self, index: int) -> str:
        return f"rlgraph-{self.tag}-shard-{index}-{self._shard_generation[index]}"

    def _snapshot_dir(self, index: int) -> str:
        """The snapshot folder of shard ``index`` (absolute: shard processes may run elsewhere).

        The run folder is resolved, never the snapshot path itself: that is a link to the newest
        version, and a restarted shard given the version folder would write its snapshots beside
        it, where the next restart does not look (issue 19).
        """
        return str(self._snapshot_root() / f"shard-{index}")

    def _snapshot_root(self) -> Path:
        """Where the shards' snapshots live: the run folder's ``replay_snapshots``, or, for a run
        without an output folder, a temporary folder removed when the run ends."""
        if self.out_dir is None:
            return self._replay_scratch
        return Path(self.out_dir).resolve() / SNAPSHOT_DIR

    def _start_shards(self, count: int) -> None:
        """Start ``count`` shards (old snapshots in the run folder are removed first), empty or, on
        ``--resume`` with ``save_replay``, with the checkpoint's records (before any worker starts)."""
        shutil.rmtree(self._snapshot_root(), ignore_errors=True)
        self._shard_generation = [0] * count
        self.shards = [self._make_shard(k, restore=False) for k in range(count)]
        wait_ready(self.shards, self.config.executor.placement_timeout_s, "replay shards")
        self._shard_start.update({(k, 0): 0 for k in range(count)})
        self._restore_replay()

    def _shards_box(self) -> tuple[int, list]:
        """The current shard handles as workers are told about them: ``(version, handles)``."""
        return self._shards_version, list(self.shards)

    def _ensure_shard(self, index: int, exc: BaseException | None = None) -> None:
        """Check that shard ``index`` answers (something suggested it died); restart it if not."""
        try:
            ray.get(self.shards[index].ready.remote(), timeout=self.config.executor.placement_timeout_s)
        except WORKER_FAULTS as dead:
            self._restart_shard(index, exc if exc is not None else dead)

    def _restart_shard(self, index: int, exc: BaseException) -> None:
        """Replace dead shard ``index`` by one that reloads its last snapshot.

        The records it had received since that snapshot are lost; they count into
        :meth:`replay_lost_on_restart` (exact once every worker has reported its last insert).

        Raises:
            WorkerRestartsExceeded: more shard restarts than ``executor.max_worker_restarts``.
        """
        settings = self.config.executor
        self.shard_restarts += 1
        if self.shard_restarts > settings.max_worker_restarts:
            raise WorkerRestartsExceeded(
                f"replay shard {index} failed ({_reason(exc)}); that is shard restart {self.shard_restarts}, more "
                f"than executor.max_worker_restarts = {settings.max_worker_restarts}, so the run stops (the "
                f"learner is checkpointed; resume with --resume)."
            ) from exc
        dead = (index, self._shard_generation[index])
        kill_all([self.shards[index]])
        self._shard_generation[index] += 1
        shard = self._make_shard(index, restore=True)
        wait_ready([shard], settings.placement_timeout_s, "restarted replay shards")
        counts = ray.get(shard.counts.remote())
        self.shards[index] = shard
        self._shards_version += 1
        self._shard_lost.append((dead, counts["inserted"]))
        self._shard_start[(index, self._shard_generation[index])] = counts["inserted"]
        self._shard_restarted(index)
        print(
            f"rlgraph-ray: replay shard {index} failed ({_reason(exc)}); restarted it "
            f"({self.shard_restarts}/{settings.max_worker_restarts}) from its snapshot ({counts['size']} records); "
            f"the records it received since are lost (replay_lost_on_restart)"
        )

    def _note_inserts(self, stats: dict[str, Any]) -> None:
        """Fold a worker's insert outcomes in: acknowledged inserts, and records a dead shard refused."""
        for k, generation, inserted in stats.get("acks", ()):
            key = (int(k), int(generation))
            self._shard_acked[key] = max(self._shard_acked.get(key, 0), int(inserted))
        for k, records in stats.get("insert_failed", ()):
            self.samples_lost += int(records)
            self._ensure_shard(int(k))

    def replay_lost_on_restart(self) -> int:
        """Records that restarted shards had received after their last snapshot (inserts since it)."""
        lost = 0
        for key, restored in self._shard_lost:
            received = max(self._shard_start.get(key, 0), self._shard_acked.get(key, 0))
            lost += max(0, received - restored)
        return lost

    def _shard_sizes(self) -> list[int]:
        """Records each shard holds (a shard found dead is restarted first)."""
        timeout = self.config.executor.placement_timeout_s
        try:
            return [int(n) for n in ray.get([s.size.remote() for s in self.shards], timeout=timeout)]
        except WORKER_FAULTS:
            sizes = []
            for k in range(len(self.shards)):
                self._ensure_shard(k)
                sizes.append(int(ray.get(self.shards[k].size.remote(), timeout=timeout)))
            return sizes

    def _shard_capacity(self) -> int:
        """Records one shard holds at most: ``agent.memory.capacity / executor.num_replay_shards``
        (from the settings, not from ``self.shards``, which is still filling while shards start)."""
        shards = int(getattr(self.config.executor, "num_replay_shards", 1) or 1)
        return int(self.config.agent.memory.capacity) // shards

    def _shard_record_spaces(self) -> dict | None:
        """``{field: Space}`` of one record as shards store it (the learner's, plus ``policy_version``)."""
        from rlgraph_core.spaces import IntBox

        records = self.learner.replay_record_spaces()
        if records is None:
            return None
        return {**records, "policy_version": IntBox(0, np.iinfo(np.int64).max, shape=())}

    def _replay_attachments(self) -> Attachments:
        """Every shard's memory state, for a checkpoint (``executor.save_replay``)."""
        timeout = self.config.executor.placement_timeout_s
        states = ray.get([s.state.remote() for s in self.shards], timeout=timeout)
        arrays = {f"shard_{k}/{key}": v for k, (state, _) in enumerate(states) for key, v in state.items()}
        info = {
            "shards": len(self.shards),
            "capacity": self._shard_capacity(),
            "inserted": [int(meta["inserted"]) for _, meta in states],
        }
        return {REPLAY_ATTACHMENT: (arrays, info)}

    def _restore_replay(self) -> None:
        """On ``--resume`` with ``executor.save_replay``: load the checkpoint's replay into the new shards.

        A checkpoint without replay (written with ``save_replay`` off) leaves the shards empty.

        Raises:
            CheckpointError: the attachment is corrupt or was written for other shards (count or
                capacity); nothing was loaded.
        """
        if self.resume_dir is None or not self.shards or not getattr(self.config.executor, "save_replay", False):
            return
        count, capacity = len(self.shards), self._shard_capacity()
        records = self._shard_record_spaces()
        shown = f"Checkpoint '{self.resume_dir}' ({REPLAY_ATTACHMENT}.npz)"
        per_shard = memory_state_check(capacity, records, shown)

        def check(headers: Headers) -> None:
            by_shard: dict[int, Headers] = {}
            for name, header in headers.items():
                m = _SHARD_KEY.match(name)
                if m is None or int(m.group(1)) >= count:
                    raise CheckpointError(
                        f"{shown}: array '{name}' belongs to no replay shard of this run ({count} shards; "
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
        for name, value in arrays.items():
            m = _SHARD_KEY.match(name)
            assert m is not None  # checked above
            parts[int(m.group(1))][m.group(2)] = value
        try:
            sizes = ray.get([s.restore.remote(parts[k], inserted[k]) for k, s in enumerate(self.shards)])
        except RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, RLGraphError):
                raise cause from None
            raise
        for k in range(count):
            self._shard_start[(k, 0)] = int(inserted[k])
        self.replay_restored = int(sum(sizes))
        print(f"rlgraph-ray: restored {self.replay_restored} replay records into {count} shards from {self.resume_dir}")

    def _weights_box(self) -> tuple[int, list]:
        """The learner's newest weights in the object store, as workers are told about them."""
        weights: VersionedWeights = self.learner.get_versioned_weights()
        self._published_version = weights.version
        return weights.version, [ray.put(weights)]

    def _note_worker(self, stats: dict[str, Any], recorder: RunRecorder) -> None:
        """Fold one worker's stats (steps, seconds, finished episodes) into the run's."""
        i = stats["worker"]
        self._worker_steps[i] += stats["steps"]
        self._worker_seconds[i] += stats["seconds"]
        self._worker_versions[i] = int(stats["version"])
        recorder.add_episodes(stats["episode_returns"], stats.get("episode_lengths"))

    def _distributed_metrics(self, more: Callable[[], dict] | None = None) -> Callable[[], dict]:
        """The executor's extra metrics for a row: per-worker samples/s and weights version (of its
        latest batch), the newest published weights version, restarts, samples lost."""

        def metrics() -> dict:
            row: dict[str, Any] = {
                "worker_restarts": self.restarts,
                "samples_lost": self.samples_lost,
                "weights_version_published": self._published_version,
            }
            if self.shards:
                row.update(shard_restarts=self.shard_restarts, replay_lost_on_restart=self.replay_lost_on_restart())
            for i, (steps, secs) in enumerate(zip(self._worker_steps, self._worker_seconds)):
                row[f"worker_{i}_samples_per_s"] = float(steps / secs) if secs > 0 else None
                row[f"worker_{i}_weights_version"] = self._worker_versions[i]
            self._worker_steps[:] = 0
            self._worker_seconds[:] = 0
            row.update(more() if more is not None else {})
            return row

        return metrics

    def _totals(self) -> dict:
        """What ``summary.json`` adds for a Ray run."""
        totals = {
            "executor": self.config.train.executor,
            "num_workers": self.config.executor.num_workers,
            "worker_restarts": self.restarts,
            "samples_lost": self.samples_lost,
            "ray": getattr(self, "session", {}).get("where"),
            "ray_gcs_address": getattr(self, "session", {}).get("gcs_address"),
            "ray_own_cluster": getattr(self, "session", {}).get("own_cluster"),
            "worker_backend": self._worker_train("backend"),
            "weights_version_published": getattr(self, "_published_version", None),
            "worker_weights_versions": list(getattr(self, "_worker_versions", [])),
        }
        if self.shards:
            totals.update(
                shard_restarts=self.shard_restarts,
                replay_lost_on_restart=self.replay_lost_on_restart(),
                replay_restored=self.replay_restored,
            )
        return totals

    @staticmethod
    def _get(ref, timeout: float | None = None):
        """``ray.get`` with an optional timeout (for worker calls that may hang)."""
        return ray.get(ref, timeout=timeout)
