"""``ray_impala``: asynchronous actor-learner with V-trace (IMPALA, Espeholt et al. 2018)."""

from __future__ import annotations

import time
from collections import Counter, deque
from typing import Any

import numpy as np
import ray
from ray.exceptions import ObjectLostError

from rlgraph_core.memories.obs import concat
from rlgraph_core.execution.recorder import RunRecorder
from rlgraph_ray.actors import SyncWorker, WeightsBox
from rlgraph_ray.base import WORKER_FAULTS, RayExecutor

#: Fields of an actor's rollout the V-trace learner recomputes itself (with its own weights), so
#: they never travel: the actor's values and bootstrap values, and GAE if the agent adds it.
ACTOR_ONLY_KEYS = ("values", "next_values", "advantages", "returns")

#: A fragment request that failed: the worker's faults, or its result lost with its node.
FRAGMENT_FAULTS = (*WORKER_FAULTS, ObjectLostError)


class ImpalaWorker(SyncWorker):
    """``ray_impala`` worker: one fragment of ``agent.n_steps`` (= ``executor.fragment_length``)
    steps per env per call, collected with the newest weights it was told about and tagged with
    their version (``policy_version``) next to the behaviour log-probabilities (``log_probs``)."""

    def sample(self, box: WeightsBox | None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Collect one fragment; ``(fragment without the actor-only fields, stats)``."""
        batch, stats = super().sample(box)
        return {k: v for k, v in batch.items() if k not in ACTOR_ONLY_KEYS}, stats


class RayImpalaExecutor(RayExecutor):
    """N workers collect fragments asynchronously; the learner (this process) learns from them
    with V-trace as they arrive.

    * Each worker steps its own vector env for ``fragment_length`` steps per env with the weights
      it holds, and returns the fragment with its behaviour log-probabilities and the weights
      version that produced it. Every request carries a reference to the newest published weights;
      the worker fetches them from the object store itself when their version is newer than its
      own, so the learner never waits for a worker to take weights.
    * The bounded queue: at most ``queue_size`` fragments are waiting for the learner or being
      collected. A worker is asked for its next fragment (up to ``fragments_in_flight`` ahead)
      only while there is room, so when the learner falls behind, workers wait and memory stays
      bounded.
    * The learner takes ``learner_batch_fragments`` fragments from the queue (oldest first),
      concatenates them along the env axis, learns (``agent.n_epochs`` V-trace train steps) and
      every ``weight_sync_interval`` updates puts its weights once into the object store.
    * Policy lag (``staleness``: learner version minus the behaviour version of each step) is
      measured per learner batch; a metrics row holds the mean over its batches and the largest
      lag of any step (``staleness_max``).

    A worker that dies (killed, or its env or agent raises) is restarted, up to
    ``max_worker_restarts``, and its first fragment uses the newest weights; every fragment it
    had been asked for and had not delivered is dropped and counted in ``samples_lost`` (a
    fragment is delivered whole or not at all). Past the limit the run stops with
    ``ended_by: error`` and a checkpoint.
    """

    def _learner_envs(self) -> int:
        settings = self.config.executor
        return settings.learner_batch_fragments * settings.workers_envs(self.config.env)

    def _make_worker(self, index: int, seed: int):
        settings = self.config.executor
        return self._spawn_worker(ImpalaWorker, index, seed, {"n_steps": settings.fragment_steps(self.config.agent)})

    def _start_actors(self) -> None:
        self._lag_sum, self._lag_batches, self._lag_max = 0.0, 0, None
        self._next_worker = 0
        #: worker -> when it started the fragment it is collecting now (for executor.sample_timeout_s)
        self._head_since: dict[int, float] = {}
        self._start_workers()

    def _request(self, in_flight: dict, queued: int, box: WeightsBox) -> None:
        """Ask workers for fragments while the queue has room: the least busy first, in turns."""
        settings = self.config.executor
        room = settings.queue_size - queued - len(in_flight)
        busy = Counter(in_flight.values())
        n = len(self.workers)
        for depth in range(settings.fragments_in_flight):
            for k in range(n):
                if room <= 0:
                    return
                i = (self._next_worker + k) % n
                if busy[i] == depth:
                    if busy[i] == 0:
                        self._head_since[i] = time.monotonic()  # the worker starts on it now
                    in_flight[self.workers[i].sample.remote(box)] = i
                    busy[i] += 1
                    room -= 1
                    self._next_worker = (i + 1) % n

    def _loop(self, recorder: RunRecorder, stop) -> None:
        settings = self.config.executor
        learner = self.learner
        fragment = settings.fragment_steps(self.config.agent) * settings.workers_envs(self.config.env)
        box = self._weights_box()
        published = learner.updates
        in_flight: dict[Any, int] = {}  # fragment request -> worker index
        queue: deque[dict[str, np.ndarray]] = deque()  # delivered fragments, oldest first
        lags: list[tuple[float, float]] = []  # (mean, max) policy lag of each batch since the last row
        while not recorder.done(stop):
            self._request(in_flight, len(queue), box)
            ready, _ = ray.wait(list(in_flight), num_returns=len(in_flight), timeout=0)
            new_steps = 0
            for ref in ready:
                i = in_flight.pop(ref, None)
                if i is None:  # asked of a worker that was replaced meanwhile: counted already
                    continue
                try:
                    batch, stats = ray.get(ref)
                except FRAGMENT_FAULTS as exc:
                    dropped = [r for r, j in in_flight.items() if j == i]
                    for r in dropped:
                        del in_flight[r]
                    self._head_since.pop(i, None)
                    self._restart_worker(i, exc, fragment * (1 + len(dropped)))
                    self._record_restart(i)
                    continue
                queue.append(batch)
                new_steps += stats["steps"]
                self._note_worker(stats, recorder)
                # a worker's fragments arrive in the order it collected them (ray.wait keeps the
                # order of in_flight, which is the order they were asked for)
                self._record(i, stats.get("env_steps", ()))
                if i in in_flight.values():
                    self._head_since[i] = time.monotonic()  # it starts on its next request now
                else:
                    self._head_since.pop(i, None)
            self._restart_hung(in_flight, fragment)
            recorder.add_env_steps(new_steps)  # before learning: the learner's schedules read the count
            learned = False
            if len(queue) >= settings.learner_batch_fragments:
                self._request(in_flight, len(queue) - settings.learner_batch_fragments, box)  # collect meanwhile
                fragments = [queue.popleft() for _ in range(settings.learner_batch_fragments)]
                merged = {k: concat([f[k] for f in fragments], axis=1) for k in fragments[0]}
                lag = learner.weights_version - np.asarray(merged["policy_version"])
                learner.learn(merged)
                lags.append((float(lag.mean()), float(lag.max())))
                self._lag_sum += lags[-1][0]
                self._lag_batches += 1
                self._lag_max = max(self._lag_max or 0.0, lags[-1][1])
                learned = True
                if learner.updates - published >= settings.weight_sync_interval:
                    box = self._weights_box()
                    published = learner.updates
            if not ready and not learned and in_flight:
                # Nothing arrived and nothing to learn: wait for the next fragment.
                ray.wait(list(in_flight), num_returns=1, timeout=0.5)
            if new_steps:

                def extra(lags=lags, queued=len(queue)) -> dict:
                    row = {
                        "staleness": float(np.mean([m for m, _ in lags])) if lags else None,
                        "staleness_max": float(max(x for _, x in lags)) if lags else None,
                        "queue_fill": queued,
                    }
                    lags.clear()
                    return row

                recorder.step(0, self._distributed_metrics(extra))

    def _restart_hung(self, in_flight: dict, fragment: int) -> None:
        """Restart every worker that has collected one fragment for longer than ``executor.sample_timeout_s``.

        Its requests are dropped (their queue slots free up at once) and counted in ``samples_lost``.
        """
        timeout = self.config.executor.sample_timeout_s
        if timeout is None:
            return
        now = time.monotonic()
        for i, since in list(self._head_since.items()):
            if now - since <= timeout:
                continue
            dropped = [r for r, j in in_flight.items() if j == i]
            for r in dropped:
                del in_flight[r]
            del self._head_since[i]
            self._restart_worker(
                i,
                TimeoutError(f"no fragment within executor.sample_timeout_s = {timeout:g} s"),
                fragment * len(dropped),
            )
            self._record_restart(i)

    def _totals(self) -> dict:
        """``summary.json`` adds the policy lag over the whole run (mean of the batches', largest)."""
        batches = getattr(self, "_lag_batches", 0)
        return {
            **super()._totals(),
            "staleness_mean": self._lag_sum / batches if batches else None,
            "staleness_max": getattr(self, "_lag_max", None),
        }
