"""``ray_sync``: synchronous distributed sampling for on-policy agents (PPO, A2C)."""

from __future__ import annotations

import numpy as np

from rlgraph_core.memories.obs import concat
from rlgraph_core.execution.recorder import RunRecorder
from rlgraph_ray.actors import SyncWorker
from rlgraph_ray.base import WORKER_FAULTS, RayExecutor


class RaySyncExecutor(RayExecutor):
    """Broadcast weights → every worker collects one rollout (GAE on the worker) → the learner
    concatenates the rollouts along the env axis and learns once → repeat.

    With ``num_workers x envs_per_worker`` equal to the local executor's ``env.num_envs`` this is
    the local executor's learning behaviour (the same total batch per update), spread over
    processes. A worker that dies (or whose env raises, or that exceeds
    ``executor.sample_timeout_s``) is restarted with the newest weights and collects the round's
    fragment again; its lost fragment is counted in ``samples_lost``. Past
    ``executor.max_worker_restarts`` the run stops with ``ended_by: error`` and a checkpoint.
    """

    def _learner_envs(self) -> int:
        settings = self.config.executor
        return settings.num_workers * settings.workers_envs(self.config.env)

    def _make_worker(self, index: int, seed: int):
        return self._spawn_worker(SyncWorker, index, seed)

    def _start_actors(self) -> None:
        self._start_workers()

    def _loop(self, recorder: RunRecorder, stop) -> None:
        settings = self.config.executor
        learner = self.learner
        fragment = self.config.agent.n_steps * settings.workers_envs(self.config.env)
        box = self._weights_box()
        rounds = 0
        last = {"staleness": 0.0}
        while not recorder.done(stop):
            if rounds % settings.weight_sync_interval == 0 and box[0] != learner.weights_version:
                box = self._weights_box()
            refs = [w.sample.remote(box) for w in self.workers]
            batches = []
            for i in range(len(refs)):
                while True:
                    try:
                        batch, stats = self._get(refs[i], settings.sample_timeout_s)
                        break
                    except WORKER_FAULTS as exc:
                        self._restart_worker(i, exc, fragment)
                        self._record_restart(i)
                        refs[i] = self.workers[i].sample.remote(box)
                batches.append(batch)
                self._note_worker(stats, recorder)
                self._record(i, stats.get("env_steps", ()))
            merged = {k: concat([b[k] for b in batches], axis=1) for k in batches[0]}
            steps = sum(_steps(b) for b in batches)
            recorder.add_env_steps(steps)  # before learning: the learner's schedules read the count
            result = learner.learn(merged)
            last["staleness"] = float(result.metrics.get("staleness", 0.0))
            rounds += 1
            recorder.step(0, self._distributed_metrics(lambda: dict(last)))


def _steps(batch) -> int:
    """Env steps (rows x steps) of a worker's rollout: its ``rewards``, or a multi-agent one's
    policies' ``NAME/rewards`` together."""
    return sum(int(np.prod(np.shape(v))) for k, v in batch.items() if k == "rewards" or k.endswith("/rewards"))
