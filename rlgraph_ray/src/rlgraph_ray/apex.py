"""``ray_apex``: distributed prioritized experience replay (Ape-X, Horgan et al. 2018) for DQN."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import ray

from rlgraph_core.agents.base import LearnResult
from rlgraph_core.agents.policy_set import PolicySet
from rlgraph_core.memories.obs import map_obs
from rlgraph_core.execution.recorder import RunRecorder
from rlgraph_ray.actors import ApexWorker, ShardsBox
from rlgraph_ray.apex_shards import ReplayShards, ShardRestarts, replay_attachments
from rlgraph_ray.base import WORKER_FAULTS, RayExecutor


def _copy(array) -> np.ndarray:
    """A writable copy of an array received from a shard (Ray hands out read-only views)."""
    return np.array(array, copy=True)


@dataclass
class _Lane:
    """One policy's replay and learning on the driver: its shards, its requests and batches in
    flight, its replay ratio. A single-agent run has one lane (``name`` None, the learner itself)."""

    name: str | None
    agent: Any  #: the learner's agent of this policy (its counters and schedules)
    config: Any  #: its agent config (batch_size, train_freq, gradient_steps, learning_starts)
    learn: Callable[[dict], LearnResult]
    replay: ReplayShards | None = None
    sampling: dict[Any, int] = field(default_factory=dict)  # sample request -> shard
    held: dict[int, list] = field(default_factory=dict)  # batches fetched but not yet learned from, by shard
    start_updates: int = 0
    loop_start: int = 0
    learn_from: int = 0

    @property
    def shards(self) -> ReplayShards:
        assert self.replay is not None  # started by _start_actors, before the loop
        return self.replay

    def forget(self, index: int) -> None:
        """Forget what the loop holds of shard ``index``'s dead predecessor (requests, batches)."""
        for ref, k in list(self.sampling.items()):
            if k == index:
                del self.sampling[ref]
        self.held.pop(index, None)  # sampled from the lost state: their indices mean nothing now


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

    Several policies (a PettingZoo env, docs/multi_agent.md): independent DQN. Each policy has its
    own ``num_replay_shards`` shards of its own ``agent.memory``, its own optimizer, target network,
    replay ratio and checkpoint entries; a worker's policy set acts for every row and sends each
    policy's records to that policy's shards; the learner keeps each policy's sample requests in
    flight and learns each as its own schedule says (the throttle holds workers while any policy is
    more than a round behind). Self-play pools follow the learner's as on ``ray_sync``.
    """

    replay: ReplayShards | None = None
    lanes: list[_Lane] = []

    def _make_worker(self, index: int, seed: int):
        settings = self.config.executor
        eps = settings.worker_epsilon(index)
        return self._spawn_worker(
            ApexWorker, index, seed, {"exploration": eps}, self._shards_box(), settings.fragment_length
        )

    def _make_lanes(self) -> list[_Lane]:
        """One lane per policy of a :class:`PolicySet` learner, else one for the learner."""
        learner = self.learner
        if not isinstance(learner, PolicySet):
            return [_Lane(None, learner, self.config.agent, learner.learn)]
        return [
            _Lane(name, agent, agent.config, lambda batch, name=name: learner.learn_policy(name, batch))
            for name, agent in learner.policies.items()
        ]

    def _start_actors(self) -> None:
        self.lanes = self._make_lanes()
        budget = ShardRestarts()
        for i, lane in enumerate(self.lanes):
            lane.replay = ReplayShards(
                self.config,
                self.tag,
                self.out_dir,
                self.resume_dir,
                lane.agent.replay_record_spaces(),
                on_restart=lane.forget,
                policy=lane.name,
                memory=lane.config.memory,
                lane=i,
                budget=budget,
            )
            lane.replay.start(self.config.executor.num_replay_shards)
        self.replay = self.lanes[0].replay if len(self.lanes) == 1 else None
        self._start_workers()

    def _shards_box(self) -> ShardsBox:
        """Every policy's current shard handles, as workers are told about them: ``(version, {policy: handles})``."""
        boxes = [lane.shards.box() for lane in self.lanes]
        return sum(version for version, _ in boxes), {
            lane.name: handles for lane, (_, handles) in zip(self.lanes, boxes)
        }

    def shard_names(self) -> list[str]:
        return [name for lane in self.lanes if lane.replay is not None for name in lane.replay.names()]

    def _stop_actors(self) -> None:
        super()._stop_actors()
        for lane in self.lanes:
            if lane.replay is not None:
                lane.replay.stop()

    def _configure_recorder(self, recorder: RunRecorder) -> None:
        if self.lanes and self.config.executor.save_replay:
            sets = [lane.shards for lane in self.lanes]
            recorder.checkpoint_attachments = lambda: replay_attachments(sets)

    def _behind(self, lane: _Lane) -> float:
        """Updates a throttled learner still owes policy ``lane`` (``gradient_steps`` per ``train_freq``
        of its env steps)."""
        acfg, agent = lane.config, lane.agent
        # (shards must be able to serve a batch, or parked workers would wait for ever)
        start = max(lane.learn_from, 2 * acfg.batch_size * len(lane.shards.handles))
        if agent.timesteps < start:
            return 0
        # a resumed run owes nothing for the steps before it (those updates are in the checkpoint)
        rounds = (agent.timesteps - max(start, lane.loop_start)) // acfg.train_freq + 1
        return rounds * acfg.gradient_steps - (agent.updates - lane.start_updates)

    def _request_samples(self, lane: _Lane) -> None:
        """One sample request in flight per shard, unless the learner still holds two requests' batches."""
        settings, busy = self.config.executor, set(lane.sampling.values())
        for k, shard in enumerate(lane.shards.handles):
            if k not in busy and len(lane.held.get(k, ())) < 2 * settings.sample_batches:
                lane.sampling[shard.sample.remote(lane.config.batch_size, settings.sample_batches)] = k

    def _learn_lane(self, lane: _Lane, staleness: list[float]) -> int:
        """Fetch what policy ``lane``'s shards sent, learn what its replay ratio allows (priorities go
        back without waiting); the updates made."""
        settings = self.config.executor
        learned = 0
        if lane.agent.timesteps < lane.learn_from:
            return learned
        due = self._behind(lane) if settings.throttle else np.inf
        self._request_samples(lane)
        got, _ = ray.wait(list(lane.sampling), num_returns=len(lane.sampling), timeout=0)
        for ref in got:
            if ref not in lane.sampling:
                continue  # its shard was restarted meanwhile
            k = lane.sampling.pop(ref)
            try:
                batches = ray.get(ref)
            except WORKER_FAULTS as exc:  # the shard died with the request in flight
                lane.shards.ensure(k, exc)
                continue
            if batches is not None:
                lane.held.setdefault(k, []).extend({name: map_obs(_copy, v) for name, v in b.items()} for b in batches)
        # the next request of each shard is in flight while the learner learns
        self._request_samples(lane)
        for k in list(lane.held):
            while lane.held[k] and learned < due:
                result = lane.learn(lane.held[k].pop(0))
                learned += 1
                staleness.append(float(result.metrics.get("staleness", 0.0)))
                if result.priorities is not None:
                    lane.shards.handles[k].update_priorities.remote(result.indices, result.priorities)
            if not lane.held[k]:
                del lane.held[k]
        return learned

    def _loop(self, recorder: RunRecorder, stop) -> None:
        settings = self.config.executor
        learner = self.learner
        several = isinstance(learner, PolicySet)
        fragment = settings.fragment_length * settings.workers_envs(self.config.env)
        box = self._weights_box()
        synced_at = learner.updates
        collecting = {w.collect.remote(box, self._shards_box()): i for i, w in enumerate(self.workers)}
        for lane in self.lanes:
            lane.start_updates = lane.agent.updates
            lane.loop_start = lane.agent.timesteps
            # restored (or fresh) shards: agent.learning_starts as usual; empty shards of a resumed
            # run: learning_starts more env steps to refill them
            restored = self.resume_dir is None or lane.shards.restored is not None
            lane.learn_from = lane.config.learning_starts + (0 if restored else lane.agent.timesteps)
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
                for lane in self.lanes:
                    self.samples_lost += lane.shards.note_inserts(stats)
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
            if several and new_steps:
                learner.count_policy_steps(new_steps)  # each policy's own schedule reads its rows' steps
            if parked and (
                not settings.throttle or all(self._behind(lane) <= lane.config.gradient_steps for lane in self.lanes)
            ):
                # Workers wait while a throttled learner is more than one update round behind them.
                shards = self._shards_box()
                for i in parked:
                    collecting[self.workers[i].collect.remote(box, shards)] = i
                parked.clear()
            learned = sum(self._learn_lane(lane, staleness) for lane in self.lanes)
            if learned and learner.updates - synced_at >= settings.weight_sync_interval:
                box = self._weights_box()
                synced_at = learner.updates
            if learned and not new_steps:
                recorder.refresh_snapshot()  # a throttled learner catching up: step() below is not called
            if new_steps == 0 and learned == 0:
                # Nothing arrived and nothing to learn: wait for the next fragment or sample.
                waiting = list(collecting) + [ref for lane in self.lanes for ref in lane.sampling] + list(starting)
                if waiting:
                    ray.wait(waiting, num_returns=1, timeout=0.5)
            if new_steps:

                def extra(staleness=staleness) -> dict:
                    acting = [v for v in self._worker_versions if v is not None]
                    row = {
                        "shard_restarts": sum(lane.shards.restarts for lane in self.lanes),
                        "replay_lost_on_restart": sum(lane.shards.lost_on_restart() for lane in self.lanes),
                        # policy lag: how many updates behind the learner the workers act
                        "staleness": float(learner.weights_version - np.mean(acting)) if acting else None,
                        # replay age: learner version minus the version that collected the sampled records
                        "replay_age": float(np.mean(staleness)) if staleness else None,
                        # the learner's own epsilon is not what acts: each worker has its Ape-X epsilon
                        "epsilon": None,
                    }
                    total = 0
                    for lane in self.lanes:
                        sizes = lane.shards.sizes()
                        total += int(sum(sizes))
                        prefix = "" if lane.name is None else f"{lane.name}/"
                        if lane.name is not None:
                            row[f"{prefix}replay_size"] = int(sum(sizes))
                        for k, size in enumerate(sizes):
                            row[f"{prefix}replay_fill_shard_{k}"] = size
                    row["replay_size"] = total
                    for i in range(len(self.workers)):
                        row[f"worker_{i}_epsilon"] = settings.worker_epsilon(i)
                    staleness.clear()
                    return row

                recorder.step(0, self._distributed_metrics(extra))

    def _totals(self) -> dict:
        """``summary.json`` adds the shard restarts, the records they lost and those restored on resume."""
        totals = super()._totals()
        sets = [lane.replay for lane in self.lanes if lane.replay is not None and lane.replay.handles]
        if sets:
            restored = [shards.restored for shards in sets if shards.restored is not None]
            totals.update(
                shard_restarts=sum(shards.restarts for shards in sets),
                replay_lost_on_restart=sum(shards.lost_on_restart() for shards in sets),
                replay_restored=sum(restored) if restored else None,
            )
        return totals
