"""``ray_apex``: distributed prioritized experience replay (Ape-X, Horgan et al. 2018) for DQN."""

from __future__ import annotations

from typing import Any

import numpy as np
import ray

from rlgraph_core.execution.recorder import RunRecorder
from rlgraph_ray.actors import ApexWorker, ReplayShard
from rlgraph_ray.base import WORKER_FAULTS, RayExecutor
from rlgraph_ray.cluster import actor_options, wait_ready


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
    """

    def _make_worker(self, index: int, seed: int):
        settings = self.config.executor
        eps = settings.worker_epsilon(index)
        return (
            ray.remote(ApexWorker)
            .options(**self._worker_options(index))
            .remote(
                self._worker_config(),
                index,
                seed,
                settings.workers_envs(self.config.env),
                {"exploration": eps},
                self.shards,
                settings.fragment_length,
            )
        )

    def _start_actors(self) -> None:
        settings, agent = self.config.executor, self.config.agent
        memory = agent.memory.model_dump()
        memory["capacity"] = agent.memory.capacity // settings.num_replay_shards
        shard_class = ray.remote(ReplayShard)
        self.shards = [
            shard_class.options(**actor_options(f"rlgraph-{self.tag}-shard-{k}", 0)).remote(
                memory, self.config.train.seed + 7 * k
            )
            for k in range(settings.num_replay_shards)
        ]
        wait_ready(self.shards, settings.placement_timeout_s, "replay shards")
        self._start_workers()

    def _behind(self, start_updates: int) -> float:
        """Updates a throttled learner still owes (``gradient_steps`` per ``train_freq`` env steps)."""
        acfg, learner = self.config.agent, self.learner
        # (shards must be able to serve a batch, or parked workers would wait for ever)
        start = max(acfg.learning_starts, 2 * acfg.batch_size * len(self.shards))
        if learner.timesteps < start:
            return 0
        rounds = (learner.timesteps - start) // acfg.train_freq + 1
        return rounds * acfg.gradient_steps - (learner.updates - start_updates)

    def _request_samples(self, sampling: dict, held: dict[int, list]) -> None:
        """One sample request in flight per shard, unless the learner still holds two requests' batches."""
        settings, busy = self.config.executor, set(sampling.values())
        for k, shard in enumerate(self.shards):
            if k not in busy and len(held.get(k, ())) < 2 * settings.sample_batches:
                sampling[shard.sample.remote(self.config.agent.batch_size, settings.sample_batches)] = k

    def _loop(self, recorder: RunRecorder, stop) -> None:
        settings, acfg = self.config.executor, self.config.agent
        learner = self.learner
        fragment = settings.fragment_length * settings.workers_envs(self.config.env)
        box = self._weights_box()
        synced_at = learner.updates
        collecting = {w.collect.remote(box): i for i, w in enumerate(self.workers)}
        sampling: dict[Any, int] = {}  # sample request -> shard
        held: dict[int, list] = {}  # batches fetched but not yet learned from, by shard
        start_updates = learner.updates
        staleness: list[float] = []
        parked: list[int] = []  # workers whose next fragment waits for the learner
        while not recorder.done(stop):
            new_steps = 0
            ready, _ = ray.wait(list(collecting), num_returns=len(collecting), timeout=0)
            for ref in ready:
                i = collecting.pop(ref)
                try:
                    stats = ray.get(ref)
                except WORKER_FAULTS as exc:
                    self._restart_worker(i, exc, fragment)
                else:
                    new_steps += stats["steps"]
                    self._note_worker(stats, recorder)
                parked.append(i)
            learner.timesteps += new_steps
            if parked and (not settings.throttle or self._behind(start_updates) <= acfg.gradient_steps):
                # Workers wait while a throttled learner is more than one update round behind them.
                for i in parked:
                    collecting[self.workers[i].collect.remote(box)] = i
                parked.clear()
            learned = 0
            if learner.timesteps >= acfg.learning_starts:
                due = self._behind(start_updates) if settings.throttle else np.inf
                self._request_samples(sampling, held)
                got, _ = ray.wait(list(sampling), num_returns=len(sampling), timeout=0)
                for ref in got:
                    k = sampling.pop(ref)
                    batches = ray.get(ref)
                    if batches is not None:
                        held.setdefault(k, []).extend(
                            {name: np.array(v, copy=True) for name, v in b.items()} for b in batches
                        )
                # the next request of each shard is in flight while the learner learns
                self._request_samples(sampling, held)
                for k in list(held):
                    while held[k] and learned < due:
                        result = learner.learn(held[k].pop(0))
                        learned += 1
                        staleness.append(float(result.metrics.get("staleness", 0.0)))
                        if result.priorities is not None:
                            self.shards[k].update_priorities.remote(result.indices, result.priorities)
                    if not held[k]:
                        del held[k]
                if learner.updates - synced_at >= settings.weight_sync_interval:
                    box = self._weights_box()
                    synced_at = learner.updates
            if new_steps == 0 and learned == 0:
                # Nothing arrived and nothing to learn: wait for the next fragment or sample.
                waiting = list(collecting) + list(sampling)
                if waiting:
                    ray.wait(waiting, num_returns=1, timeout=0.5)
            if new_steps:

                def extra(staleness=staleness) -> dict:
                    sizes = ray.get([s.size.remote() for s in self.shards])
                    row = {
                        "staleness": float(np.mean(staleness)) if staleness else None,
                        "replay_size": int(sum(sizes)),
                    }
                    for k, size in enumerate(sizes):
                        row[f"replay_fill_shard_{k}"] = size
                    staleness.clear()
                    return row

                recorder.step(new_steps, self._distributed_metrics(extra))
