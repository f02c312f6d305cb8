"""The ``horovod`` executor without a launcher is one rank: it needs no Horovod and trains exactly
as the local executor does (same seeds, same loop, same outputs), so configs can be tried out
with ``rlgraph train ... --executor horovod`` before launching them on many processes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from rlgraph_core.assemble import train  # noqa: E402
from rlgraph_core.checkpoint import read_meta  # noqa: E402
from rlgraph_core.config.run import apply_overrides, load_config_file, validate_config  # noqa: E402
from rlgraph_core.errors import ConfigError  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
QUICK = [
    "train.progress_bar=false",
    "train.loggers=[jsonl]",
    "train.total_timesteps=800",
    "train.eval_interval=400",
    "train.eval_episodes=2",
    "agent.learning_starts=200",
]


def _config(executor: str, *more: str):
    raw = apply_overrides(
        load_config_file(CONFIGS / "dqn_cartpole.yaml"), [*QUICK, f"train.executor={executor}", *more]
    )
    return validate_config(raw)


def test_one_rank_without_launcher_trains_like_local(tmp_path, monkeypatch):
    for var in ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        monkeypatch.delenv(var, raising=False)
    local = train(_config("local"), tmp_path / "local")
    hvd = train(_config("horovod"), tmp_path / "hvd")
    assert hvd["ranks"] == 1 and hvd["allreduce_calls"] == 0  # one rank: the fused step, no hook
    for key in ("timesteps", "updates", "eval_return_mean", "ended_by"):
        assert hvd[key] == local[key], key
    with (
        np.load(tmp_path / "local" / "checkpoint" / "weights.npz") as a,
        np.load(tmp_path / "hvd" / "checkpoint" / "weights.npz") as b,
    ):
        assert sorted(a.files) == sorted(b.files)
        for name in a.files:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    assert read_meta(tmp_path / "hvd" / "checkpoint")[0]["counters"]["timesteps"] == local["timesteps"]
    rows = [json.loads(line) for line in (tmp_path / "hvd" / "metrics.jsonl").read_text().splitlines()]
    assert rows and all(r["ranks"] == 1 and "rank0_env_steps_per_s" in r for r in rows)


def test_settings_are_validated_and_target_kl_is_refused():
    with pytest.raises(ConfigError, match="executor.check_interval"):
        _config("horovod", "executor.check_interval=-1")
    with pytest.raises(ConfigError, match="executor.nope"):
        _config("horovod", "executor.nope=1")
    raw = apply_overrides(
        load_config_file(CONFIGS / "ppo_cartpole.yaml"),
        ["train.executor=horovod", "agent.target_kl=0.02", "train.progress_bar=false"],
    )
    with pytest.raises(ConfigError, match="agent.target_kl.*horovod executor"):
        validate_config(raw)  # refused before anything is built


def test_elastic_needs_an_elastic_launch(monkeypatch):
    """``executor.elastic`` under a plain ``horovodrun`` (no --min-np/--max-np, no discovery script)
    is refused when the config is validated, naming the launch flags; an elastic launch (which
    sets HOROVOD_ELASTIC=1) and no launcher at all (one rank) are accepted."""
    for var in ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "HOROVOD_ELASTIC"):
        monkeypatch.delenv(var, raising=False)
    assert _config("horovod", "executor.elastic=true").executor.elastic  # no launcher: one rank
    monkeypatch.setenv("HOROVOD_RANK", "0")
    with pytest.raises(ConfigError, match="not started in elastic mode.*--min-np/--max-np.*--host-discovery-script"):
        _config("horovod", "executor.elastic=true")
    assert not _config("horovod").executor.elastic  # the default needs nothing
    monkeypatch.setenv("HOROVOD_ELASTIC", "1")
    assert _config("horovod", "executor.elastic=true", "executor.commit_interval=5").executor.commit_interval == 5
    with pytest.raises(ConfigError, match="executor.commit_interval"):
        _config("horovod", "executor.elastic=true", "executor.commit_interval=0")


def test_listing_and_validating_never_import_horovod():
    """``rlgraph plugins`` shows ``horovod`` under rlgraph-horovod; validating a horovod config
    imports neither Horovod nor the executor module (it is registered lazily)."""
    import subprocess
    import sys

    code = (
        "import sys; from rlgraph_core.cli import main; "
        "from rlgraph_core.config.run import apply_overrides, load_config_file, validate_config; "
        f"validate_config(apply_overrides(load_config_file({str(CONFIGS / 'ppo_cartpole.yaml')!r}), "
        "['train.executor=horovod', 'executor.sync_interval=4'])); main(['plugins']); "
        "bad = [m for m in ('horovod', 'rlgraph_horovod.executor') if m in sys.modules]; "
        "sys.exit(f'imported {bad}') if bad else None"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.strip().startswith("horovod"))
    assert "rlgraph-horovod" in line


def test_the_rank_count_is_said_and_a_config_asking_for_more_ranks_than_launched_is_refused(
    tmp_path, monkeypatch, capsys
):
    """Issue 19: outside horovodrun, --executor horovod passed --dry-run and trained as one process without a word."""
    from rlgraph_core.cli import main

    for var in ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "HOROVOD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    args = ["train", str(CONFIGS / "dqn_cartpole.yaml"), "--executor", "horovod", "--dry-run", "--out", str(tmp_path)]
    assert main(args) == 0
    assert "processes:   1 rank: not started by horovodrun" in capsys.readouterr().out
    assert main([*args, "--set", "executor.num_ranks=2"]) == 2
    err = capsys.readouterr().err
    assert "'executor.num_ranks' = 2, but it was not started by horovodrun" in err and "horovodrun -np 2" in err
    monkeypatch.setenv("HOROVOD_RANK", "0")
    monkeypatch.setenv("HOROVOD_SIZE", "2")
    with pytest.raises(ConfigError, match="horovodrun started 2 ranks"):
        _config("horovod", "executor.num_ranks=3")


RECALL = {
    "agent": {
        "type": "ppo",
        "network": {"type": "lstm", "units": 8, "encoder": {"hidden": []}, "seq_len": 4},
        "n_steps": 16,
        "batch_size": 64,
        "n_epochs": 2,
    },
    "env": {"id": "rlgraph_core.testing.memory_env:RecallCue", "num_envs": 8},
    "train": {"eval_interval": 256, "eval_episodes": 8, "progress_bar": False, "loggers": ["jsonl"]},
}


def _assert_one_rank_equals_local(raw, steps, weight, tmp_path, monkeypatch):
    """Train ``raw`` for ``steps`` env steps with the local and the horovod executor (one rank, no
    launcher variables) and assert equal summaries and bit-identical checkpoint weights, ``weight``
    among them."""
    for var in ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        monkeypatch.delenv(var, raising=False)
    runs = {}
    for executor in ("local", "horovod"):
        config = validate_config(apply_overrides(raw, [f"train.executor={executor}", f"train.total_timesteps={steps}"]))
        runs[executor] = train(config, tmp_path / executor)
    for key in ("timesteps", "updates", "eval_return_mean"):
        assert runs["horovod"][key] == runs["local"][key], key
    assert runs["horovod"]["ranks"] == 1 and runs["local"]["updates"] > 0
    with (
        np.load(tmp_path / "local" / "checkpoint" / "weights.npz") as a,
        np.load(tmp_path / "horovod" / "checkpoint" / "weights.npz") as b,
    ):
        assert sorted(a.files) == sorted(b.files) and weight in a.files
        for name in a.files:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_a_recurrent_policy_on_one_rank_trains_exactly_as_local(tmp_path, monkeypatch):
    """Issue 31: the horovod executor runs recurrent PPO (each rank's env runner carries the state,
    its rollouts store it at sequence starts); one rank is the local run, bit for bit."""
    _assert_one_rank_equals_local(RECALL, 256, "policy/pi_core/w_h", tmp_path, monkeypatch)


def test_r2d2_with_a_cnn_lstm_on_one_rank_trains_exactly_as_local(tmp_path, monkeypatch):
    """Issue 31: R2D2 (``type: dqn``, a CNN before the LSTM) on RecallCueImage's uint8 frames through
    the horovod executor: one rank is the local run, bit for bit (each rank's sequence replay stores
    its frames once, as locally). Measured: both 1.0 after 512 env steps (50 updates)."""
    from rlgraph_core.testing.memory_env import r2d2_recall_settings

    agent = r2d2_recall_settings()
    cnn = {"type": "cnn", "preset": "custom", "conv": [{"filters": 8, "kernel": 3, "stride": 3}], "hidden": [16]}
    agent["network"]["encoder"] = cnn
    agent["learning_starts"] = 100
    raw = {
        "agent": agent,
        "env": {"id": "rlgraph_core.testing.memory_env:RecallCueImage", "num_envs": 8},
        "train": {"eval_interval": 512, "eval_episodes": 8, "progress_bar": False, "loggers": ["jsonl"]},
    }
    _assert_one_rank_equals_local(raw, 512, "policy/core/encoder/conv_0/W", tmp_path, monkeypatch)
