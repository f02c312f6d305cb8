"""ray_sync / ray_apex settings, plugin registration and shipped configs (no Ray session needed)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import rlgraph_ray
from rlgraph_core.assemble import train
from rlgraph_core.config.run import apply_overrides, load_shipped_config, validate_config
from rlgraph_core.errors import ConfigError
from rlgraph_ray.settings import RayApexSettings, RaySyncSettings

PPO = load_shipped_config("ppo_cartpole_ray")
APEX = load_shipped_config("apex_cartpole")


def error(raw: dict, *overrides: str) -> str:
    with pytest.raises(ConfigError) as exc:
        validate_config(apply_overrides(raw, list(overrides)))
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("name", ["ppo_cartpole_ray", "apex_cartpole"])
def test_shipped_ray_configs_validate(name):
    config = validate_config(load_shipped_config(name))
    assert config.train.executor in ("ray_sync", "ray_apex")
    assert isinstance(config.executor, (RaySyncSettings, RayApexSettings))
    assert config.to_dict()["executor"]["num_workers"] == 2


def test_settings_errors_name_the_field_and_value():
    msg = error(PPO, "executor.num_workers=0")
    assert "'executor.num_workers' = 0" in msg and "greater than 0" in msg and "ray_sync" in msg
    msg = error(PPO, "executor.num_cpus_per_worker=0")
    assert "'executor.num_cpus_per_worker' = 0" in msg
    msg = error(PPO, "executor.num_wrkers=3")
    assert "'executor.num_wrkers' is not a known field" in msg and "did you mean 'num_workers'?" in msg
    msg = error(PPO, "executor.address='http://x'")
    assert "'executor.address'" in msg and "unknown Ray address" in msg
    msg = error(PPO, "executor.fragment_length=64")
    assert "'executor.fragment_length' = 64 differs from 'agent.n_steps' = 32" in msg
    msg = error(PPO, "executor.num_workers=3")
    assert "'env.num_envs' = 8 cannot be split evenly" in msg
    msg = error(APEX, "executor.epsilon=1.5")
    assert "'executor.epsilon' = 1.5" in msg
    msg = error(APEX, "executor.num_replay_shards=10000")
    assert "shards of 10 records, fewer than agent.batch_size = 64" in msg
    for addr in ("auto", "127.0.0.1:6379", "ray://head:10001", "local"):
        assert validate_config(apply_overrides(PPO, [f"executor.address={addr}"])).executor.address == addr


def test_worker_backend_and_mode_are_checked(tmp_path):
    msg = error(PPO, "executor.worker_mode=fast")
    assert "'executor.worker_mode' = \"fast\"" in msg and "'eager' or 'static'" in msg
    config = validate_config(apply_overrides(PPO, ["executor.worker_backend=tourch", "train.progress_bar=false"]))
    with pytest.raises(ConfigError) as exc:  # the backend name is checked by the executor, before Ray starts
        train(config, tmp_path)
    msg = str(exc.value)
    assert "executor.worker_backend" in msg and "'tourch'" in msg and "torch" in msg and "\n" not in msg


def test_executors_refuse_agents_they_cannot_run():
    msg = error(APEX, "train.executor=ray_sync", "executor={}")
    assert "ray_sync" in msg and "agent.type 'dqn'" in msg and "ray_apex" in msg
    msg = error(PPO, "train.executor=ray_apex", "executor={}")
    assert "ray_apex" in msg and "agent.type 'ppo'" in msg


def test_ape_x_refuses_an_exploration_other_than_epsilon_greedy():
    from typing import Literal

    from rlgraph_core.components.exploration import EpsilonGreedy
    from rlgraph_core.components.settings import ExplorationSettings
    from rlgraph_core.plugins import PluginManager, hookimpl

    class SoftSettings(ExplorationSettings):
        type: Literal["soft"] = "soft"

    class SoftPlugin:
        @hookimpl
        def rlgraph_components(self):
            return {"soft": (EpsilonGreedy, SoftSettings)}

    pm = PluginManager()
    pm.register(SoftPlugin(), "soft-test", name="soft-test")
    with pytest.raises(ConfigError, match=r"'agent\.exploration\.type' = 'soft': ray_apex .*epsilon_greedy"):
        validate_config(apply_overrides(APEX, ["agent.exploration=soft"]), pm)
    assert validate_config(apply_overrides(APEX, ["agent.exploration=0.2"]), pm).agent.exploration.epsilon == 0.2


def test_ape_x_worker_epsilons():
    settings = RayApexSettings(num_workers=4, epsilon=0.4, epsilon_alpha=7)
    eps = [settings.worker_epsilon(i) for i in range(4)]
    assert eps[0] == pytest.approx(0.4) and eps[-1] == pytest.approx(0.4**8)
    assert eps == sorted(eps, reverse=True)
    assert RayApexSettings(num_workers=1).worker_epsilon(0) == pytest.approx(0.4)


def test_plugin_listing_shows_the_executors_without_importing_ray():
    code = (
        "import sys; from rlgraph_core.cli import main; main(['plugins']); "
        "from rlgraph_core.config.run import load_shipped_config, validate_config; "
        "validate_config(load_shipped_config('apex_cartpole')); "
        "print('RAY_IMPORTED', 'ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    for name in ("ray_sync", "ray_apex"):
        assert "rlgraph-ray" in lines[name]
    assert "RAY_IMPORTED False" in out


def test_only_the_worker_entry_point_looks_names_up():
    """Executors and actors get everything from an Assembly; a worker process's entry point assembles."""
    root = Path(rlgraph_ray.__file__).parent
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if path.name in ("worker_entry.py",):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
            if name == "get_plugin_manager":
                offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders


def test_ray_sync_takes_a_recurrent_network_whose_sequences_tile_the_rollout():
    """Issue 31: ray_sync runs recurrent PPO and A2C (the shipped LSTM config validates); a seq_len
    that does not divide n_steps is refused by the agent's own check, naming both."""
    config = validate_config(load_shipped_config("ppo_lstm_cartpole_nov"))
    RaySyncSettings().validate_run(config.agent, config.env, config.train)
    with pytest.raises(ConfigError, match="'agent.network.seq_len' = 24 does not divide 'agent.n_steps' = 64"):
        validate_config(
            apply_overrides(
                load_shipped_config("ppo_lstm_cartpole_nov"), ["train.executor=ray_sync", "agent.network.seq_len=24"]
            )
        )
