"""``ray_apex``: distributed prioritized experience replay (Ape-X, Horgan et al. 2018) for DQN."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import ray

from rlgraph_core.memories.obs import map_obs
from rlgraph_core.execution.recorder import RunRecorder
from rlgraph_ray.actors import ApexWorker
from rlgraph_ray.apex_shards import ReplayShards
from rlgraph_ray.base import WORKER_FAULTS, RayExecutor


def _copy(array) -> np.ndarray:
    """A writable copy of an array received from a shard (Ray hands out read-only views)."""
    return np.array(array, copy=True)


class RayApexExecutor(RayExecutor):
    """N workers act, K replay shards store, the learner (this process) samples, learns and sends
    new priorities back.

    * Worker ``i`` explores with a fixed ``epsilon_i = epsilon ** (1 + epsilon_alpha * i / (N - 1))``
      (its agent config's ``exploration`` is set to that constant), steps its own vector env for
      ``fragment_length`` steps, folds n-step transitions and computes initial priorities (|TD|
      under its weights) with the agent's ``postprocess``, and inserts the batch into a shard itself.
    * Each shard is the configured memory with ``agent.memory.capacity / K`` records; it inserts
      a batch and sets its priorities in one call (never half a batch).
    * The learner keeps one sample request in flight per shard, learns from whatever arrives,
      and sends the new priorities back without waiting. Learning starts once
      ``agent.learning_starts`` env steps were taken by all workers together; with
      ``executor.throttle`` the run keeps the agent's replay ratio (``gradient_steps`` per
      ``train_freq`` env steps), as the local executor does: the learner never learns ahead of it,
      and workers wait while the learner is more than one update round behind (on a small
      machine the learner would otherwise starve). Without it, both run as fast as they can.
    * Every ``weight_sync_interval`` updates the weights go once into the object store; each
      worker takes the newest version at the start of its next fragment.

    A worker that dies is restarted (up to ``max_worker_restarts``) and the fragment it was
    collecting is counted in ``samples_lost``; batches it had already inserted stay in replay.
    The replacement is not awaited: the learner keeps learning from the shards and the live
    workers keep collecting while it is placed and built (as RLlib carries on degraded); one that
    dies while being built counts as another restart.

    Each shard snapshots its memory into ``<out>/replay_snapshots/shard-<k>`` every
    ``replay_snapshot_interval`` inserted records. A shard that dies (found by a failed sample
    request, a worker's failed insert or a size query) is restarted from that snapshot (up to
    ``max_worker_restarts`` shard restarts); the learner drops its requests to and batches from
    the dead shard, workers get the new handle with their next fragment, a batch a worker sent to
    the dead shard counts in ``samples_lost``, and the records inserted after the snapshot in
    ``replay_lost_on_restart``. A resumed run learns from restored shards (``save_replay``) at
    once, and from empty ones after ``agent.learning_starts`` new env steps. The shards and their
    care are :class:`~rlgraph_ray.apex_shards.ReplayShards` (``self.replay``).
    """

    replay: ReplayShards | None = None

    def _make_worker(self, index: int, seed: int):
        settings = self.config.executor
        eps = settings.worker_epsilon(index)
        return self._spawn_worker(
            ApexWorker, index, seed, {"exploration": eps}, self._shards.box(), settings.fragment_length
        )

    def _start_actors(self) -> None:
        self.sampling: dict[Any, int] = {}  # sample request -> shard
        self.held: dict[int, list] = {}  # batches fetched but not yet learned from, by shard
        self.replay = ReplayShards(
            self.config,
            self.tag,
            self.out_dir,
            self.resume_dir,
            self.learner.replay_record_spaces(),
            on_restart=self._shard_restarted,
        )
        self.replay.start(self.config.executor.num_replay_shards)
        self._start_workers()

    def shard_names(self) -> list[str]:
        return [] if self.replay is None else self.replay.names()

    def _stop_actors(self) -> None:
        super()._stop_actors()
        if self.replay is not None:
            self.replay.stop()

    def _configure_recorder(self, recorder: RunRecorder) -> None:
        if self.replay is not None and self.config.executor.save_replay:
            recorder.checkpoint_attachments = self.replay.attachments

    @property
    def _shards(self) -> ReplayShards:
        assert self.replay is not None  # started by _start_actors, before the loop
        return self.replay

    def _shard_restarted(self, index: int) -> None:
        """Forget what the loop holds of shard ``index``'s dead predecessor (requests, batches)."""
        for ref, k in list(self.sampling.items()):
            if k == index:
                del self.sampling[ref]
        self.held.pop(index, None)  # sampled from the lost state: their indices mean nothing now

    def _behind(self, start_updates: int) -> float:
        """Updates a throttled learner still owes (``gradient_steps`` per ``train_freq`` env steps)."""
        acfg, learner = self.config.agent, self.learner
        # (shards must be able to serve a batch, or parked workers would wait for ever)
        start = max(self._learn_from, 2 * acfg.batch_size * len(self._shards.handles))
        if learner.timesteps < start:
            return 0
        # a resumed run owes nothing for the steps before it (those updates are in the checkpoint)
        rounds = (learner.timesteps - max(start, self._loop_start)) // acfg.train_freq + 1
        return rounds * acfg.gradient_steps - (learner.updates - start_updates)

    def _request_samples(self, sampling: dict, held: dict[int, list]) -> None:
        """One sample request in flight per shard, unless the learner still holds two requests' batches."""
        settings, busy = self.config.executor, set(sampling.values())
        for k, shard in enumerate(self._shards.handles):
            if k not in busy and len(held.get(k, ())) < 2 * settings.sample_batches:
                sampling[shard.sample.remote(self.config.agent.batch_size, settings.sample_batches)] = k

    def _loop(self, recorder: RunRecorder, stop) -> None:
        settings, acfg = self.config.executor, self.config.agent
        learner = self.learner
        fragment = settings.fragment_length * settings.workers_envs(self.config.env)
        box = self._weights_box()
        synced_at = learner.updates
        collecting = {w.collect.remote(box, self._shards.box()): i for i, w in enumerate(self.workers)}
        sampling, held = self.sampling, self.held
        start_updates = learner.updates
        self._loop_start = learner.timesteps
        # restored (or fresh) shards: agent.learning_starts as usual; empty shards of a resumed
        # run: learning_starts more env steps to refill them
        restored = self.resume_dir is None or self._shards.restored is not None
        self._learn_from = acfg.learning_starts + (0 if restored else learner.timesteps)
        staleness: list[float] = []
        parked: list[int] = []  # workers whose next fragment waits for the learner
        starting: dict[Any, tuple[int, float]] = {}  # ready() of replacement workers -> (worker, since)
        while not recorder.done(stop):
            new_steps = 0
            ready, _ = ray.wait(list(collecting), num_returns=len(collecting), timeout=0)
            for ref in ready:
                i = collecting.pop(ref)
                try:
                    stats = ray.get(ref)
                except WORKER_FAULTS as exc:
                    # not awaited: the learner goes on with the shards and the live workers
                    starting[self._restart_worker(i, exc, fragment, wait=False)] = (i, time.monotonic())
                    continue
                new_steps += stats["steps"]
                self._note_worker(stats, recorder)
                self.samples_lost += self._shards.note_inserts(stats)
                parked.append(i)
            for ref, (i, since) in list(starting.items()):
                started = self._worker_started(i, ref, since)
                if started is None:  # it died while being built: another restart
                    del starting[ref]
                    exc = RuntimeError(f"worker {i} died while it was being built")
                    starting[self._restart_worker(i, exc, 0, wait=False)] = (i, time.monotonic())
                elif started:
                    del starting[ref]
                    parked.append(i)
            recorder.add_env_steps(new_steps)  # before learning: learning_starts and the throttle read it
            if parked and (not settings.throttle or self._behind(start_updates) <= acfg.gradient_steps):
                # Workers wait while a throttled learner is more than one update round behind them.
                shards = self._shards.box()
                for i in parked:
                    collecting[self.workers[i].collect.remote(box, shards)] = i
                parked.clear()
            learned = 0
            if learner.timesteps >= self._learn_from:
                due = self._behind(start_updates) if settings.throttle else np.inf
                self._request_samples(sampling, held)
                got, _ = ray.wait(list(sampling), num_returns=len(sampling), timeout=0)
                for ref in got:
                    if ref not in sampling:
                        continue  # its shard was restarted meanwhile
                    k = sampling.pop(ref)
                    try:
                        batches = ray.get(ref)
                    except WORKER_FAULTS as exc:  # the shard died with the request in flight
                        self._shards.ensure(k, exc)
                        continue
                    if batches is not None:
                        held.setdefault(k, []).extend(
                            {name: map_obs(_copy, v) for name, v in b.items()} for b in batches
                        )
                # the next request of each shard is in flight while the learner learns
                self._request_samples(sampling, held)
                for k in list(held):
                    while held[k] and learned < due:
                        result = learner.learn(held[k].pop(0))
                        learned += 1
                        staleness.append(float(result.metrics.get("staleness", 0.0)))
                        if result.priorities is not None:
                            self._shards.handles[k].update_priorities.remote(result.indices, result.priorities)
                    if not held[k]:
                        del held[k]
                if learner.updates - synced_at >= settings.weight_sync_interval:
                    box = self._weights_box()
                    synced_at = learner.updates
            if learned and not new_steps:
                recorder.refresh_snapshot()  # a throttled learner catching up: step() below is not called
            if new_steps == 0 and learned == 0:
                # Nothing arrived and nothing to learn: wait for the next fragment or sample.
                waiting = list(collecting) + list(sampling) + list(starting)
                if waiting:
                    ray.wait(waiting, num_returns=1, timeout=0.5)
            if new_steps:

                def extra(staleness=staleness) -> dict:
                    sizes = self._shards.sizes()
                    acting = [v for v in self._worker_versions if v is not None]
                    row = {
                        "shard_restarts": self._shards.restarts,
                        "replay_lost_on_restart": self._shards.lost_on_restart(),
                        # policy lag: how many updates behind the learner the workers act
                        "staleness": float(learner.weights_version - np.mean(acting)) if acting else None,
                        # replay age: learner version minus the version that collected the sampled records
                        "replay_age": float(np.mean(staleness)) if staleness else None,
                        "replay_size": int(sum(sizes)),
                        # the learner's own epsilon is not what acts: each worker has its Ape-X epsilon
                        "epsilon": None,
                    }
                    for i in range(len(self.workers)):
                        row[f"worker_{i}_epsilon"] = settings.worker_epsilon(i)
                    for k, size in enumerate(sizes):
                        row[f"replay_fill_shard_{k}"] = size
                    staleness.clear()
                    return row

                recorder.step(0, self._distributed_metrics(extra))

    def _totals(self) -> dict:
        """``summary.json`` adds the shard restarts, the records they lost and those restored on resume."""
        totals = super()._totals()
        if self.replay is not None and self.replay.handles:
            totals.update(
                shard_restarts=self.replay.restarts,
                replay_lost_on_restart=self.replay.lost_on_restart(),
                replay_restored=self.replay.restored,
            )
        return totals
