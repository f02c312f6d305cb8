"""Images and Dict observations through the Ray executors, on one Ray session for the module.

* ``ray_apex`` and ``ray_impala`` with 2 workers on uint8 84x84x4 frames (a ROM-free Pong-like
  env): the replay shard stores uint8 frames, each once (obs and next_obs share them, no float
  copy), and the fragments workers send are uint8.
* A Dict observation (uint8 image + float vector) through ``ray_apex`` with ``dict_encoder``:
  the shard stores it per key, the image as shared uint8 frames, the vector as float32.
* A recurrent CNN core (``network: {type: lstm, encoder: {type: cnn}}``) on uint8 frames
  (RecallCueImage) through ``ray_sync`` (PPO) and ``ray_impala`` with 2 workers: the fragments
  carry uint8 frames and the LSTM states each sequence started from, and the learner trains on them.
* R2D2 (a CNN-LSTM DQN) through ``ray_apex``: the shard stores each frame of the overlapping
  windows workers send once.

Budgets are a few hundred env steps with a small CNN: these check the data path, not learning.
"""

from __future__ import annotations

import copy
import os
import sys
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from rlgraph_core.assemble import train  # noqa: E402
from rlgraph_core.config.run import load_shipped_config, validate_config  # noqa: E402
from rlgraph_core.plugins import PluginManager, hookimpl  # noqa: E402

HERE = str(Path(__file__).resolve().parent)

#: A small CNN on 84x84 frames (Nature's first two layers, narrower): the test is the data path.
SMALL_CNN = {
    "type": "cnn",
    "preset": "custom",
    "conv": [{"filters": 8, "kernel": 8, "stride": 4}, {"filters": 8, "kernel": 4, "stride": 2}],
    "hidden": [32],
}
TRAIN = {
    "backend": "torch",
    "mode": "eager",
    "progress_bar": False,
    "loggers": ["jsonl"],
    "eval_episodes": 1,
    "target_return": None,
}


@pytest.fixture(scope="module")
def image_session(request):
    """A Ray session of the module's own, started with this folder on the workers' PYTHONPATH (the
    env module): the shared one (tests/ray/conftest.py) is shut down first, since its workers'
    environment was fixed when it started, and this one is shut down after the module."""
    import ray

    if ray.is_initialized():
        ray.shutdown()
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = HERE + (os.pathsep + old if old else "")
    sys.path.insert(0, HERE)
    try:
        yield request.getfixturevalue("ray_session")
    finally:
        ray.shutdown()  # the next module asking for Ray starts the shared one again
        sys.path.remove(HERE)
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


class StorageProbe:
    """At the end of the run, reads what the replay shards hold and what a worker sends."""

    def __init__(self, sample_worker: bool = False):
        self.sample_worker = sample_worker
        self.shards, self.workers, self.shard_states, self.fragment = [], [], [], None

    @hookimpl
    def rlgraph_on_train_start(self, run_info):
        self.shards, self.workers = run_info["ray"]["shards"], run_info["ray"]["workers"]

    @hookimpl
    def rlgraph_on_train_end(self, summary):
        self.shard_states = [ray.get(ray.get_actor(name).state.remote())[0] for name in self.shards]
        if self.sample_worker:  # one more fragment, as the learner gets it
            self.fragment, _ = ray.get(ray.get_actor(self.workers[0]).sample.remote(None))


def _apex(env_id: str, network: dict, total: int) -> dict:
    raw = copy.deepcopy(load_shipped_config("apex_pong"))
    raw["agent"].update(
        network=network,
        n_step=1,
        batch_size=32,
        learning_starts=64,
        train_freq=64,
        gradient_steps=2,
        target_update_interval=16,
        memory={"type": "prioritized_replay", "capacity": 2000, "alpha": 0.6, "beta": 0.4},
    )
    raw["env"] = {"id": env_id, "num_envs": 4}
    raw["train"].update(TRAIN, total_timesteps=total, eval_interval=total, log_interval=total)
    raw["executor"].update(
        fragment_length=16, weight_sync_interval=2, replay_snapshot_interval=None, placement_timeout_s=300
    )
    return raw


def _run(raw, tmp_path, probe):
    pm = PluginManager()
    pm.register(probe, "storage-probe")
    summary = train(validate_config(raw, pm), tmp_path, plugin_manager=pm)
    assert summary["ended_by"] == "total_timesteps" and summary["num_workers"] == 2, summary
    assert summary["worker_restarts"] == 0
    return summary


def test_apex_stores_uint8_frames_once(image_session, tmp_path):
    probe = StorageProbe()
    summary = _run(_apex("ray_image_envs:SyntheticPong", SMALL_CNN, 384), tmp_path, probe)
    assert summary["updates"] > 0
    (state,) = probe.shard_states
    assert "data/obs" not in state and "data/next_obs" not in state  # no copy per record, float or uint8
    frames, records = state["frames/obs"], int(state["size"])
    assert frames.dtype == np.uint8 and frames.shape[1:] == (84, 84)
    assert state["frame_index/obs"].shape == (records, 4) and state["frame_index/next_obs"].shape == (records, 4)
    # Stored naively a record is 8 frames (obs and next_obs, a stack of 4 each); content-addressed,
    # SyntheticPong has at most 76 distinct frames (the square's positions), however many records.
    assert records >= 256 and len(frames) <= 76, (records, len(frames))


def test_impala_sends_uint8_fragments(image_session, tmp_path):
    probe = StorageProbe(sample_worker=True)
    raw = copy.deepcopy(load_shipped_config("impala_pong"))
    raw["agent"].update(network=SMALL_CNN, n_steps=8)
    raw["env"] = {"id": "ray_image_envs:SyntheticPong", "num_envs": 4}
    raw["train"].update(TRAIN, total_timesteps=256, eval_interval=256, log_interval=256)
    raw["executor"].update(learner_batch_fragments=2, queue_size=4, placement_timeout_s=300)
    summary = _run(raw, tmp_path, probe)
    assert summary["updates"] > 0
    obs = probe.fragment["obs"]
    assert obs.dtype == np.uint8 and obs.shape[-3:] == (84, 84, 4)


def test_dict_observations_through_apex(image_session, tmp_path):
    encoder = {
        "type": "dict_encoder",
        "image": {
            "type": "cnn",
            "preset": "custom",
            "conv": [{"filters": 4, "kernel": 4, "stride": 2}],
            "hidden": [16],
        },
        "vector": {"hidden": [8]},
        "hidden": [16],
    }
    probe = StorageProbe()
    summary = _run(_apex("ray_image_envs:ImageVectorPong", encoder, 256), tmp_path, probe)
    assert summary["updates"] > 0
    (state,) = probe.shard_states
    assert state["frames/obs/image"].dtype == np.uint8 and state["frames/obs/image"].shape[1:] == (16, 16)
    assert state["data/obs/vector"].dtype == np.float32 and "data/obs/image" not in state


#: RecallCueImage (6x6x1 uint8 frames) and a CNN small enough for them before a 16-unit LSTM
RECALL_IMAGE = "rlgraph_core.testing.memory_env:RecallCueImage"
CNN_LSTM = {
    "type": "lstm",
    "units": 16,
    "encoder": {"type": "cnn", "preset": "custom", "conv": [{"filters": 8, "kernel": 3, "stride": 3}], "hidden": [16]},
    "seq_len": 4,
}


class FragmentProbe:
    """At the end of the run, asks worker 0 for one more fragment, as the learner gets it."""

    def __init__(self):
        self.fragment = None

    @hookimpl
    def rlgraph_on_train_start(self, run_info):
        self.workers = run_info["ray"]["workers"]

    @hookimpl
    def rlgraph_on_train_end(self, summary):
        self.fragment, _ = ray.get(ray.get_actor(self.workers[0]).sample.remote(None))


def _cnn_lstm(algo: str, executor: str, tmp_path, **executor_settings):
    """A CNN-LSTM ``algo`` on RecallCueImage (2 workers of 4 envs, 8-step fragments), 256 env steps."""
    raw = {
        "agent": {"type": algo, "network": CNN_LSTM, "n_steps": 8, "ent_coef": 0.01},
        "env": {"id": RECALL_IMAGE, "num_envs": 8},
        "train": {**TRAIN, "executor": executor, "total_timesteps": 256, "eval_interval": 256, "log_interval": 128},
        "executor": {"num_workers": 2, "placement_timeout_s": 300, **executor_settings},
    }
    if algo == "ppo":
        raw["agent"].update(batch_size=32, n_epochs=2)
    probe = FragmentProbe()
    summary = _run(raw, tmp_path, probe)
    assert summary["updates"] > 0 and summary["samples_lost"] == 0, summary
    fragment = probe.fragment
    assert fragment["obs"].dtype == np.uint8 and fragment["obs"].shape[-4:] == (4, 6, 6, 1), fragment["obs"].shape
    states = fragment["sequence_states"]
    # one state per 4-step sequence of each of the worker's 4 envs: 2 sequences per 8-step fragment
    assert {"pi_c", "pi_h"} <= set(states), sorted(states)
    for value in states.values():
        assert value.dtype == np.float32 and value.shape == (2, 4, 16), value.shape
    assert np.abs(np.concatenate([v[1:] for v in states.values()])).max() > 1e-3  # carried across sequences
    return summary


def test_ray_sync_trains_a_cnn_lstm_on_uint8_frames(image_session, tmp_path):
    _cnn_lstm("ppo", "ray_sync", tmp_path)


def test_ray_impala_trains_a_cnn_lstm_on_uint8_frames(image_session, tmp_path):
    _cnn_lstm("impala", "ray_impala", tmp_path, learner_batch_fragments=2, queue_size=4)


def test_apex_r2d2_stores_each_frame_of_its_windows_once(image_session, tmp_path):
    """R2D2 (a CNN-LSTM) on ray_apex: workers cut their uint8 frames into windows of 4 steps (+1
    observation) every 2 steps; the shard holds (windows, 5, 4) frame slots into one uint8 pool (a
    window's 20 frames, of a stack of 4, are no copies), with the state of each window's first step,
    and the learner trains on them."""
    network = {"type": "lstm", "units": 8, "encoder": SMALL_CNN, "seq_len": 4}
    raw = _apex("ray_image_envs:SyntheticPong", network, 256)
    raw["agent"].update(
        burn_in=2, batch_size=8, learning_starts=8, memory={"type": "prioritized_replay", "capacity": 500}
    )
    probe = StorageProbe()
    summary = _run(raw, tmp_path, probe)
    assert summary["updates"] > 0
    (state,) = probe.shard_states
    records = int(state["size"])
    assert "data/obs" not in state and not any(k.endswith("next_obs") for k in state)
    assert state["frames/obs"].dtype == np.uint8 and state["frames/obs"].shape[1:] == (84, 84)
    assert state["frame_index/obs"].shape == (records, 5, 4) and state["data/state/h"].shape == (records, 8)
    # 20 frames per window stored as given; SyntheticPong has at most 76 distinct frames
    assert records >= 32 and len(state["frames/obs"]) <= 76, (records, len(state["frames/obs"]))
