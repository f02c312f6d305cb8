"""Hostile or broken config files are bounded (issue 19): alias bombs, huge strings, empty files, duplicate keys."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlgraph_core.config.run import apply_overrides, load_config_file, validate_config
from rlgraph_core.errors import ConfigError

from core_backend import BACKEND, DEFAULT_CONFIG


BOMB = """\
agent: {type: dqn}
env:
  id: CartPole-v1
  kwargs:
    a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]
    b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
    c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
    d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
    e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
    f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
    g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
    h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
    i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""


@pytest.mark.parametrize("where", ["env.kwargs", "unknown field"])
def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path, where):
    """Before: validation hung at 100% CPU (killed at 120 s)."""
    text = BOMB if where == "env.kwargs" else BOMB.replace("  kwargs:", "  colour:")
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "rlgraph_core.cli", "config", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "expands to more than 100,000 values" in result.stderr and "aliases" in result.stderr


def test_aliases_and_merge_keys_of_an_ordinary_config_still_work(tmp_path):
    path = tmp_path / "ok.yaml"
    train = f"{{total_timesteps: 1000, seed: 3, backend: {BACKEND}}}"
    path.write_text(f"train: &t {train}\nagent: {{type: dqn}}\nenv: {{kwargs: {{copy: *t}}}}\n")
    config = validate_config(load_config_file(path))
    assert config.train.seed == 3
    assert config.env.kwargs == {"copy": {"total_timesteps": 1000, "seed": 3, "backend": BACKEND}}


@pytest.mark.parametrize("length", [10_000, 2_000_000])
def test_errors_quote_only_a_short_prefix_of_a_long_value(tmp_path, length):
    """Before: a 50 MB string was echoed whole in the error."""
    path = tmp_path / "long.yaml"
    path.write_text(f"agent:\n  type: dqn\n  gamma: {'x' * length}\n")
    with pytest.raises(ConfigError) as info:
        validate_config(load_config_file(path))
    assert len(str(info.value)) < 600 and f"{length:,} characters" in str(info.value)
    for override in (f"agent.memory.type={'y' * 900}", f"agent.gamma={'z' * 900}"):
        with pytest.raises(ConfigError) as info:
            validate_config(apply_overrides(DEFAULT_CONFIG, [override]))
        assert len(str(info.value)) < 800, str(info.value)[:200]


def test_a_config_file_too_large_to_be_a_config_is_refused_unread(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text("agent: {type: dqn}\nenv: {kwargs: {blob: '" + "x" * (5 * 2**20) + "'}}\n")
    with pytest.raises(ConfigError, match="bytes; a config is a few kilobytes"):
        load_config_file(path)


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_an_empty_config_file_is_refused(tmp_path, text):
    """Before: it silently trained the built-in defaults."""
    path = tmp_path / "empty.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="is empty"):
        load_config_file(path)


@pytest.mark.parametrize(
    "name, text",
    [
        ("dup.yaml", "agent:\n  type: dqn\n  gamma: 0.9\n  gamma: 0.99\n"),
        ("dup.json", '{"agent": {"type": "dqn", "gamma": 0.9, "gamma": 0.99}}'),
    ],
)
def test_duplicate_keys_are_refused(tmp_path, name, text):
    """Before: the last value was kept silently."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match='duplicate key "gamma"'):
        load_config_file(path)
    with pytest.raises(ConfigError, match="duplicate key"):
        apply_overrides(DEFAULT_CONFIG, ["env.kwargs={a: 1, a: 2}"])


def test_networks_that_cannot_fit_in_memory_are_refused_before_building():
    """Before: --set agent.network.hidden=[100000000] allocated ~10 GB, even under --dry-run."""
    from rlgraph_core.components.sizing import check_networks_fit, estimate_network_bytes
    from rlgraph_core.spaces import FloatBox

    obs = FloatBox(shape=(4,))
    huge = validate_config(apply_overrides(DEFAULT_CONFIG, ["agent.network.hidden=[100000000]"]))
    [(path, size)] = estimate_network_bytes(huge.agent, obs)
    params = 4 * 10**8 + 10**8 + 10**8 + 1
    # Issue 35 §4: weights, gradients and Adam's two slots; the target copy; a batch of 64's activations
    # and their gradients; the largest layer drawn in float64 and cast (was weights + gradients only).
    assert path == "agent.network" and size == 4 * 4 * params + 4 * params + 64 * (10**8 + 1) * 8 + 12 * 4 * 10**8
    with pytest.raises(ConfigError, match=r"'agent.network.hidden' = \[100000000\].*at least 63.3 GiB.*3.0 GiB"):
        check_networks_fit(huge.agent, obs, available=3 * 2**30)
    sgd = validate_config(
        apply_overrides(DEFAULT_CONFIG, ["agent.network.hidden=[100000000]", "agent.optimizer.type=sgd"])
    )
    assert estimate_network_bytes(sgd.agent, obs)[0][1] == size - 2 * 4 * params  # no optimizer slots
    default = validate_config(DEFAULT_CONFIG)
    assert check_networks_fit(default.agent, obs, available=3 * 2**30) < 2**22


def test_a_5000_level_override_key_is_one_paragraph():
    """Issue 35 §5: --set env.kwargs.a.a.a... (5,000 levels) ended in a RecursionError traceback."""
    key = "env.kwargs." + ".".join(["a"] * 5000)
    with pytest.raises(ConfigError) as exc:
        validate_config(apply_overrides(DEFAULT_CONFIG, [f"{key}=1"]))
    message = str(exc.value)
    assert "the key path has 5002 parts; a config nests at most 32 deep" in message and len(message) < 400
    # an ordinary deep kwarg still works
    assert apply_overrides(DEFAULT_CONFIG, ["env.kwargs.a.b.c=1"])["env"]["kwargs"]["a"]["b"]["c"] == 1
