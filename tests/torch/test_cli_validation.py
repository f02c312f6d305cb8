"""``rlgraph train`` refuses bad input before training starts: one ``rlgraph: error:`` paragraph,
exit code 2, and nothing written; ``--dry-run`` builds everything and writes nothing; custom
environments (``module:ClassName`` / ``module:EnvId``) train from a config.

Commands run in-process through :func:`rlgraph_core.cli.main` on the torch backend.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from cli_helpers import assert_user_error, run_cli  # noqa: E402
from rlgraph_core.errors import ConfigError
from rlgraph_core.plugins import get_plugin_manager

if "torch" not in get_plugin_manager().names("backends"):
    pytest.skip("the torch backend (rlgraph-torch) is not installed", allow_module_level=True)

import torch  # noqa: E402  (after the skip: only where the backend is installed)

from rlgraph_torch.backend import TorchBackend, _resolve_device  # noqa: E402

EXAMPLE_ENV_DIR = Path(__file__).resolve().parents[2] / "examples" / "custom_env"
#: Tiny and fast: a real run would train, but every case here must stop before it does.
SMALL = ["--no-progress", "--set", "agent.network.hidden=[8]", "--set", "train.total_timesteps=300"]


def refused(tmp_path: Path, *argv: str, fragments: tuple[str, ...] = ()) -> str:
    """``rlgraph train ARGV --out tmp/out`` must exit 2 with ``fragments`` and write nothing."""
    out = tmp_path / "out"
    code, stdout, stderr = run_cli("train", *SMALL, *argv, "--out", str(out))
    message = assert_user_error(code, stderr, *fragments)
    assert "done:" not in stdout
    # (the executor may have created the folder, or a lock in it, but no run output)
    written = [p.name for p in out.iterdir() if not p.name.startswith(".")] if out.exists() else []
    assert not [n for n in written if n.startswith(("metrics", "checkpoint", "summary", "learning_curve"))], written
    return message


# --------------------------------------------------------------------------- config values
@pytest.mark.parametrize("value", ["-0.001", ".nan", ".inf", "0"])
def test_a_bad_learning_rate_is_refused_before_training(tmp_path, value):
    refused(tmp_path, "--set", f"agent.optimizer.learning_rate={value}", fragments=("agent.optimizer.learning_rate",))


def test_a_bad_learning_rate_is_refused_for_ppo_on_tf_too(tmp_path):
    if "tf" not in get_plugin_manager().names("backends"):
        pytest.skip("rlgraph-tf not installed")
    refused(
        tmp_path,
        "ppo_cartpole",
        "--backend",
        "tf",
        "--set",
        "agent.optimizer.learning_rate=.nan",
        fragments=("agent.optimizer.learning_rate", "finite"),
    )


@pytest.mark.parametrize(
    "override, fragments",
    [
        ("agent.memory.capacity=10", ("'agent.memory.capacity' = 10", "'agent.batch_size' = 64")),
        ("agent.batch_size=100000000", ("'agent.batch_size' = 100000000",)),
    ],
)
def test_a_replay_memory_smaller_than_a_batch_is_refused(tmp_path, override, fragments):
    refused(tmp_path, "--set", override, fragments=fragments)


def test_a_replay_memory_that_cannot_fit_in_memory_is_refused_before_training(tmp_path):
    msg = refused(
        tmp_path, "--set", "agent.memory.capacity=10000000000000", fragments=("agent.memory.capacity", "available")
    )
    assert "TiB" in msg and "49 bytes per record" in msg
    msg = refused(
        tmp_path,
        "--set",
        "agent.memory.capacity=10000000000000",
        "--set",
        "agent.memory.type=prioritized_replay",
        fragments=("segment trees",),
    )


@pytest.mark.parametrize("value", ["2.0", "-0.5"])
def test_epsilon_outside_0_1_is_refused(tmp_path, value):
    refused(tmp_path, "--set", f"agent.exploration={value}", fragments=("agent.exploration", "epsilon"))


# --------------------------------------------------------------------------- --out
def test_out_naming_a_file_or_a_path_under_a_file_is_refused(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    for out, fragment in ((afile, "existing file"), (afile / "sub", "not a folder")):
        code, _, stderr = run_cli("train", *SMALL, "--out", str(out))
        assert_user_error(code, stderr, "--out", str(out), fragment)
    assert afile.read_text() == "keep me"


def test_out_in_an_unwritable_place_is_refused(tmp_path):
    targets = [p for p in ("/proc/rlgraph-out", "/sys/rlgraph-out") if os.path.isdir(os.path.dirname(p))]
    if os.geteuid() != 0:  # permissions do not stop root
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        targets.append(str(locked / "run"))
    if not targets:
        pytest.skip("no unwritable folder to try")
    for target in targets:
        code, _, stderr = run_cli("train", *SMALL, "--out", target)
        assert_user_error(code, stderr, "--out", "not writable")


def test_an_impossible_out_path_is_refused(tmp_path):
    code, _, stderr = run_cli("train", *SMALL, "--out", str(tmp_path / ("x" * 300)))
    assert_user_error(code, stderr, "--out", "longer than")


# --------------------------------------------------------------------------- env kwargs
@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_env_kwargs_the_env_does_not_take_are_refused(tmp_path, vectorization):
    refused(
        tmp_path,
        "--set",
        "env.kwargs={foo: 1}",
        "--set",
        f"env.vectorization={vectorization}",
        "--set",
        "env.num_envs=2",
        fragments=("'env.id' = 'CartPole-v1'", "{'foo': 1}", "unexpected keyword argument 'foo'"),
    )


# --------------------------------------------------------------------------- devices
def test_unknown_device_names_are_refused(tmp_path):
    refused(tmp_path, "--device", "banana", fragments=("'train.device'", "banana", "cuda:N"))
    with pytest.raises(ConfigError, match="not known to the torch backend"):
        _resolve_device("tpu")


def test_a_cuda_device_that_is_not_there_is_refused(tmp_path):
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    missing = "cuda" if count == 0 else f"cuda:{count}"
    msg = refused(tmp_path, "--device", missing, fragments=("'train.device'", missing))
    assert ("sees none" in msg) if count == 0 else (f"sees {count}" in msg)
    with pytest.raises(ConfigError):
        TorchBackend(device=missing)


def test_device_names_resolve_to_torch_devices():
    assert _resolve_device("cpu") == torch.device("cpu")
    assert _resolve_device("CPU") == torch.device("cpu")
    assert _resolve_device("auto") == torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    if torch.cuda.is_available():
        assert _resolve_device("gpu") == torch.device("cuda:0")
        assert _resolve_device("cuda:0") == torch.device("cuda:0")


# --------------------------------------------------------------------------- evaluate --episodes
@pytest.mark.parametrize("episodes", ["0", "-3", "x"])
def test_evaluate_needs_at_least_one_episode(tmp_path, episodes):
    code, stdout, stderr = run_cli("evaluate", str(tmp_path), "--episodes", episodes)
    assert code == 2 and "--episodes" in stderr and "Traceback" not in stderr
    assert "nan" not in stdout


# --------------------------------------------------------------------------- action spaces
def test_dqn_on_multidiscrete_actions_says_what_dqn_supports(tmp_path, monkeypatch):
    (tmp_path / "multi_env_mod.py").write_text(
        "import gymnasium as gym\n"
        "import numpy as np\n"
        "class Multi(gym.Env):\n"
        "    def __init__(self):\n"
        "        self.observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)\n"
        "        self.action_space = gym.spaces.MultiDiscrete([3, 2])\n"
        "    def reset(self, *, seed=None, options=None):\n"
        "        super().reset(seed=seed)\n"
        "        return np.zeros(3, np.float32), {}\n"
        "    def step(self, action):\n"
        "        return np.zeros(3, np.float32), 0.0, True, False, {}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "multi_env_mod", raising=False)
    code, _, stderr = run_cli("train", *SMALL, "--dry-run", "--set", "env.id=multi_env_mod:Multi")
    msg = assert_user_error(code, stderr, "DQN supports only a single Discrete action space", "MultiDiscrete")
    assert "No built-in agent acts in this space" in msg and "Discrete(6)" in msg
    assert "continuous" not in msg


# --------------------------------------------------------------------------- dry run
def test_dry_run_builds_everything_prints_the_plan_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    code, stdout, stderr = run_cli(
        "train", "--dry-run", "--set", "agent.memory.type=prioritized_replay", "--out", str(out)
    )
    assert code == 0, stderr
    assert not out.exists()
    plan = dict(line.strip().split(":", 1) for line in stdout.splitlines()[1:] if ":" in line and line.startswith("  "))
    assert plan["agent"].strip() == "dqn (DQNAgent)"
    assert "CartPole-v1 x 1" in plan["env"] and "Discrete(2)" in plan["action space"]
    assert plan["backend"].strip() == "torch (eager, cpu)"
    assert plan["executor"].strip().startswith("local")
    assert "prioritized_replay, capacity 100000" in plan["memory"] and "MiB" in plan["memory"]
    assert "trainable" in plan["parameters"] and "ms" in plan["build"]
    assert str(out) in plan["output"] and "not written" in plan["output"]
    assert "dry run" in stdout.splitlines()[0]


def test_dry_run_reports_the_errors_a_run_would_hit(tmp_path):
    code, _, stderr = run_cli("train", "--dry-run", "--set", "env.kwargs={foo: 1}")
    assert_user_error(code, stderr, "env.kwargs", "foo")
    code, _, stderr = run_cli("train", "ppo_cartpole", "--dry-run", "--set", "env.num_envs=2")
    assert_user_error(code, stderr, "'agent.batch_size' = 256", "32 x 2 = 64")


# --------------------------------------------------------------------------- custom environments
@pytest.fixture
def in_example_env_folder(monkeypatch):
    """cwd = examples/custom_env, with ``my_env`` not yet imported (sys.path restored afterwards)."""
    monkeypatch.chdir(EXAMPLE_ENV_DIR)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(EXAMPLE_ENV_DIR))])
    sys.modules.pop("my_env", None)
    gym.registry.pop("Corridor-v0", None)
    yield
    sys.modules.pop("my_env", None)
    gym.registry.pop("Corridor-v0", None)


def test_custom_env_example_trains_evaluates_and_resumes_from_the_cli(tmp_path, in_example_env_folder):
    out = tmp_path / "corridor"
    code, stdout, stderr = run_cli(
        "train",
        "config.yaml",
        "--no-progress",
        "--set",
        "train.total_timesteps=300",
        "--set",
        "train.eval_interval=300",
        "--set",
        "train.eval_episodes=2",
        "--set",
        "agent.learning_starts=100",
        "--out",
        str(out),
    )
    assert code == 0, stderr
    assert "on my_env:Corridor" in stdout and "done: 300 steps" in stdout
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["timesteps"] == 300 and rows[-1]["updates"] > 0
    config = json.loads((out / "checkpoint" / "config.json").read_text())
    assert config["env"]["id"] == "my_env:Corridor" and config["env"]["kwargs"] == {"length": 5}
    code, stdout, stderr = run_cli("evaluate", str(out / "checkpoint"), "--episodes", "2")
    assert code == 0, stderr
    assert "my_env:Corridor" in stdout and "over 2 episodes" in stdout
    # the registered form (gymnasium's module:EnvId), in subprocess workers, and a resume check
    code, stdout, stderr = run_cli(
        "train",
        "--resume",
        str(out / "checkpoint"),
        "--dry-run",
        "--set",
        "env.id=my_env:Corridor-v0",
        "--set",
        "env.vectorization=async",
        "--set",
        "env.num_envs=2",
    )
    assert code == 0, stderr
    assert "my_env:Corridor-v0 x 2 (async)" in stdout and "loaded into the agent" in stdout
    assert np.isfinite(rows[-1]["loss"])
