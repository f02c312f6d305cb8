"""Faults and resume in-process: a killed ray_apex shard comes back from its snapshot, save_replay
survives --resume, and a ray_sync run resumes its learner and counters."""

from __future__ import annotations

import json

import pytest

ray = pytest.importorskip("ray")

from rlgraph_core.assemble import train  # noqa: E402
from rlgraph_core.checkpoint import read_attachment  # noqa: E402
from rlgraph_core.errors import CheckpointError  # noqa: E402
from rlgraph_core.config.run import apply_overrides, load_shipped_config, validate_config  # noqa: E402
from rlgraph_core.plugins import PluginManager, hookimpl  # noqa: E402

#: configs/apex_cartpole.yaml cut down to a few thousand env steps of a tiny network (these
#: tests check bookkeeping, not learning).
SMALL = [
    "train.progress_bar=false",
    "train.loggers=[jsonl]",
    "agent.network.hidden=[16]",
    "agent.learning_starts=500",
    "agent.gradient_steps=16",
    "agent.target_update_interval=64",
    "train.target_return=null",
    "train.eval_interval=100000",
    "train.eval_episodes=1",
    "train.log_interval=1000",
]


def apex(*overrides: str):
    return validate_config(apply_overrides(load_shipped_config("apex_cartpole"), SMALL + list(overrides)))


def rows(out) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


class ShardKiller:
    """At the first metrics row: note shard 0's inserts, kill it, and read the snapshot it left."""

    def __init__(self, out):
        self.out, self.names = out, []
        self.inserted = self.snapshot = None

    @hookimpl
    def rlgraph_on_train_start(self, run_info):
        self.names = run_info["ray"]["shards"]

    @hookimpl
    def rlgraph_on_iteration(self, metrics):
        if self.inserted is None:
            shard = ray.get_actor(self.names[0])
            self.inserted = ray.get(shard.counts.remote())["inserted"]
            ray.kill(shard, no_restart=False)
            meta = json.loads((self.out / "replay_snapshots" / "shard-0" / "meta.json").read_text())
            self.snapshot = meta["info"]["inserted"]


def test_a_killed_shard_comes_back_from_its_snapshot(ray_session, tmp_path):
    pm = PluginManager()
    killer = ShardKiller(tmp_path)
    pm.register(killer, "shard-killer")
    config = apex("train.total_timesteps=4000", "executor.replay_snapshot_interval=300")
    summary = train(config, tmp_path, plugin_manager=pm)
    assert summary["ended_by"] == "total_timesteps" and summary["timesteps"] >= 4000
    assert summary["shard_restarts"] == 1 and summary["worker_restarts"] == 0
    assert 0 < killer.snapshot <= killer.inserted
    # Lost: what the shard received after its snapshot. It held `inserted` when it was killed;
    # each of the 2 workers may have had one more batch (a 50-step fragment) in flight to it.
    since = killer.inserted - killer.snapshot
    assert since <= summary["replay_lost_on_restart"] <= since + 2 * 60
    assert summary["replay_lost_on_restart"] < 300 + 2 * 60  # never more than an interval (+ batches in flight)
    after = rows(tmp_path)[1:]
    assert after and after[0]["shard_restarts"] == 1
    # the new shard started from the snapshot (not empty) and kept filling
    assert after[0]["replay_size"] >= killer.snapshot and after[-1]["replay_size"] > after[0]["replay_size"]
    assert summary["updates"] > 0
    assert read_attachment(tmp_path / "checkpoint", "replay") is None  # save_replay is off by default


class TwiceShardKiller:
    """Kill shard 0 at the first metrics row and its replacement at the third; note what each snapshot held."""

    def __init__(self, out):
        self.out, self.names, self.rows = out, [], 0
        self.kills: list[tuple[int, int, int]] = []  # (inserted when killed, snapshot's inserted, snapshot size)
        self.counts: list[dict] = []

    @hookimpl
    def rlgraph_on_train_start(self, run_info):
        self.names = run_info["ray"]["shards"]

    @hookimpl
    def rlgraph_on_iteration(self, metrics):
        self.rows += 1
        if self.rows in (1, 3):
            name = self.names[0].rsplit("-", 1)[0] + f"-{len(self.kills)}"  # the current generation's actor
            shard = ray.get_actor(name)
            counts = ray.get(shard.counts.remote())
            ray.kill(shard, no_restart=False)
            meta = json.loads((self.out / "replay_snapshots" / "shard-0" / "meta.json").read_text())
            self.kills.append((counts["inserted"], meta["info"]["inserted"], counts["size"]))
            self.counts.append(dict(counts, timesteps=metrics["timesteps"]))


def test_a_shard_restarted_twice_reloads_the_snapshot_its_replacement_wrote(ray_session, tmp_path):
    """Issue 19: the second restart reloaded the snapshot taken before the first kill (4,648 -> 1,898 records)."""
    pm = PluginManager()
    killer = TwiceShardKiller(tmp_path)
    pm.register(killer, "shard-killer")
    config = apex("train.total_timesteps=5000", "executor.replay_snapshot_interval=300")
    summary = train(config, tmp_path, plugin_manager=pm)
    assert summary["shard_restarts"] == 2 and len(killer.kills) == 2
    (first_inserted, first_snapshot, _), (second_inserted, second_snapshot, _) = killer.kills
    assert [c["snapshot_error"] for c in killer.counts] == [None, None]
    assert second_snapshot > first_inserted  # the replacement wrote its own snapshots where the next restart looks
    lost_second = second_inserted - second_snapshot
    lost_first = first_inserted - first_snapshot
    assert lost_second < 300 + 2 * 60 and lost_first < 300 + 2 * 60
    assert summary["replay_lost_on_restart"] <= lost_first + lost_second + 4 * 60


def test_resume_with_save_replay_restores_the_shards(ray_session, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    one = ["executor.num_workers=1", "env.num_envs=1", "executor.save_replay=true"]  # (fewer processes to start)
    summary = train(apex("train.total_timesteps=2000", *one), first)
    assert summary["ended_by"] == "total_timesteps"
    info, arrays = read_attachment(first / "checkpoint", "replay")
    stored = int(arrays["shard_0/size"])
    assert stored > 0 and info["shards"] == 1 and info["inserted"][0] >= stored
    assert arrays["shard_0/data/obs"].shape == (stored, 4)

    resumed = train(
        apex("train.total_timesteps=2500", "train.log_interval=250", *one),
        second,
        resume_dir=first / "checkpoint",
    )
    assert resumed["replay_restored"] == stored
    assert resumed["timesteps"] >= 2500 and resumed["updates"] > summary["updates"]
    first_row = rows(second)[0]
    assert first_row["timesteps"] > summary["timesteps"]  # the counters carried on
    assert first_row["replay_size"] >= stored  # the shard started from the checkpoint's records

    # shards of another layout are refused before any worker starts, naming the settings
    with pytest.raises(CheckpointError, match="executor.num_replay_shards, agent.memory.capacity"):
        train(apex(*one, "executor.num_replay_shards=2"), tmp_path / "x", first / "checkpoint")


def test_a_ray_sync_run_resumes_its_learner_and_counters(ray_session, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    quiet = [
        "train.progress_bar=false",
        "train.loggers=[jsonl]",
        "train.eval_interval=100000",
        "train.log_interval=256",
        "executor.num_workers=1",  # 8 envs on one worker: the same 256-sample rounds, fewer processes
    ]
    ppo = load_shipped_config("ppo_cartpole_ray")
    summary = train(validate_config(apply_overrides(ppo, [*quiet, "train.total_timesteps=1024"])), first)
    meta = json.loads((first / "checkpoint" / "meta.json").read_text())
    assert meta["counters"]["timesteps"] == summary["timesteps"] == 1024

    config = validate_config(apply_overrides(ppo, [*quiet, "train.total_timesteps=1536"]))
    resumed = train(config, second, resume_dir=first / "checkpoint")
    assert resumed["ended_by"] == "total_timesteps" and resumed["timesteps"] == 1536
    # two more rounds of the same number of updates each: the learner carried on from its checkpoint
    assert resumed["updates"] == summary["updates"] * 1536 // 1024
    assert [r["timesteps"] for r in rows(second)] == [1280, 1536]


def test_a_local_dqn_checkpoint_is_refused_by_ray_apex_in_plain_words(tmp_path):
    """Issue 19: resuming a local DQN checkpoint with ray_apex was refused with a message about the
    learner's replay capacity ("claims 300 records, but the replay memory holds at most 1").
    Refused before Ray starts (no Ray session needed)."""
    local = [*SMALL, "agent.learning_starts=100", "env.num_envs=1", "train.log_interval=300"]
    dqn = load_shipped_config("dqn_cartpole")
    train(validate_config(apply_overrides(dqn, [*local, "train.total_timesteps=300"])), tmp_path / "local")
    config = validate_config(apply_overrides(dqn, [*local, "train.executor=ray_apex", "train.total_timesteps=600"]))
    with pytest.raises(CheckpointError) as info:
        train(config, tmp_path / "apex", resume_dir=tmp_path / "local" / "checkpoint")
    message = str(info.value)
    assert "written by the 'local' executor and holds the agent's own replay memory" in message
    assert "Resume it with --executor local" in message and "\n" not in message
    assert not (tmp_path / "apex" / "summary.json").exists()


def test_a_shard_refuses_non_finite_replay_from_its_snapshot_or_a_checkpoint(tmp_path):
    """Issue 35: a replay shard loaded NaN records (snapshot or checkpoint attachment) that an agent's
    checkpoint refuses; observations pass only under ``env.allow_nonfinite_obs`` (in-process, no Ray)."""
    import numpy as np

    from rlgraph_core.checkpoint import save_arrays
    from rlgraph_core.spaces import Discrete, FloatBox
    from rlgraph_ray.actors import ReplayShard

    records = {"obs": FloatBox(shape=(3,)), "actions": Discrete(2), "rewards": FloatBox(shape=())}
    specs = {k: v.to_json() for k, v in records.items()}
    memory = {"type": "replay", "capacity": 64}
    snap = str(tmp_path / "shard-0")
    source = ReplayShard(memory, 0, snapshot_dir=snap, snapshot_interval=1, record_spaces=specs)
    rng = np.random.default_rng(0)
    source.add(
        {
            "obs": rng.normal(size=(8, 3)).astype(np.float32),
            "actions": rng.integers(0, 2, 8),
            "rewards": np.r_[np.zeros(7), np.nan].astype(np.float32),
        }
    )  # a NaN reward reached the shard (workers check rewards; this batch skipped them)
    assert "NonFiniteError" in source.counts()["snapshot_error"]  # not written: the snapshot is still empty
    state, _ = source.state()
    save_arrays(snap, state, {"inserted": 8})  # a snapshot written by something else than rlgraph
    with pytest.raises(CheckpointError, match=r"Replay snapshot .*'data/rewards'.*Nothing was loaded"):
        ReplayShard(memory, 0, snapshot_dir=snap, record_spaces=specs, restore=True)
    target = ReplayShard(memory, 0, record_spaces=specs)
    with pytest.raises(CheckpointError, match=r"replay shard 0 cannot be loaded.*'data/rewards'"):
        target.restore(state, 8)
    assert target.size() == 0
    state["data/rewards"] = np.zeros(8, np.float32)
    state["data/obs"][2] = np.inf
    with pytest.raises(CheckpointError, match="'data/obs'"):
        target.restore(state, 8)
    allowing = ReplayShard(memory, 0, record_spaces=specs, allow_nonfinite_obs=True)
    assert allowing.restore(state, 8) == 8
