"""Every distributed metric the Ray executors promise is written, and makes sense: env frames/s,
learner updates/s, sample throughput per worker, weight staleness, replay fill per shard (ray_apex),
worker restarts and samples lost, plus the published and per-worker weights versions."""

from __future__ import annotations

import importlib.util
import json

import pytest

pytest.importorskip("ray")

from rlgraph_core.assemble import train  # noqa: E402
from rlgraph_core.config.run import apply_overrides, load_shipped_config, validate_config  # noqa: E402

QUIET = ["train.progress_bar=false", "train.loggers=[jsonl]", "train.eval_interval=100000"]


def rows_of(out_dir) -> list[dict]:
    return [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]


def check_common(rows: list[dict], summary: dict, num_workers: int) -> None:
    """What both executors write in every row and in the summary."""
    assert rows and summary["num_workers"] == num_workers
    for row in rows:
        assert row["env_steps_per_s"] > 0 and row["updates_per_s"] >= 0
        assert row["worker_restarts"] == 0 and row["samples_lost"] == 0
        published = row["weights_version_published"]
        assert published is not None and 0 <= published <= summary["updates"]
        for i in range(num_workers):
            rate, version = row[f"worker_{i}_samples_per_s"], row[f"worker_{i}_weights_version"]
            assert rate is None or rate > 0
            assert version is None or 0 <= version <= published  # workers act with published weights
        assert row["staleness"] is None or row["staleness"] >= 0  # learner version minus acting version
    for i in range(num_workers):  # every worker reported its throughput at least once
        assert any(row[f"worker_{i}_samples_per_s"] for row in rows)
    assert rows[-1]["updates_per_s"] > 0
    assert [r["weights_version_published"] for r in rows] == sorted(r["weights_version_published"] for r in rows)
    assert summary["worker_restarts"] == 0 and summary["samples_lost"] == 0
    assert summary["env_steps_per_s"] > 0 and summary["updates_per_s"] > 0


def test_ray_sync_writes_the_distributed_metrics(ray_session, tmp_path):
    # With tensorboardX installed the tensorboard logger runs too: only the driver writes events.
    tensorboard = importlib.util.find_spec("tensorboardX") is not None
    loggers = ["train.loggers=[jsonl,tensorboard]"] if tensorboard else []
    raw = apply_overrides(
        load_shipped_config("ppo_cartpole_ray"),
        [*QUIET, *loggers, "train.total_timesteps=1024", "train.log_interval=256", "agent.n_epochs=2"],
    )
    summary = train(validate_config(raw), tmp_path)
    rows = rows_of(tmp_path)
    check_common(rows, summary, 2)
    if tensorboard:
        from tensorboardX.proto.event_pb2 import Event

        (events,) = (tmp_path / "tensorboard").glob("events.out.tfevents.*")
        data, pos, steps = events.read_bytes(), 0, []
        while pos < len(data):  # TFRecord framing: u64 length, u32 crc, payload, u32 crc
            length = int.from_bytes(data[pos : pos + 8], "little")
            event = Event.FromString(data[pos + 12 : pos + 12 + length])
            pos += 16 + length
            steps += [event.step for v in event.summary.value if v.tag == "worker_0_samples_per_s"]
        assert steps == [r["timesteps"] for r in rows if r["worker_0_samples_per_s"] is not None]
    assert len(rows) >= 3
    for row in rows:  # synchronous: every worker samples every round, with the newest weights
        assert row["staleness"] == 0.0
        assert row["worker_0_samples_per_s"] > 0 and row["worker_1_samples_per_s"] > 0
        assert row["worker_0_weights_version"] == row["worker_1_weights_version"] == row["weights_version_published"]


def test_ray_apex_writes_the_distributed_metrics_and_fills_each_shard_up_to_its_share(ray_session, tmp_path):
    capacity, shards = 1000, 2
    raw = apply_overrides(
        load_shipped_config("apex_cartpole"),
        [
            *QUIET,
            "agent.network.hidden=[32]",
            "agent.learning_starts=500",
            "agent.gradient_steps=16",
            f"agent.memory.capacity={capacity}",
            f"executor.num_replay_shards={shards}",
            "executor.weight_sync_interval=8",
            "train.total_timesteps=3000",
            "train.log_interval=500",
        ],
    )
    summary = train(validate_config(raw), tmp_path)
    rows = rows_of(tmp_path)
    check_common(rows, summary, 2)
    sizes = []
    for row in rows:
        fills = [row[f"replay_fill_shard_{k}"] for k in range(shards)]
        assert all(0 <= f <= capacity // shards for f in fills)  # a shard holds capacity / K
        assert sum(fills) == row["replay_size"]
        sizes.append(row["replay_size"])
    assert sizes == sorted(sizes)
    # 3000 env steps (n-step folded) are more than the memory holds: both shards end full
    last = rows[-1]
    assert [last[f"replay_fill_shard_{k}"] for k in range(shards)] == [capacity // shards] * shards
    learned = [r for r in rows if r["updates_per_s"] > 0]
    assert learned and all(r["staleness"] is not None and r["staleness"] >= 0 for r in learned)
    # issue 19: 'staleness' is the workers' policy lag, 'replay_age' how old the sampled records
    # are (it measured the latter, ~100x larger); the epsilons are the workers' Ape-X ones
    for r in learned:
        acting = [r[f"worker_{i}_weights_version"] for i in range(2) if r[f"worker_{i}_weights_version"] is not None]
        assert r["staleness"] <= r["weights_version_published"] - min(acting) + 8 * 16
        assert r["replay_age"] is not None and r["replay_age"] >= 0
    assert last["epsilon"] is None and last["worker_0_epsilon"] == 0.4 and last["worker_1_epsilon"] == 0.4**8
