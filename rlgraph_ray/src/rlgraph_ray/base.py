"""What the Ray executors share: the learner, the recorder, Ray set-up, workers and their restarts."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from rlgraph_core.agents.base import VersionedWeights
from rlgraph_core.errors import ConfigError, PluginError
from rlgraph_core.execution.base import Executor
from rlgraph_core.execution.recorder import RunRecorder
from rlgraph_ray.cluster import actor_options, check_cpus, kill_all, ray_session, run_tag, wait_ready

#: What a dead or broken worker raises on the driver: killed (RayActorError), its env or agent
#: raised (RayTaskError), or it did not answer in time (GetTimeoutError).
WORKER_FAULTS = (RayActorError, RayTaskError, GetTimeoutError)


class WorkerRestartsExceeded(RuntimeError):
    """More workers died than ``executor.max_worker_restarts`` allows; the run stops."""


class RayExecutor(Executor):
    """Base of the Ray executors: builds the learner on the driver, connects to Ray, starts the
    actors, runs the executor's loop under a :class:`~rlgraph_core.execution.recorder.RunRecorder`
    and stops every actor however the run ends.

    Subclasses implement :meth:`_learner_envs`, :meth:`_start_actors`, :meth:`_make_worker` and
    :meth:`_loop`.
    """

    def run(self) -> dict:
        cfg, settings, parts = self.config, self.config.executor, self.assembly
        self._check_worker_backend()
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
        self._worker_steps = np.zeros(settings.num_workers)
        self._worker_seconds = np.zeros(settings.num_workers)
        self._generation = [0] * settings.num_workers
        self._published_version: int | None = None
        self._worker_versions: list[int | None] = [None] * settings.num_workers
        with ray_session(settings.address) as session:
            self.session = session
            try:
                try:
                    self._start_actors()
                except BaseException:
                    eval_env.close()
                    raise
                recorder.summary_extra = self._totals
                info = {
                    "ray": {
                        "tag": self.tag,
                        "workers": self.worker_names(),
                        "where": session["where"],
                        "gcs_address": session.get("gcs_address"),
                        "own_cluster": session.get("own_cluster"),
                        "worker_backend": self._worker_train("backend"),
                        "worker_mode": self._worker_train("mode"),
                    }
                }
                return recorder.run(self._loop, run_info=info)
            finally:
                kill_all(self.workers + self.shards)

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

    def _worker_config(self) -> dict:
        """The run config a worker assembles: the driver's, with the worker backend and mode applied.

        Weights travel as backend-neutral numpy, so a worker may build another backend than the learner.
        """
        raw = self.config.to_dict()
        raw["train"]["backend"] = self._worker_train("backend")
        raw["train"]["mode"] = self._worker_train("mode")
        return raw

    def worker_names(self) -> list[str]:
        """The Ray actor names of the current workers (``ray.get_actor(name)`` finds one)."""
        return [self._worker_name(i) for i in range(self.config.executor.num_workers)]

    def _worker_name(self, index: int) -> str:
        return f"rlgraph-{self.tag}-worker-{index}-{self._generation[index]}"

    def _worker_seed(self, index: int) -> int:
        return self.config.train.seed + 1000 * (index + 1) + 100_000 * self._generation[index]

    def _worker_options(self, index: int) -> dict:
        return actor_options(self._worker_name(index), self.config.executor.num_cpus_per_worker)

    def _start_workers(self) -> None:
        settings = self.config.executor
        check_cpus(settings.num_workers * settings.num_cpus_per_worker, f"{settings.num_workers} workers")
        self.workers = [self._make_worker(i, self._worker_seed(i)) for i in range(settings.num_workers)]
        wait_ready(self.workers, settings.placement_timeout_s, "workers")

    def _restart_worker(self, index: int, exc: BaseException, lost_samples: int) -> None:
        """Replace a dead (or broken) worker, counting the restart and the samples it lost.

        Raises:
            WorkerRestartsExceeded: past ``executor.max_worker_restarts``.
        """
        settings = self.config.executor
        self.restarts += 1
        self.samples_lost += int(lost_samples)
        reason = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
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
        wait_ready([self.workers[index]], settings.placement_timeout_s, "restarted workers")

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
        recorder.add_episode_returns(stats["episode_returns"])

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
        return {
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

    @staticmethod
    def _get(ref, timeout: float | None = None):
        """``ray.get`` with an optional timeout (for worker calls that may hang)."""
        return ray.get(ref, timeout=timeout)
