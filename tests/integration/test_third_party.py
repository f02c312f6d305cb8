"""The third-party path: ``plugins/rlgraph-example-components``, installed like any outside
package, adds a memory (``fifo_replay``) and a logger (``csv``) that configs, the CLI and
checkpoints use with no change to rlgraph itself.

The test session installs the plugin (``pip install -e plugins/rlgraph-example-components``);
where it is not installed these tests skip.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip(
    "rlgraph_example_components",
    reason="the example plugin is not installed: pip install -e plugins/rlgraph-example-components",
)

from rlgraph_core.cli import main  # noqa: E402
from rlgraph_core.errors import ConfigError  # noqa: E402
from rlgraph_core.config.memory import make_memory, validate_memory_settings  # noqa: E402
from rlgraph_core.plugins import LazyObject, get_plugin_manager  # noqa: E402
from rlgraph_example_components import CsvLogger, FifoReplay, FifoReplaySettings  # noqa: E402

DIST = "rlgraph-example-components"


def run_cli(*argv: str) -> tuple[int, str, str]:
    """``rlgraph ARGV`` in-process; returns (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def records(start: int, n: int) -> dict[str, np.ndarray]:
    """Records whose fields encode their insertion number ``start .. start+n-1``."""
    ids = np.arange(start, start + n)
    return {
        "obs": np.repeat(ids[:, None], 3, axis=1).astype(np.float32),
        "actions": ids.astype(np.int64),
        "terminals": ids % 2 == 0,
    }


# --------------------------------------------------------------------------- registration
def test_plugin_names_are_registered_with_their_distribution():
    pm = get_plugin_manager()
    memory_class, settings_model = pm.names("memories")["fifo_replay"].obj
    assert isinstance(memory_class, LazyObject) and memory_class.resolve() is FifoReplay
    assert settings_model is FifoReplaySettings
    assert pm.names("memories")["fifo_replay"].distribution == DIST
    assert pm.names("memories")["fifo_replay"].plugin == "example-components"  # its entry-point name
    assert "fifo_replay" not in pm.names("components")
    assert pm.names("loggers")["csv"].obj is CsvLogger
    assert pm.names("loggers")["csv"].distribution == DIST
    assert not [f for f in pm.failed if f.distribution == DIST]


def plugin_sections(out: str) -> dict[str, set[tuple[str, str]]]:
    """``rlgraph plugins`` output as {section: {(name, distribution), ...}}."""
    found: dict[str, set[tuple[str, str]]] = {}
    for line in out.splitlines():
        if not line.startswith(" "):
            section = found.setdefault(line.rstrip(":"), set())
        elif not line.strip().startswith("!"):
            section.add(tuple(line.split()[:2]))
    return found


def test_rlgraph_plugins_lists_them():
    code, out, _ = run_cli("plugins")
    assert code == 0
    lines = {tuple(line.split()[:2]) for line in out.splitlines() if line.startswith("  ")}
    assert ("fifo_replay", DIST) in lines
    assert ("csv", DIST) in lines
    assert ("replay", "rlgraph-core") in lines  # the built-ins are still there
    found = plugin_sections(out)
    assert ("fifo_replay", DIST) in found["memories"] and ("example-components", DIST) in found["plugins"]
    assert "blocked" not in found


def test_disable_plugins_flag_blocks_the_plugin():
    code, out, _ = run_cli("--disable-plugins", "example-components", "plugins")
    assert code == 0
    found = plugin_sections(out)
    assert ("fifo_replay", DIST) not in found["memories"] and ("csv", DIST) not in found["loggers"]
    assert ("replay", "rlgraph-core") in found["memories"]
    assert found["blocked"] == {("example-components", DIST)}
    # a config naming a blocked plugin's memory says so
    code, _, err = run_cli(
        "--disable-plugins",
        "example-components",
        "config",
        "--set",
        "agent.memory.type=fifo_replay",
        "--backend",
        "torch",
    )
    assert code == 2 and "Unknown memory 'fifo_replay'" in err and "example-components" in err
    # the flag only lasts for that command
    assert "fifo_replay" in get_plugin_manager().names("memories")


def test_disable_plugins_env_var_blocks_the_plugin(monkeypatch):
    monkeypatch.setenv("RLGRAPH_DISABLE_PLUGINS", DIST)  # a distribution name works too
    code, out, _ = run_cli("plugins")
    assert code == 0
    assert plugin_sections(out)["blocked"] == {("example-components", DIST)}
    assert "fifo_replay" not in get_plugin_manager().names("memories")


def test_listing_and_validating_do_not_import_the_memory():
    code = (
        "import sys; from rlgraph_core.plugins import get_plugin_manager; "
        "from rlgraph_core.config.memory import validate_memory_settings; pm = get_plugin_manager(); "
        "assert 'fifo_replay' in pm.names('memories'); "
        "validate_memory_settings(pm, {'type': 'fifo_replay', 'capacity': 100, 'window': 5}); "
        "print('rlgraph_example_components.fifo_replay' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"


# --------------------------------------------------------------------------- FifoReplaySettings
def test_fifo_replay_settings_validate_and_build_the_memory():
    pm = get_plugin_manager()
    settings = validate_memory_settings(pm, {"type": "fifo_replay", "capacity": 1000, "window": 50})
    assert isinstance(settings, FifoReplaySettings) and (settings.capacity, settings.window) == (1000, 50)
    memory = make_memory(pm, settings, seed=0)
    assert isinstance(memory, FifoReplay) and (memory.capacity, memory.window) == (1000, 50)
    assert make_memory(pm, {"type": "fifo_replay", "capacity": 1000}).window == 100  # default capacity // 10


@pytest.mark.parametrize(
    "raw, expected",
    [
        ({"window": 0}, r"'agent\.memory\.window' = 0: .*greater than or equal to 1"),
        ({"window": 2000}, r"'agent\.memory'.*window \(2000\) must not exceed capacity \(1000\)"),
        ({"windw": 5}, r"'agent\.memory\.windw' is not a known field.*did you mean 'window'.*type, capacity, window"),
        ({"alpha": 0.6}, r"'agent\.memory\.alpha' is not a known field"),
    ],
)
def test_fifo_replay_settings_refuse_bad_values_and_unknown_fields(raw, expected):
    with pytest.raises(ConfigError, match=expected):
        validate_memory_settings(get_plugin_manager(), {"type": "fifo_replay", "capacity": 1000, **raw})


# --------------------------------------------------------------------------- FifoReplay
def test_fifo_replay_has_the_memory_api():
    memory = FifoReplay(50, seed=0)
    assert FifoReplay.prioritized is False
    assert len(memory) == 0
    slots = memory.insert(records(0, 7))
    np.testing.assert_array_equal(slots, np.arange(7))
    assert len(memory) == 7
    # the default window is a tenth of the capacity: only the 5 newest of the 7 records are drawn
    assert memory.window == 5
    assert set(memory.sample(500)["actions"].tolist()) == set(range(2, 7))
    batch = memory.sample(4)
    assert set(batch) == {"obs", "actions", "terminals", "indices"}
    assert batch["obs"].shape == (4, 3) and batch["obs"].dtype == np.float32
    np.testing.assert_array_equal(batch["actions"], batch["indices"])  # slot i holds record i here


def test_fifo_replay_samples_uniformly_from_the_newest_window():
    memory = FifoReplay(100, seed=1, window=10)
    memory.insert(records(0, 6))
    early = memory.sample(500)["actions"]
    assert set(early.tolist()) == set(range(6))  # fewer than window: all records
    for start in range(6, 256, 25):  # wraps around the ring more than twice
        memory.insert(records(start, min(25, 256 - start)))
    assert len(memory) == 100
    drawn = memory.sample(5000)["actions"]
    assert set(drawn.tolist()) == set(range(246, 256))  # exactly the 10 newest
    counts = np.bincount(drawn - 246, minlength=10)
    assert counts.min() > 350 and counts.max() < 650  # ~500 each: uniform


def test_fifo_replay_with_full_window_samples_everything_stored():
    memory = FifoReplay(20, seed=2, window=20)
    memory.insert(records(0, 35))  # a batch larger than the capacity keeps its newest records
    assert len(memory) == 20
    assert set(memory.sample(2000)["actions"].tolist()) == set(range(15, 35))


def test_fifo_replay_state_round_trip_through_npz_without_pickle(tmp_path):
    memory = FifoReplay(30, seed=3, window=8)
    memory.insert(records(0, 41))
    memory.sample(5)  # move the generator
    np.savez(tmp_path / "m.npz", **memory.state_dict())
    with np.load(tmp_path / "m.npz", allow_pickle=False) as data:
        restored = FifoReplay(30, seed=99, window=8)
        restored.load_state_dict(data)
    assert len(restored) == 30
    a, b = memory.sample(16), restored.sample(16)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    memory.insert(records(100, 3))
    restored.insert(records(100, 3))
    np.testing.assert_array_equal(memory.sample(9)["actions"], restored.sample(9)["actions"])


def test_fifo_replay_refuses_bad_input_and_bad_state():
    memory = FifoReplay(10, seed=0, window=4)
    with pytest.raises(RuntimeError, match="empty"):
        memory.sample(1)
    with pytest.raises(ValueError, match="reserved"):
        memory.insert({"indices": np.arange(3)})
    with pytest.raises(ValueError, match="window"):
        FifoReplay(10, window=11)
    with pytest.raises(ValueError, match="capacity"):
        FifoReplay(0)
    memory.insert(records(0, 5))
    with pytest.raises(ValueError, match="fields"):
        memory.insert({"obs": np.zeros((2, 3), np.float32)})
    other = FifoReplay(12, seed=0, window=4)
    other.insert(records(50, 2))
    with pytest.raises(ValueError, match="capacity 12"):
        memory.load_state_dict(other.state_dict())
    broken = memory.state_dict()
    broken["size"] = broken["next_index"] = np.array(4, np.int64)  # counters disagree with the data
    with pytest.raises(ValueError, match="size counter"):
        memory.load_state_dict(broken)
    assert len(memory) == 5  # unchanged by the refused loads
    assert set(memory.sample(200)["actions"].tolist()) == {1, 2, 3, 4}


# --------------------------------------------------------------------------- CsvLogger
def read_csv(path):
    """Header and rows of a CSV file."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)


def test_csv_logger_widens_its_header_and_keeps_rows_aligned(tmp_path):
    logger = CsvLogger(tmp_path / "run")
    logger.log({"timesteps": 100, "loss": None, "episode_return_mean": 12.5})
    logger.log({"timesteps": 200, "loss": 0.25, "eval_return_mean": 30.0, "hidden": [16, 16]})
    logger.close()
    header, rows = read_csv(tmp_path / "run" / "metrics.csv")
    assert header == ["timesteps", "loss", "episode_return_mean", "eval_return_mean", "hidden"]
    assert rows[0] == {
        "timesteps": "100",
        "loss": "",
        "episode_return_mean": "12.5",
        "eval_return_mean": "",
        "hidden": "",
    }
    assert rows[1]["loss"] == "0.25" and rows[1]["eval_return_mean"] == "30.0"
    assert json.loads(rows[1]["hidden"]) == [16, 16]
    # a resumed run continues the same file
    again = CsvLogger(tmp_path / "run")
    again.log({"timesteps": 300, "loss": 0.5})
    again.close()
    header, rows = read_csv(tmp_path / "run" / "metrics.csv")
    assert [r["timesteps"] for r in rows] == ["100", "200", "300"]
    assert not [p for p in (tmp_path / "run").iterdir() if p.name != "metrics.csv"]


# --------------------------------------------------------------------------- end to end
@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """Tiny networks train much faster on one thread, above all on a busy machine."""
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


CONFIG = """\
agent:
  type: dqn
  network: {hidden: [16]}
  learning_starts: 100
  train_freq: 25
  gradient_steps: 2
  batch_size: 16
  memory: {type: fifo_replay, capacity: 1000, window: 50}
  preprocessor: {type: clip_obs, bound: 0.5}
env: {id: CartPole-v1, num_envs: 1}
train:
  backend: torch
  total_timesteps: 400
  eval_interval: 200
  eval_episodes: 1
  log_interval: 100
  loggers: [console, jsonl, csv]
  progress_bar: false
"""


def test_config_with_plugin_names_validates_and_trains_dqn(tmp_path):
    if "torch" not in get_plugin_manager().names("backends"):
        pytest.skip("the torch backend (rlgraph-torch) is not installed")
    from rlgraph_core.checkpoint import read_meta
    from rlgraph_core.config.run import load_config_file, validate_config
    from rlgraph_core.assemble import make_agent
    from rlgraph_core.envs import make_eval_env

    path = tmp_path / "fifo.yaml"
    path.write_text(CONFIG)
    config = validate_config(load_config_file(path))
    assert config.agent.memory.type == "fifo_replay" and config.train.loggers == ["console", "jsonl", "csv"]

    out = tmp_path / "out"
    code, stdout, stderr = run_cli("train", str(path), "--out", str(out))
    assert code == 0, stderr
    jsonl = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    header, rows = read_csv(out / "metrics.csv")
    assert [int(r["timesteps"]) for r in rows] == [r["timesteps"] for r in jsonl] == [100, 200, 300, 400]
    assert {"timesteps", "loss", "eval_return_mean", "env_steps_per_s"} <= set(header)
    assert float(rows[-1]["loss"]) == pytest.approx(jsonl[-1]["loss"])
    assert float(rows[-1]["eval_return_mean"]) == pytest.approx(jsonl[-1]["eval_return_mean"])

    # the checkpoint holds the plugin memory's state, and loads back into a FifoReplay
    state = np.load(out / "checkpoint" / "state.npz", allow_pickle=False)
    assert int(state["memory/window"]) == 50 and int(state["memory/size"]) == 400
    stored = validate_config(read_meta(out / "checkpoint")[1])
    env = make_eval_env(stored.env)
    agent = make_agent(stored, env.observation_space, env.action_space)
    agent.load(out / "checkpoint")
    assert isinstance(agent.memory, FifoReplay) and len(agent.memory) == 400

    # the plugin's component fills the preprocessor slot: Q(x) = Q(clip(x, -0.5, 0.5))
    from rlgraph_example_components import ClipObservation

    assert isinstance(agent.graph.policy.preprocessor, ClipObservation)
    x = np.random.default_rng(0).uniform(-3, 3, (64, 4)).astype(np.float32)
    q = agent.backend.to_numpy(agent.graph.q_values(agent.backend.to_tensor(x)))
    q_clipped = agent.backend.to_numpy(agent.graph.q_values(agent.backend.to_tensor(np.clip(x, -0.5, 0.5))))
    np.testing.assert_array_equal(q, q_clipped)
    q_inside = agent.backend.to_numpy(agent.graph.q_values(agent.backend.to_tensor(x * 0.1)))
    assert not np.allclose(q, q_inside)  # inputs inside the bound pass through unchanged
