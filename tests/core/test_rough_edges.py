"""Small things a new user hit: run folder names from any env id, one naming scheme for configs
across the CLI and ``rl.make``, and install hints that work from where rlgraph-core was installed."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from rlgraph_core import install_hints
from rlgraph_core.config.run import load_named_config, load_shipped_config
from rlgraph_core.errors import ConfigError
from rlgraph_core.training import default_out_dir


@pytest.mark.parametrize(
    ("env_id", "folder"),
    [
        ("ALE/Pong-v5", "dqn_ALE-Pong-v5_torch_eager"),
        ("my_env:Corridor", "dqn_my_env-Corridor_torch_eager"),
        ("CartPole-v1", "dqn_CartPole-v1_torch_eager"),
        ("a/../..:b c", "dqn_a-..-..-b-c_torch_eager"),
    ],
)
def test_the_default_run_folder_is_one_safe_folder_for_any_env_id(env_id, folder):
    config = SimpleNamespace(
        agent=SimpleNamespace(type="dqn"),
        env=SimpleNamespace(id=env_id),
        train=SimpleNamespace(backend="torch", mode="eager"),
    )
    out = default_out_dir(config)
    assert out == Path("runs") / folder and len(out.parts) == 2


def test_an_agent_name_a_shipped_config_and_a_file_are_one_naming_scheme(tmp_path):
    assert load_named_config("ppo") == {"agent": {"type": "ppo"}}
    assert load_named_config("ppo_cartpole") == load_shipped_config("ppo_cartpole")
    path = tmp_path / "ppo"  # a file of that name wins, as a path given on the command line does
    path.write_text("agent: {type: dqn}\n")
    assert load_named_config(str(path)) == {"agent": {"type": "dqn"}}
    with pytest.raises(ConfigError, match="Did you mean the agent 'ppo'"):
        load_named_config("ppoo")
    with pytest.raises(ConfigError, match="Did you mean the shipped config 'ppo_cartpole'"):
        load_named_config("ppo_cartpol")
    with pytest.raises(ConfigError, match="does not exist"):
        load_named_config("missing/config.yaml")


class _Dist:
    def __init__(self, direct_url):
        self.direct_url = direct_url

    def read_text(self, name):
        assert name == "direct_url.json"
        return None if self.direct_url is None else json.dumps(self.direct_url)


@pytest.fixture
def installed_as(monkeypatch, tmp_path):
    """Pretend rlgraph-core was installed as ``direct_url.json`` says; the checkout is ``tmp_path/repo``."""
    repo = tmp_path / "repo"
    for folder in ("rlgraph_core", "rlgraph_tf", "plugins/rlgraph-jax"):
        (repo / folder).mkdir(parents=True)

    def install(direct_url):
        monkeypatch.setattr(install_hints.md, "distribution", lambda name: _Dist(direct_url))
        install_hints.checkout_install.cache_clear()
        return repo

    yield install
    install_hints.checkout_install.cache_clear()


def test_install_hints_from_an_editable_checkout_name_its_folders(installed_as, monkeypatch):
    repo = installed_as(None)
    repo_url = (repo / "rlgraph_core").as_uri()
    installed_as({"url": repo_url, "dir_info": {"editable": True}})
    monkeypatch.chdir(repo)
    assert install_hints.extra_install_command("tf", "rlgraph-tf") == "pip install -e ./rlgraph_tf"
    assert install_hints.extra_install_command("jax", "rlgraph-jax") == "pip install -e ./plugins/rlgraph-jax"
    assert install_hints.extra_install_command("atari") == 'pip install -e "./rlgraph_core[atari]"'
    (repo.parent / "elsewhere").mkdir()
    monkeypatch.chdir(repo.parent / "elsewhere")  # outside the checkout: the absolute folder
    assert install_hints.extra_install_command("tf", "rlgraph-tf") == f"pip install -e {repo / 'rlgraph_tf'}"
    installed_as({"url": repo_url, "dir_info": {}})  # pip install ./rlgraph_core (not editable)
    monkeypatch.chdir(repo)
    assert install_hints.extra_install_command("atari") == 'pip install "./rlgraph_core[atari]"'


def test_install_hints_from_an_index_name_the_extra(installed_as):
    installed_as(None)
    assert install_hints.extra_install_command("tf", "rlgraph-tf") == 'pip install "rlgraph-core[tf]"'
    installed_as({"url": "https://example.org/rlgraph_core-1.0-py3-none-any.whl", "archive_info": {}})
    assert install_hints.extra_install_command("atari") == 'pip install "rlgraph-core[atari]"'


@pytest.mark.parametrize("name", ["running_mean_std", "running_obs_normalizer"])
def test_obs_clip_reaches_the_running_normaliser_by_either_name(name):
    import gymnasium as gym

    from rlgraph_core.assemble import assemble
    from rlgraph_core.config.run import apply_overrides, validate_config
    from rlgraph_core.plugins import get_plugin_manager

    from core_backend import BACKEND, on_core_backend

    if BACKEND == "numpy":
        pytest.skip(
            "building a PPO agent makes a train step, which the numpy test backend cannot (runs in the torch session)"
        )
    raw = on_core_backend(load_shipped_config("ppo_pendulum"))
    config = validate_config(
        apply_overrides(raw, [f"agent.preprocessor={name}", "agent.obs_clip=2.5", "train.mode=eager"])
    )
    env = gym.make("Pendulum-v1")
    agent = assemble(config, get_plugin_manager()).make_agent(env.observation_space, env.action_space)
    assert agent.graph.obs_normalizer.clip == 2.5


def test_the_tensorboard_extra_brings_the_viewer_users_type():
    """``pip install "rlgraph-core[tensorboard]"`` then ``tensorboard --logdir runs``: both the writer
    (tensorboardX) and the viewer (tensorboard) come with the extra."""
    from importlib import metadata

    extra = [
        r.split(";")[0].strip() for r in metadata.requires("rlgraph-core") or [] if "tensorboard" in r.split(";")[-1]
    ]
    assert any(r.startswith("tensorboardX") for r in extra) and any(r.startswith("tensorboard>=") for r in extra)
