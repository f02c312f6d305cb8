"""The third-party path for component slots: the example plugin's network (``layer_norm_mlp``) and
exploration (``boltzmann``) are chosen by ``type`` in a config, validated by the settings models
the plugin registers, and train and act in DQN, PPO and SAC on torch and tf with no change to
rlgraph or to the agents.

Component math is compared against plain numpy on every installed backend and mode; the agents
run eager on each installed framework backend. Where the plugin is not installed these tests skip.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip(
    "rlgraph_example_components",
    reason="the example plugin is not installed: pip install -e plugins/rlgraph-example-components",
)

from rlgraph_core.assemble import assemble, train  # noqa: E402
from rlgraph_core.cli import main  # noqa: E402
from rlgraph_core.config.run import validate_config  # noqa: E402
from rlgraph_core.errors import ConfigError  # noqa: E402
from rlgraph_core.plugins import LazyObject, get_plugin_manager  # noqa: E402
from rlgraph_core.spaces import FloatBox  # noqa: E402
from rlgraph_core.testing import ComponentTest, backend_params  # noqa: E402
from rlgraph_example_components import (  # noqa: E402
    Boltzmann,
    BoltzmannSettings,
    LayerNormMLP,
    LayerNormMLPSettings,
)

DIST = "rlgraph-example-components"
RTOL = ATOL = 1e-5
FRAMEWORKS = [name for name in ("torch", "tf") if name in get_plugin_manager().names("backends")]


def run_cli(*argv: str) -> tuple[int, str, str]:
    """``rlgraph ARGV`` in-process; returns (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


# --------------------------------------------------------------------------- numpy references
def np_activation(name: str, x: np.ndarray) -> np.ndarray:
    return {"relu": lambda v: np.maximum(v, 0), "tanh": np.tanh, "linear": lambda v: v}[name](x)


def np_layer_norm_mlp(x: np.ndarray, weights: dict, prefix: str, n_layers: int, activation: str, eps: float):
    """``activation(LayerNorm(x W + b))`` per layer, from the weights named ``<prefix>dense_i/W`` ..."""
    for i in range(n_layers):
        z = x @ weights[f"{prefix}dense_{i}/W"] + weights[f"{prefix}dense_{i}/b"]
        mean = z.mean(-1, keepdims=True)
        var = ((z - mean) ** 2).mean(-1, keepdims=True)
        z = (z - mean) / np.sqrt(var + eps) * weights[f"{prefix}norm_{i}/gain"] + weights[f"{prefix}norm_{i}/offset"]
        x = np_activation(activation, z)
    return x


def np_boltzmann(q: np.ndarray, noise: np.ndarray, temperature: float) -> np.ndarray:
    return np.argmax(q / temperature - np.log(-np.log(noise)), axis=-1)


# --------------------------------------------------------------------------- registration
def test_network_and_exploration_are_registered_lazily_with_settings_models():
    pm = get_plugin_manager()
    for name, cls, model in (
        ("layer_norm_mlp", LayerNormMLP, LayerNormMLPSettings),
        ("boltzmann", Boltzmann, BoltzmannSettings),
    ):
        entry = pm.names("components")[name]
        assert entry.distribution == DIST and entry.plugin == "example-components"
        lazy, settings_model = entry.obj
        assert isinstance(lazy, LazyObject) and lazy.resolve() is cls and settings_model is model


def test_validating_a_config_imports_only_the_settings_models():
    code = (
        "import sys; from rlgraph_core.config.run import validate_config; "
        "validate_config({'agent': {'type': 'dqn', 'network': {'type': 'layer_norm_mlp', 'hidden': [8]}, "
        "'exploration': {'type': 'boltzmann', 'temperature': 0.5}}, 'train': {'backend': 'torch'}}); "
        "print(sorted(m for m in ('rlgraph_example_components.layer_norm_mlp', "
        "'rlgraph_example_components.boltzmann', 'torch', 'tensorflow') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


# --------------------------------------------------------------------------- settings and errors
def test_settings_are_validated_by_the_plugin_models():
    config = validate_config(
        {
            "agent": {
                "type": "dqn",
                "network": {"type": "layer_norm_mlp", "hidden": [16], "eps": 1e-3},
                "exploration": {
                    "type": "boltzmann",
                    "temperature": {"type": "linear", "start": 2, "end": 0.5, "steps": 9},
                },
            }
        }
    )
    assert isinstance(config.agent.network, LayerNormMLPSettings) and config.agent.network.eps == 1e-3
    assert isinstance(config.agent.exploration, BoltzmannSettings)
    dumped = config.to_dict()["agent"]
    assert dumped["network"]["type"] == "layer_norm_mlp" and dumped["exploration"]["temperature"]["end"] == 0.5
    assert validate_config(config.to_dict()).to_dict() == config.to_dict()  # round trip (checkpoint meta)


@pytest.mark.parametrize(
    "override, expected",
    [
        (
            "agent.network.type=layer_norm_mpl",
            r"Unknown network 'layer_norm_mpl' \(in field 'agent\.network\.type'\)\. "
            r"Known networks: cnn, dict_encoder, gru, layer_norm_mlp, lstm, mlp\. Did you mean 'layer_norm_mlp'\?",
        ),
        (
            "agent.exploration.type=boltzman",
            r"Unknown exploration 'boltzman' .*Known explorations: boltzmann, "
            r"epsilon_greedy\. Did you mean 'boltzmann'\?",
        ),
        ("agent.network.type=clip_obs", r"'agent\.network\.type' = 'clip_obs' is a component, but not a network"),
        ("agent.network={type: layer_norm_mlp, eps: 0}", r"'agent\.network\.eps' = 0: Input should be greater than 0"),
        (
            "agent.network={type: layer_norm_mlp, hiden: [4]}",
            r"'agent\.network\.hiden' is not a known field.*did you "
            r"mean 'hidden'",
        ),
        ("agent.exploration={type: boltzmann, temperature: 0}", r"'agent\.exploration\.temperature'.*stay > 0"),
    ],
)
def test_a_bad_slot_section_is_one_paragraph_naming_field_value_and_alternatives(override, expected):
    code, _, err = run_cli("config", "--set", override)
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err  # one paragraph, no traceback
    import re

    assert re.search(expected, err), err


def test_sac_and_ppo_slots_name_their_fields():
    for raw, expected in (
        ({"type": "sac", "critic_network": {"type": "layer_norm_mpl"}}, "agent.critic_network.type"),
        ({"type": "ppo", "network": "res_mlp"}, "agent.network.type"),
    ):
        with pytest.raises(
            ConfigError,
            match=expected.replace(".", r"\.") + r".*Known networks: cnn, dict_encoder, gru, layer_norm_mlp, lstm, mlp",
        ):
            validate_config({"agent": raw, "env": {"id": "Pendulum-v1"}})


def test_rlgraph_config_shows_the_default_components():
    code, out, _ = run_cli("config")
    assert code == 0
    assert "network:\n    type: mlp\n" in out
    assert "exploration:\n    type: epsilon_greedy\n    epsilon:\n      type: linear" in out
    code, out, _ = run_cli("config", "--set", "agent.network.type=layer_norm_mlp")
    assert code == 0 and "type: layer_norm_mlp" in out and "eps: 1.0e-05" in out
    code, out, _ = run_cli("plugins")
    listed = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert listed["layer_norm_mlp"].split()[1] == DIST and listed["layer_norm_mlp"].endswith("[network slot]")
    assert listed["boltzmann"].endswith("[exploration slot]") and listed["mlp"].endswith("[network slot]")


# --------------------------------------------------------------------------- component math
@pytest.mark.parametrize("backend", backend_params())
def test_layer_norm_mlp_matches_numpy(backend, activation="tanh"):
    """(relu is compared in the DQN agent test below.)"""
    settings = LayerNormMLPSettings(hidden=[6, 5], activation=activation, eps=1e-3, initializer="glorot_uniform")
    net = LayerNormMLP.from_settings(settings, name="net", rng=np.random.default_rng(3))
    test = ComponentTest(net, {"call": {"x": FloatBox(shape=(4,)).with_batch_rank()}}, backend)
    rng = np.random.default_rng(0)
    weights = test.get_weights()
    assert set(weights) == {f"{k}_{i}/{v}" for i in (0, 1) for k, v in (("dense", "W"), ("dense", "b"))} | {
        f"norm_{i}/{v}" for i in (0, 1) for v in ("gain", "offset")
    }
    weights = {k: rng.standard_normal(np.shape(v)).astype(np.float32) for k, v in weights.items()}
    test.set_weights(weights)
    x = rng.standard_normal((7, 4)).astype(np.float32)
    expected = np_layer_norm_mlp(x, weights, "", 2, activation, 1e-3)
    np.testing.assert_allclose(test.call("call", x), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", backend_params())
def test_boltzmann_matches_numpy(backend):
    explore = Boltzmann(4, temperature=0.7)
    spaces = {
        "explore": {
            "q_values": FloatBox(shape=(4,)).with_batch_rank(),
            "noise": FloatBox(shape=(4,)).with_batch_rank(),
            "value": FloatBox(shape=()),
        }
    }
    test = ComponentTest(explore, spaces, backend)
    rng = np.random.default_rng(1)
    q = rng.standard_normal((64, 4)).astype(np.float32)
    noise = explore.draw_noise(rng, 64)
    assert noise.shape == (64, 4) and noise.dtype == np.float32 and noise.min() > 0
    for temperature in (0.7, 5.0, 0.05):
        out = test.call("explore", q, noise, np.float32(temperature))
        assert out.dtype == np.int64
        np.testing.assert_array_equal(out, np_boltzmann(q, noise, temperature))
    np.testing.assert_array_equal(test.call("explore", q, noise, np.float32(1e-4)), q.argmax(-1))  # T -> 0: greedy


def test_boltzmann_samples_the_softmax_distribution():
    explore = Boltzmann(3, temperature=0.5)
    test = ComponentTest(
        explore,
        {
            "explore": {
                "q_values": FloatBox(shape=(3,)).with_batch_rank(),
                "noise": FloatBox(shape=(3,)).with_batch_rank(),
                "value": FloatBox(shape=()),
            }
        },
        ("numpy", "eager"),
    )
    q = np.tile(np.array([[1.0, 0.5, -0.5]], np.float32), (40_000, 1))
    actions = test.call("explore", q, explore.draw_noise(np.random.default_rng(2), 40_000), np.float32(0.5))
    freq = np.bincount(actions, minlength=3) / len(actions)
    p = np.exp(q[0] / 0.5) / np.exp(q[0] / 0.5).sum()
    np.testing.assert_allclose(freq, p, atol=0.01)
    assert explore.parameter == "temperature" and explore.value(123) == 0.5


# --------------------------------------------------------------------------- agents from configs
def needs_frameworks():
    if not FRAMEWORKS:
        pytest.skip("no framework backend (rlgraph-torch / rlgraph-tf) is installed")


DQN_AGENT = {
    "type": "dqn",
    "network": {"type": "layer_norm_mlp", "hidden": [16], "eps": 1e-3},
    "exploration": {"type": "boltzmann", "temperature": {"type": "linear", "start": 2.0, "end": 0.5, "steps": 300}},
    "learning_starts": 100,
    "train_freq": 25,
    "gradient_steps": 2,
    "batch_size": 16,
    "memory": {"type": "replay", "capacity": 1000},
}
TRAIN = {"total_timesteps": 400, "eval_interval": 400, "eval_episodes": 1, "log_interval": 200, "progress_bar": False}


@pytest.mark.parametrize("backend_name", ["torch", "tf"])
def test_dqn_trains_and_acts_with_the_plugin_network_and_exploration(backend_name, tmp_path):
    needs_frameworks()
    if backend_name not in FRAMEWORKS:
        pytest.skip(f"the {backend_name} backend is not installed")
    config = validate_config(
        {"agent": DQN_AGENT, "env": {"id": "CartPole-v1", "num_envs": 1}, "train": {**TRAIN, "backend": backend_name}}
    )
    summary = train(config, tmp_path / "run")
    assert summary["timesteps"] == 400

    assembly = assemble(config, get_plugin_manager())
    env = assembly.make_eval_env()
    agent = assembly.make_agent(env.observation_space, env.action_space)
    agent.load(tmp_path / "run" / "checkpoint")
    assert isinstance(agent.graph.policy.trunk, LayerNormMLP) and isinstance(agent.graph.target.trunk, LayerNormMLP)
    assert isinstance(agent.exploration, Boltzmann)
    assert agent.metrics()["temperature"] == pytest.approx(0.5)  # the schedule's end, at 400 steps

    # Q(x) = head(LayerNormMLP(x)) with the trained weights, and acting is Gumbel-max on it
    weights = agent.get_weights()
    x = np.random.default_rng(0).uniform(-2, 2, (32, 4)).astype(np.float32)
    features = np_layer_norm_mlp(x, weights, "policy/trunk/", 1, "relu", 1e-3)
    q_ref = features @ weights["policy/head/q/W"] + weights["policy/head/q/b"]
    to_t, to_np = agent.backend.to_tensor, agent.backend.to_numpy
    np.testing.assert_allclose(to_np(agent.graph.q_values(to_t(x))), q_ref, rtol=1e-4, atol=1e-4)
    noise = agent.exploration.draw_noise(np.random.default_rng(5), 32)
    actions = to_np(agent.graph.act(to_t(x), to_t(noise), to_t(np.float32(0.5))))
    np.testing.assert_array_equal(actions, np_boltzmann(q_ref, noise, 0.5))
    explored = agent.act(x)
    assert explored.shape == (32,) and set(explored.tolist()) <= {0, 1}


@pytest.mark.parametrize("backend_name", ["torch", "tf"])
def test_ppo_and_sac_train_with_the_plugin_network(backend_name, tmp_path):
    needs_frameworks()
    if backend_name not in FRAMEWORKS:
        pytest.skip(f"the {backend_name} backend is not installed")
    net = {"type": "layer_norm_mlp", "hidden": [8], "activation": "tanh"}
    ppo = validate_config(
        {
            "agent": {"type": "ppo", "network": net, "n_steps": 16, "batch_size": 16, "n_epochs": 1},
            "env": {"id": "CartPole-v1", "num_envs": 1},
            "train": {**TRAIN, "total_timesteps": 64, "eval_interval": 64, "backend": backend_name},
        }
    )
    assert train(ppo, tmp_path / "ppo")["timesteps"] == 64
    assembly = assemble(ppo, get_plugin_manager())
    env = assembly.make_eval_env()
    agent = assembly.make_agent(env.observation_space, env.action_space)
    agent.load(tmp_path / "ppo" / "checkpoint")
    assert isinstance(agent.graph.policy.pi_trunk, LayerNormMLP) and isinstance(
        agent.graph.policy.vf_trunk, LayerNormMLP
    )
    weights = agent.get_weights()
    x = np.random.default_rng(0).uniform(-2, 2, (16, 4)).astype(np.float32)
    h = np_layer_norm_mlp(x, weights, "policy/vf_trunk/", 1, "tanh", 1e-5)
    v_ref = (h @ weights["policy/value_head/W"] + weights["policy/value_head/b"])[:, 0]
    values = agent.backend.to_numpy(agent.graph.value(agent.backend.to_tensor(x)))
    np.testing.assert_allclose(values, v_ref, rtol=1e-4, atol=1e-4)

    sac = validate_config(
        {
            "agent": {
                "type": "sac",
                "actor_network": net,
                "critic_network": {**net, "activation": "relu"},
                "learning_starts": 32,
                "batch_size": 16,
                "memory": {"type": "replay", "capacity": 200},
            },
            "env": {"id": "Pendulum-v1", "num_envs": 1},
            "train": {**TRAIN, "total_timesteps": 64, "eval_interval": 64, "backend": backend_name},
        }
    )
    assert train(sac, tmp_path / "sac")["timesteps"] == 64
    agent = assemble(sac, get_plugin_manager()).make_agent(FloatBox(-8, 8, shape=(3,)), FloatBox(-2, 2, shape=(1,)))
    assert isinstance(agent.graph.actor.trunk, LayerNormMLP)
    assert isinstance(agent.graph.critic.q1.trunk, LayerNormMLP) and agent.graph.critic.q1.trunk.activation == "relu"
    assert agent.act(np.zeros((2, 3), np.float32)).shape == (2, 1)
