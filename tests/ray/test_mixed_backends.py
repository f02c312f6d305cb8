"""A torch learner with tf workers (``executor.worker_backend: tf``): weights travel as numpy, and
the workers' policy computes what the learner's computes on the same inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("torch")
pytest.importorskip("tensorflow")

from rlgraph_core.agents.base import VersionedWeights  # noqa: E402
from rlgraph_core.assemble import assemble, train  # noqa: E402
from rlgraph_core.config.run import apply_overrides, load_shipped_config, validate_config  # noqa: E402
from rlgraph_core.plugins import PluginManager, get_plugin_manager, hookimpl  # noqa: E402
from rlgraph_ray.actors import SyncWorker  # noqa: E402

QUIET = ["train.progress_bar=false", "train.loggers=[jsonl]", "train.eval_interval=100000"]


def ppo(*overrides: str):
    return validate_config(apply_overrides(load_shipped_config("ppo_cartpole_ray"), QUIET + list(overrides)))


def box(agent) -> tuple[int, list]:
    """The learner's weights as a worker is told about them (see ``RayExecutor._weights_box``)."""
    weights: VersionedWeights = agent.get_versioned_weights()
    return weights.version, [ray.put(weights)]


def learner_outputs(agent, obs, actions) -> list[np.ndarray]:
    """``evaluate_actions`` (log-probs, entropy, values) of the learner's graph, as numpy."""
    b = agent.backend
    return [b.to_numpy(x) for x in agent.graph.evaluate_actions(b.to_tensor(obs), b.to_tensor(actions))]


def assert_worker_matches(worker, learner, obs, actions) -> None:
    """Same weights (bit for bit: float32 numpy both ways) and the same policy outputs (float tolerance)."""
    worker_weights, learner_weights = ray.get(worker.get_weights.remote()), learner.get_weights()
    assert sorted(worker_weights) == sorted(learner_weights)
    for name, value in learner_weights.items():
        np.testing.assert_array_equal(worker_weights[name], value, err_msg=name)
    got = ray.get(worker.call_graph.remote("evaluate_actions", obs, actions))
    for name, mine, theirs in zip(("log_probs", "entropy", "values"), got, learner_outputs(learner, obs, actions)):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-5, err_msg=name)


def test_tf_worker_takes_torch_learner_weights_and_computes_the_same_policy(ray_session):
    config = ppo("agent.batch_size=64", "executor.worker_backend=tf")
    parts = assemble(config, get_plugin_manager())
    env = parts.make_eval_env()
    learner = parts.make_agent(env.observation_space, env.action_space, num_envs=4, with_memory=False)
    env.close()
    assert type(learner.backend).__module__.startswith("rlgraph_torch")
    raw = config.to_dict()
    raw["train"]["backend"] = "tf"  # what the executor hands its workers (RayExecutor._worker_config)
    worker = ray.remote(SyncWorker).remote(raw, 0, 123, 4)
    assert ray.get(worker.describe.remote())["backend"] == "tf"
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(64, 4)).astype(np.float32)
    actions = rng.integers(0, 2, size=64).astype(np.int64)
    # the worker was built from another seed on another backend: its policy differs until it syncs
    before = ray.get(worker.call_graph.remote("evaluate_actions", obs, actions))
    assert not np.allclose(before[2], learner_outputs(learner, obs, actions)[2], atol=1e-3)
    first = box(learner)
    assert ray.get(worker.sync_weights.remote(first)) == 0
    assert_worker_matches(worker, learner, obs, actions)
    # the learner learns from the tf worker's rollout (GAE on the worker), then the worker syncs again
    batch, stats = ray.get(worker.sample.remote(first))
    assert stats["version"] == 0
    result = learner.learn(batch)
    assert result.metrics["staleness"] == 0.0 and learner.weights_version > 0
    second = box(learner)
    assert ray.get(worker.sync_weights.remote(second)) == learner.weights_version
    assert_worker_matches(worker, learner, obs, actions)
    ray.kill(worker, no_restart=True)


class WorkerProbe:
    """Asks every worker what it runs, at the start and at the end of the run."""

    def __init__(self):
        self.start, self.end = [], []

    @hookimpl
    def rlgraph_on_train_start(self, run_info):
        self.names = run_info["ray"]["workers"]
        self.run_info = run_info
        self.start = ray.get([ray.get_actor(n).describe.remote() for n in self.names])

    @hookimpl
    def rlgraph_on_train_end(self, summary):
        self.end = ray.get([ray.get_actor(n).describe.remote() for n in self.names])


def test_ray_sync_with_a_torch_learner_and_tf_workers(ray_session, tmp_path):
    pm = PluginManager()
    probe = WorkerProbe()
    pm.register(probe, "worker-probe")
    config = ppo(
        "executor.worker_backend=tf", "train.total_timesteps=768", "train.log_interval=256", "agent.n_epochs=2"
    )
    summary = train(config, tmp_path, plugin_manager=pm)
    assert summary["ended_by"] == "total_timesteps" and summary["timesteps"] >= 768
    assert summary["worker_backend"] == "tf" and probe.run_info["ray"]["worker_backend"] == "tf"
    assert [d["backend"] for d in probe.start] == ["tf", "tf"]
    # every worker acted with the newest weights the torch learner published
    published = summary["weights_version_published"]
    assert published > 0 and [d["weights_version"] for d in probe.end] == [published, published]
    assert summary["worker_weights_versions"] == [published, published]
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["staleness"] == 0.0 and rows[-1]["worker_0_weights_version"] == published
