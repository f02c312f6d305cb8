"""The ``rlgraph`` command line on the torch backend: plugins, config, graph, train, evaluate,
resume, and clean exit-2 errors for user mistakes.

Commands run in-process through :func:`rlgraph_core.cli.main`; one test runs the installed
``rlgraph`` script in a subprocess. One short training run is shared by the tests that need
its output folder.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from cli_helpers import assert_user_error, run_cli  # noqa: E402
from rlgraph_core.config.run import DEFAULT_CONFIG, validate_config
from rlgraph_core.plugins import get_plugin_manager

if "torch" not in get_plugin_manager().names("backends"):
    pytest.skip("the torch backend (rlgraph-torch) is not installed", allow_module_level=True)


#: Small and fast, but still a real run: updates start at step 200, two evaluations.
FAST = [
    "--set",
    "agent.network.hidden=[16]",
    "--set",
    "agent.learning_starts=200",
    "--set",
    "agent.train_freq=50",
    "--set",
    "agent.gradient_steps=2",
    "--set",
    "agent.batch_size=32",
    "--set",
    "agent.memory.capacity=5000",
    "--set",
    "train.log_interval=1000",
]
METRIC_KEYS = {
    "timesteps",
    "wall_time",
    "episode_return_mean",
    "eval_return_mean",
    "env_steps_per_s",
    "updates_per_s",
    "loss",
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """``rlgraph train`` for 2000 steps with two evaluations; returns (out dir, stdout)."""
    out = tmp_path_factory.mktemp("run") / "out"
    code, stdout, stderr = run_cli(
        "train",
        "--set",
        "train.total_timesteps=2000",
        "--set",
        "train.eval_interval=1000",
        "--set",
        "train.eval_episodes=2",
        *FAST,
        "--no-progress",
        "--out",
        str(out),
    )
    assert code == 0, stderr
    return out, stdout


# --------------------------------------------------------------------------- inspection commands
def test_plugins_lists_builtins_with_their_distributions():
    code, out, _ = run_cli("plugins")
    assert code == 0
    listed, kind = {}, None
    for line in out.splitlines():
        if not line.startswith(" "):
            kind = line.rstrip(":")
            continue
        if kind == "failed to load":  # plugins that failed to import: name, distribution, error
            continue
        name, dist, _version, *note = line.split()
        listed[(kind, name)] = dist
        if kind == "components" and name in ("mlp", "epsilon_greedy"):  # slot components say their slot
            assert " ".join(note) == {"mlp": "[network slot]", "epsilon_greedy": "[exploration slot]"}[name], line
        elif kind != "components":
            assert not note, line
    assert listed[("backends", "torch")] == "rlgraph-torch"
    assert listed[("agents", "dqn")] == "rlgraph-core"
    assert listed[("executors", "local")] == "rlgraph-core"
    assert listed[("memories", "replay")] == "rlgraph-core"
    assert listed[("memories", "prioritized_replay")] == "rlgraph-core"
    assert listed[("loggers", "jsonl")] == "rlgraph-core"


def test_config_prints_the_default_config_as_yaml():
    code, out, _ = run_cli("config")
    assert code == 0
    assert yaml.safe_load(out) == validate_config(DEFAULT_CONFIG).to_dict()


def test_config_applies_flags_and_overrides():
    code, out, _ = run_cli("config", "--mode", "static", "--seed", "3", "--set", "agent.memory.type=prioritized_replay")
    assert code == 0
    printed = yaml.safe_load(out)
    assert printed["train"]["mode"] == "static" and printed["train"]["seed"] == 3
    assert printed["agent"]["memory"]["type"] == "prioritized_replay"


def test_graph_prints_the_component_tree():
    code, out, _ = run_cli("graph", "--set", "agent.network.hidden=[8]")
    assert code == 0
    first = out.splitlines()[0]
    assert "component graph of 'dqn' on torch" in first and "built in" in first
    tree = {
        line.strip().split(" (")[0]: len(line) - len(line.lstrip())
        for line in out.splitlines()[1:]
        if not line.strip().startswith(".")
    }
    assert tree["dqn"] == 0
    for child in ("policy", "target", "dqn_loss", "epsilon_greedy", "target_sync"):
        assert tree[child] == 2, out
    assert "dense_0" in tree and tree["dense_0"] > tree["policy"]
    assert "[40 params]" in out  # 4 inputs x 8 units + 8 biases


# --------------------------------------------------------------------------- train / evaluate / resume
def test_train_writes_metrics_plot_checkpoint_and_summary(trained):
    out, stdout = trained
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["timesteps"] for r in rows] == [1000, 2000]
    # updates: 2 gradient steps every 50 env steps from step 200 on (FAST)
    assert [r["updates"] for r in rows] == [2 * ((t - 200) // 50 + 1) for t in (1000, 2000)]
    previous = {"timesteps": 0, "updates": 0, "wall_time": 0.0}
    for row in rows:
        assert METRIC_KEYS <= row.keys(), METRIC_KEYS - row.keys()
        assert row["loss"] is not None and np.isfinite(row["loss"])
        # the rates are those of the interval since the previous row, not of the whole run
        interval = row["wall_time"] - previous["wall_time"]
        assert row["env_steps_per_s"] == pytest.approx((row["timesteps"] - previous["timesteps"]) / interval, rel=1e-6)
        assert row["updates_per_s"] == pytest.approx((row["updates"] - previous["updates"]) / interval, rel=1e-6)
        previous = row
    assert (out / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    files = {"meta.json", "config.json", "weights.npz", "state.npz", "env_runner.npz"}  # + the episodes in progress
    assert {p.name for p in (out / "checkpoint").iterdir()} == files
    summary = json.loads((out / "summary.json").read_text())
    assert summary["timesteps"] == 2000 and summary["updates"] == rows[-1]["updates"]
    assert summary["eval_return_mean"] == rows[-1]["eval_return_mean"]  # the last evaluation (checked
    # against the checkpoint in test_evaluate_prints_the_mean_return_of_the_checkpoint)
    assert summary["checkpoint"] == str(out / "checkpoint")
    assert "done: 2000 steps" in stdout


def test_evaluate_prints_the_mean_return_of_the_checkpoint(trained):
    out, _ = trained
    code, stdout, stderr = run_cli("evaluate", str(out / "checkpoint"), "--episodes", "2")
    assert code == 0, stderr
    match = re.search(r"mean return (-?\d+\.\d) ± (\d+\.\d) over 2 episodes", stdout)
    assert match, stdout
    # the same number as evaluating the checkpoint by hand with the default seeds
    from rlgraph_core.checkpoint import read_meta
    from rlgraph_core.evaluation import evaluate_policy
    from rlgraph_core.assemble import make_agent
    from rlgraph_core.envs import make_eval_env

    config = validate_config(read_meta(out / "checkpoint")[1])
    env = make_eval_env(config.env)
    agent = make_agent(config, env.observation_space, env.action_space)
    agent.load(out / "checkpoint")
    expected = evaluate_policy(lambda o: agent.act(o, explore=False), env, 2, 10_000 + config.train.seed)
    assert float(match.group(1)) == pytest.approx(expected["eval_return_mean"], abs=0.05)
    # the training run evaluated these final weights the same way at its last step
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["eval_return_mean"] == pytest.approx(expected["eval_return_mean"])


def test_evaluate_of_a_run_folder_evaluates_its_newest_checkpoint(trained):
    """``rlgraph evaluate RUN`` means RUN's newest checkpoint, as ``--resume RUN`` does (before, it was
    refused: the run folder has no meta.json of its own)."""
    out, _ = trained
    code, by_run, stderr = run_cli("evaluate", str(out), "--episodes", "2")
    assert code == 0, stderr
    assert f"using its newest checkpoint {out / 'checkpoint'}" in stderr
    code, by_checkpoint, stderr = run_cli("evaluate", str(out / "checkpoint"), "--episodes", "2")
    assert code == 0, stderr
    assert by_run == by_checkpoint and "mean return" in by_run


def test_evaluate_of_a_folder_without_any_checkpoint_is_refused(tmp_path):
    code, _, stderr = run_cli("evaluate", str(tmp_path), "--episodes", "1")
    assert_user_error(code, stderr, "is neither a checkpoint (a folder with meta.json) nor a run folder holding one")


def test_a_checkpoint_without_counters_evaluates_with_a_warning_but_is_not_resumed(trained, tmp_path):
    """Issue 8 item 7: such a checkpoint resumed silently from step 0."""
    out, _ = trained
    ck = tmp_path / "ck"
    shutil.copytree(out / "checkpoint", ck)  # follows the link: a plain folder
    meta = json.loads((ck / "meta.json").read_text())
    del meta["counters"]
    (ck / "meta.json").write_text(json.dumps(meta))
    code, stdout, stderr = run_cli("evaluate", str(ck), "--episodes", "1")
    assert code == 0, stderr
    assert "mean return" in stdout
    # the command prints rlgraph's warnings as one line each (issue 35 §5)
    assert "rlgraph: warning:" in stderr and "evaluation only" in stderr, stderr
    code, _, stderr = run_cli("train", "--resume", str(ck), "--no-progress", "--out", str(tmp_path / "o"))
    assert_user_error(code, stderr, "cannot be resumed from", "no 'counters'")


def test_a_checkpoint_of_an_executor_not_installed_here_evaluates_locally(trained, tmp_path):
    """A run trained on Ray workers evaluates where rlgraph-ray is not installed: evaluation plays in
    this process, so the stored executor (here a name no plugin registers) is replaced by local."""
    out, _ = trained
    ck = tmp_path / "ck"
    shutil.copytree(out / "checkpoint", ck)
    config = json.loads((ck / "config.json").read_text())
    config["train"]["executor"] = "executor_not_installed_here"
    config["executor"] = {"num_workers": 2}
    (ck / "config.json").write_text(json.dumps(config))
    code, stdout, stderr = run_cli("evaluate", str(ck), "--episodes", "2")
    assert code == 0, stderr
    _, expected, _ = run_cli("evaluate", str(out / "checkpoint"), "--episodes", "2")
    assert stdout.replace(str(ck), "CK") == expected.replace(str(out / "checkpoint"), "CK")
    code, _, stderr = run_cli("train", "--resume", str(ck), "--no-progress", "--out", str(tmp_path / "o"))
    assert_user_error(code, stderr, "executor_not_installed_here")  # training still needs its executor


def test_evaluate_render_to_png(trained, tmp_path):
    out, _ = trained
    png = tmp_path / "x.png"
    code, stdout, stderr = run_cli("evaluate", str(out / "checkpoint"), "--episodes", "1", "--render-to", str(png))
    if importlib.util.find_spec("pygame") is None:
        # CartPole renders with pygame (gymnasium[classic-control]); without it: a clear error.
        assert_user_error(code, stderr, "--render-to", "CartPole-v1", "pygame")
        assert not png.exists()
        return
    assert code == 0, stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "rendered" in stdout


def test_resume_continues_from_the_checkpoint(trained, tmp_path):
    out, _ = trained
    first = np.load(out / "checkpoint" / "state.npz", allow_pickle=False)
    first_updates = json.loads((out / "summary.json").read_text())["updates"]
    out2 = tmp_path / "resumed"
    code, stdout, stderr = run_cli(
        "train",
        "--resume",
        str(out / "checkpoint"),
        "--set",
        "train.total_timesteps=3000",
        "--no-progress",
        "--out",
        str(out2),
    )
    assert code == 0, stderr
    rows = [json.loads(line) for line in (out2 / "metrics.jsonl").read_text().splitlines()]
    assert [r["timesteps"] for r in rows] == [3000]  # continued at 2000, not from scratch
    summary = json.loads((out2 / "summary.json").read_text())
    assert summary["timesteps"] == 3000 and summary["updates"] > first_updates
    second = np.load(out2 / "checkpoint" / "state.npz", allow_pickle=False)
    # one transition per step (n_step=1): the resumed memory kept its 2000 and added 1000
    assert int(first["memory/size"]) == 2000 and int(second["memory/size"]) == 3000
    meta = json.loads((out2 / "checkpoint" / "meta.json").read_text())
    assert meta["counters"]["timesteps"] == 3000


# --------------------------------------------------------------------------- user mistakes
def test_bad_config_file_exits_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("agent: {type: dqn\n")
    code, _, stderr = run_cli("train", str(bad), "--no-progress", "--out", str(tmp_path / "o"))
    assert_user_error(code, stderr, str(bad), "not valid YAML")
    assert not (tmp_path / "o").exists()


def test_bad_set_exits_2(tmp_path):
    code, _, stderr = run_cli("train", "--set", "agent.gama=0.9", "--no-progress", "--out", str(tmp_path / "o"))
    assert_user_error(code, stderr, "agent.gama", "did you mean 'gamma'")
    code, _, stderr = run_cli("config", "--set", "agent.gamma")
    assert_user_error(code, stderr, "key.path=value")


def test_unknown_backend_exits_2():
    code, _, stderr = run_cli("config", "--backend", "jaxx")
    assert_user_error(code, stderr, "train.backend", "'jaxx'", "torch")


def test_missing_checkpoint_exits_2(tmp_path):
    code, _, stderr = run_cli("evaluate", str(tmp_path / "nope"))
    assert_user_error(code, stderr, "does not exist")


def test_config_and_resume_together_exit_2(trained, tmp_path):
    out, _ = trained
    cfg = tmp_path / "c.yaml"
    cfg.write_text("{}")
    code, _, stderr = run_cli("train", str(cfg), "--resume", str(out / "checkpoint"), "--out", str(tmp_path / "o"))
    assert_user_error(code, stderr, "either a CONFIG or --resume")


def test_installed_script_exits_2_on_a_bad_config_file(tmp_path):
    script = shutil.which("rlgraph", path=str(Path(sys.executable).parent)) or shutil.which("rlgraph")
    if script is None:
        pytest.skip("the 'rlgraph' console script is not on PATH (rlgraph-core not pip-installed)")
    bad = tmp_path / "bad.json"
    bad.write_text('{"agent": {"type": "dqn",}}')
    proc = subprocess.run(
        [script, "train", str(bad), "--no-progress", "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    message = assert_user_error(proc.returncode, proc.stderr, str(bad), "not valid JSON")
    assert message.startswith("rlgraph: error: Config file ")
    assert proc.stdout == "" and not (tmp_path / "o").exists()


def test_a_misspelled_shipped_config_gets_a_did_you_mean():
    code, _, stderr = run_cli("train", "ppo_cartpol", "--dry-run")
    assert_user_error(code, stderr, "ppo_cartpol", "Did you mean the shipped config 'ppo_cartpole'?")


def test_resume_with_a_raised_budget_trains_on_past_the_target_and_carries_wall_time(tmp_path):
    """A run that stopped at its target trains on when resumed with a raised budget."""
    out = tmp_path / "out"
    base = [*FAST, "--set", "train.eval_interval=500", "--set", "train.eval_episodes=1", "--no-progress"]
    code, stdout, _ = run_cli(
        "train", "--out", str(out), *base, "--set", "train.target_return=0", "--set", "train.total_timesteps=5000"
    )
    first = json.loads((out / "summary.json").read_text())
    assert code == 0 and first["ended_by"] == "target_return" and first["timesteps"] == 500
    assert "ended because the evaluation return" in stdout and "reached train.target_return 0.0" in stdout
    code, stdout, _ = run_cli("train", "--resume", str(out), "--set", "train.total_timesteps=1000", "--no-progress")
    second = json.loads((out / "summary.json").read_text())
    assert code == 0 and second["ended_by"] == "total_timesteps" and second["timesteps"] == 1000
    assert "ended because the budget of train.total_timesteps was used up" in stdout
    assert second["wall_time"] > first["wall_time"] and second["session_wall_time"] < second["wall_time"]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["timesteps"] for r in rows] == [500, 1000] and rows[1]["wall_time"] > rows[0]["wall_time"]


def test_a_checkpoint_never_imports_an_env_module_from_the_current_folder(tmp_path, monkeypatch):
    """Issue 35: evaluating a checkpoint imported the module its config.json's env.id named from the
    current folder, so a copied checkpoint could run code. Now only with consent."""
    import rlgraph_core

    path = tmp_path / "ckpt"
    rlgraph_core.make("dqn", env="CartPole-v1", network={"hidden": [8]}).save(path)
    config = json.loads((path / "config.json").read_text())
    config["env"]["id"] = "evil_env_mod:CartPoleEnv"
    (path / "config.json").write_text(json.dumps(config))
    marker = tmp_path / "ran"
    (tmp_path / "evil_env_mod.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nfrom gymnasium.envs.classic_control import CartPoleEnv\n"
    )
    monkeypatch.chdir(tmp_path)
    for command in (["evaluate", str(path), "--episodes", "1"], ["export", str(path), "--out", "p.onnx"],
                    ["train", "--resume", str(path), "--out", "o"]):  # fmt: skip
        code, _, stderr = run_cli(*command)
        assert_user_error(code, stderr, "evil_env_mod", "current folder", "inert", "--trust-env-module")
        assert not marker.exists(), command
    with pytest.raises(rlgraph_core.ConfigError, match="inert"):
        rlgraph_core.load(path)
    assert not marker.exists()
    code, stdout, stderr = run_cli("evaluate", str(path), "--episodes", "1", "--trust-env-module")
    assert code == 0, stderr
    assert marker.exists() and "mean return" in stdout
