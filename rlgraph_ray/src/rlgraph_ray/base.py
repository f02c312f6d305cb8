"""What the Ray executors share: the learner, the recorder, Ray set-up, workers and their restarts.

``ray_apex``'s replay shards have a module of their own (:mod:`rlgraph_ray.apex_shards`).
"""

from __future__ import annotations

import contextlib
import time
import zipfile
from pathlib import Path
from typing import Any, Callable

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from rlgraph_core.agents.base import VersionedWeights
from rlgraph_core.checkpoint import read_meta, resolve_checkpoint
from rlgraph_core.errors import CheckpointError, ConfigError, PluginError
from rlgraph_core.execution.base import Executor
from rlgraph_core.execution.recorder import RunRecorder
from rlgraph_core.execution.stopping import StopRequest
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

SPACES = ("observation_space", "action_space")


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


def fault_reason(exc: BaseException) -> str:
    """``'<type>: <first line of its message>'`` of a worker's or shard's fault, for a restart line."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


class RayExecutor(Executor):
    """Base of the Ray executors: builds the learner on the driver, connects to Ray, starts the
    actors, runs the executor's loop under a :class:`~rlgraph_core.execution.recorder.RunRecorder`
    and stops every actor however the run ends.

    Subclasses implement :meth:`_learner_envs`, :meth:`_start_actors`, :meth:`_make_worker` and
    :meth:`_loop`; an executor with actors of its own besides the workers (``ray_apex``'s replay
    shards) names them in :meth:`shard_names`, stops them in :meth:`_stop_actors` and may give the
    recorder more to checkpoint in :meth:`_configure_recorder`.
    """

    #: ``train.record_dataset``'s writer on the driver (set by :meth:`run`; None: the run records nothing)
    writer = None

    def run(self) -> dict:
        cfg, settings, parts = self.config, self.config.executor, self.assembly
        self._check_worker_backend()
        self._refuse_agent_replay()
        eval_env = parts.make_eval_env()
        try:
            # a multi-agent run's evaluation env is a vector env of one copy: its rows' spaces
            spaces = [getattr(eval_env, f"single_{k}", None) or getattr(eval_env, k) for k in SPACES]
            self.learner = parts.make_agent(*spaces, num_envs=self._learner_envs(), with_memory=False)
            self.writer = self._dataset_writer(*spaces)  # checked before Ray starts; writes nothing yet
            recorder = RunRecorder(
                cfg, self.out_dir, assembly=parts, agent=self.learner, resume_dir=self.resume_dir, eval_env=eval_env
            )
        except BaseException:
            eval_env.close()
            raise
        self.tag = run_tag()
        self.workers: list = []
        self.restarts = 0
        self.samples_lost = 0
        self._worker_steps = np.zeros(settings.num_workers)
        self._worker_seconds = np.zeros(settings.num_workers)
        self._generation = [0] * settings.num_workers
        self._published_version: int | None = None
        self._worker_versions: list[int | None] = [None] * settings.num_workers
        self._resumed_at = self.learner.timesteps
        with contextlib.ExitStack() as stack:
            if self.writer is not None:
                stack.callback(self.writer.close)  # last: after the actors stopped, however the run ends
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
                stack.callback(self._stop_actors)
                if starting.reason is None:
                    try:
                        self._start_actors()
                    except BaseException:
                        eval_env.close()
                        raise
            recorder.summary_extra = self._totals
            if session.get("snapshot") is not None:
                recorder.snapshot_path = Path(session["snapshot"])
            self._configure_recorder(recorder)
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

    def shard_names(self) -> list[str]:
        """The Ray actor names of the run's replay shards (none for executors without them)."""
        return []

    def _stop_actors(self) -> None:
        """Stop the run's actors without waiting (however the run ends)."""
        kill_all(self.workers)

    def _configure_recorder(self, recorder: RunRecorder) -> None:
        """Give the recorder what this executor adds (e.g. checkpoint attachments), once the actors started."""

    # ------------------------------------------------------------------ recording a dataset
    def _dataset_writer(self, observation_space, action_space):
        """``train.record_dataset``'s writer (None when the run records nothing), fed on the driver
        with every worker's env steps; its path and the Minari extra are checked here, before Ray starts."""
        path = self.config.train.record_dataset
        if path is None:
            return None
        from rlgraph_core.datasets import DatasetWriter

        return DatasetWriter(
            path,
            observation_space,
            action_space,
            env_section=self.config.env.model_dump(mode="json", include={"id", "kwargs", "wrappers"}),
            algorithm=self.config.agent.type,
            append=self.resume_dir is not None,
        )

    def _record(self, index: int, steps) -> None:
        """Record worker ``index``'s vector steps (in the order it took them) in its own columns of
        the dataset writer, so each of its envs' episodes is written whole."""
        if self.writer is None:
            return
        first = index * self.config.executor.workers_envs(self.config.env)
        for step in steps:
            self.writer.add(step, first_column=first)

    def _record_restart(self, index: int) -> None:
        """Worker ``index`` was restarted with new envs: its episodes in progress end (truncated) at
        the last step the driver received of them."""
        if self.writer is None:
            return
        envs = self.config.executor.workers_envs(self.config.env)
        self.writer.cut(range(index * envs, (index + 1) * envs))

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
                # the agent's memory, or each policy's (NAME/memory/data/...)
                names = [n for n in zf.namelist() if n.startswith("memory/data/") or "/memory/data/" in n]
                records = max((_leading_dim(zf, n) for n in names), default=0)
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
        reason = fault_reason(exc)
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
        return totals

    @staticmethod
    def _get(ref, timeout: float | None = None):
        """``ray.get`` with an optional timeout (for worker calls that may hang)."""
        return ray.get(ref, timeout=timeout)
