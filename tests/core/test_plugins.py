"""Plugin manager: duplicate names, unknown names, plugins that fail to import, misspelled
hooks, blocked plugins, and the ``memories`` kind."""

from __future__ import annotations

import contextlib
import io
import sys
import types

import pytest
from pydantic import Field

from rlgraph_core.errors import ConfigError, PluginError
from rlgraph_core.config.memory import make_memory, validate_memory_settings
from rlgraph_core.memories import MemorySettings, PrioritizedReplay, ReplayMemory
from rlgraph_core.plugins import LazyObject, PluginManager, get_plugin_manager, hookimpl
from rlgraph_core.plugins import manager as manager_module


def fake_plugin(kind: str, names: dict) -> types.SimpleNamespace:
    """A plugin object implementing the registration hook of ``kind`` with ``names``."""
    impl = hookimpl(lambda: dict(names))
    return types.SimpleNamespace(**{f"rlgraph_{kind}": impl})


class FakeBackend:
    """Stands in for a backend factory."""


class OtherBackend:
    """Another backend factory."""


def test_duplicate_names_keep_both_claimants_and_get_names_both():
    pm = PluginManager(load_entry_points=False)
    pm.register(fake_plugin("backends", {"fast": FakeBackend}), "rlgraph-fast", name="fast-ep")
    pm.register(fake_plugin("backends", {"fast": OtherBackend}), "rlgraph-faster", name="faster-ep")
    assert "fast" not in pm.names("backends")  # listing works, the name is just not usable
    claims = pm.contested("backends")["fast"]
    assert [(c.distribution, c.plugin, c.obj) for c in claims] == [
        ("rlgraph-fast", "fast-ep", FakeBackend),
        ("rlgraph-faster", "faster-ep", OtherBackend),
    ]
    with pytest.raises(PluginError) as info:
        pm.get("backends", "fast", field="train.backend")
    msg = str(info.value)
    assert "'fast'" in msg and "train.backend" in msg
    assert "'rlgraph-fast'" in msg and "'rlgraph-faster'" in msg and "'fast-ep'" in msg and "'faster-ep'" in msg
    assert "--disable-plugins" in msg and "RLGRAPH_DISABLE_PLUGINS" in msg
    # blocking one claimant makes the name usable again
    one = PluginManager(load_entry_points=False, disabled=["faster-ep"])
    one.register(fake_plugin("backends", {"fast": FakeBackend}), "rlgraph-fast", name="fast-ep")
    assert not one.register(fake_plugin("backends", {"fast": OtherBackend}), "rlgraph-faster", name="faster-ep")
    assert one.get("backends", "fast") is FakeBackend
    assert [b.name for b in one.blocked] == ["faster-ep"]


def test_same_name_in_different_kinds_is_allowed():
    pm = PluginManager(load_entry_points=False)
    pm.register(fake_plugin("backends", {"shared": FakeBackend}), "dist-a")
    pm.register(fake_plugin("loggers", {"shared": OtherBackend}), "dist-b")
    assert pm.get("backends", "shared") is FakeBackend
    assert pm.get("loggers", "shared") is OtherBackend
    assert pm.names("backends")["shared"].distribution == "dist-a"


def test_unknown_name_lists_known_names():
    pm = PluginManager(load_entry_points=False)
    pm.register(fake_plugin("backends", {"alpha": FakeBackend, "beta": OtherBackend}), "rlgraph-greek")
    with pytest.raises(PluginError) as info:
        pm.get("backends", "gamma", field="backend")
    msg = str(info.value)
    assert "Unknown backend 'gamma'" in msg and "field 'backend'" in msg
    assert "Known backends: alpha, beta" in msg
    # the built-ins register through the same hooks and are listed the same way
    with pytest.raises(PluginError, match=r"Known agents: .*dqn"):
        pm.get("agents", "rainbow")
    with pytest.raises(PluginError, match="the kinds are"):
        pm.names("widgets")


def test_unknown_framework_backend_hints_at_the_package():
    pm = PluginManager(load_entry_points=False)
    if "tf" in pm.names("backends"):
        pytest.skip("the tf backend is registered here")
    with pytest.raises(PluginError, match=r'rlgraph-tf.*pip install (-e \S*rlgraph_tf|"rlgraph-core\[tf\]")'):
        pm.get("backends", "tf")


class FakeDist:
    """The part of ``importlib.metadata.Distribution`` the manager reads."""

    def __init__(self, name: str, version: str = "1.0"):
        self.metadata = {"Name": name}
        self.version = version


class FakeEntryPoint:
    """An entry point whose ``load()`` returns ``obj`` or raises ``error``."""

    def __init__(self, name: str, dist: str, obj=None, error: Exception | None = None):
        self.name = name
        self.value = f"{dist.replace('-', '_')}.plugin"
        self.group = "rlgraph"
        self.dist = FakeDist(dist)
        self._obj = obj
        self._error = error

    def load(self):
        """Return the plugin object, or raise the configured error."""
        if self._error is not None:
            raise self._error
        return self._obj


def test_plugin_that_fails_to_import_is_recorded_and_skipped(monkeypatch):
    good = FakeEntryPoint("good", "rlgraph-good", obj=fake_plugin("backends", {"good": FakeBackend}))
    bad = FakeEntryPoint("broken", "rlgraph-broken", error=ImportError("No module named 'torchy'"))
    seen_groups = []

    def fake_entry_points(group=None, **kwargs):
        seen_groups.append(group)
        return [bad, good]

    monkeypatch.setattr(manager_module.md, "entry_points", fake_entry_points)
    with pytest.warns(RuntimeWarning, match=r"'broken'.*'rlgraph-broken'.*failed to import"):
        pm = PluginManager()
    assert seen_groups == ["rlgraph"]
    assert [(f.name, f.distribution) for f in pm.failed] == [("broken", "rlgraph-broken")]
    assert "ImportError" in pm.failed[0].error and "torchy" in pm.failed[0].error
    # the working plugin and the built-ins still load
    assert pm.get("backends", "good") is FakeBackend
    assert pm.names("backends")["good"].distribution == "rlgraph-good"
    assert "dqn" in pm.names("agents")
    # an unknown name mentions the plugin that failed
    with pytest.raises(PluginError, match=r"failed to load: broken \(rlgraph-broken\)"):
        pm.get("backends", "missing")


# --------------------------------------------------------------------------- strict registration
def test_misspelled_hook_is_reported_and_the_plugin_skipped():
    typo = types.SimpleNamespace(
        rlgraph_componets=hookimpl(lambda: {"widget": FakeBackend}),
        rlgraph_loggers=hookimpl(lambda: {"typo_logger": OtherBackend}),
    )
    pm = PluginManager(load_entry_points=False)
    with pytest.warns(
        RuntimeWarning, match=r"'typo-plugin'.*'rlgraph-typo'.*'rlgraph_componets'.*'rlgraph_components'"
    ):
        assert pm.register(typo, "rlgraph-typo", name="typo-plugin") is False
    [failed] = pm.failed
    assert (failed.name, failed.distribution) == ("typo-plugin", "rlgraph-typo")
    assert "unknown hook 'rlgraph_componets'" in failed.error and "did you mean 'rlgraph_components'" in failed.error
    # unregistered as a whole: its correctly spelled hook does not count either; the core still works
    assert "typo_logger" not in pm.names("loggers") and "widget" not in pm.names("components")
    assert [p.name for p in pm.plugins()] == ["core"] and "dqn" in pm.names("agents")
    with pytest.raises(PluginError, match=r"failed to load: typo-plugin \(rlgraph-typo\)"):
        pm.get("components", "widget")


def test_misspelled_hook_in_an_entry_point_and_bad_hook_arguments_are_skipped(monkeypatch):
    eps = [
        FakeEntryPoint(
            "typo", "rlgraph-typo", obj=types.SimpleNamespace(rlgraph_on_iteraton=hookimpl(lambda metrics: None))
        ),
        FakeEntryPoint(
            "args",
            "rlgraph-args",
            obj=types.SimpleNamespace(rlgraph_on_iteration=hookimpl(lambda metrics, extra: None)),
        ),
        FakeEntryPoint("good", "rlgraph-good", obj=fake_plugin("backends", {"good": FakeBackend})),
    ]
    monkeypatch.setattr(manager_module.md, "entry_points", lambda group=None, **kw: eps)
    with pytest.warns(RuntimeWarning):
        pm = PluginManager()
    errors = {f.name: f.error for f in pm.failed}
    assert "did you mean 'rlgraph_on_iteration'" in errors["typo"]
    assert "invalid hook implementation" in errors["args"] and "extra" in errors["args"]
    assert [p.name for p in pm.plugins()] == ["good", "core"]
    assert pm.get("backends", "good") is FakeBackend
    pm.hook.rlgraph_on_iteration(metrics={})  # no skipped implementation is called


def test_registration_hook_that_raises_or_returns_junk_is_reported():
    pm = PluginManager(load_entry_points=False)

    def boom():
        raise ImportError("No module named 'heavy'")

    pm.register(types.SimpleNamespace(rlgraph_loggers=hookimpl(boom)), "rlgraph-boom")
    pm.register(types.SimpleNamespace(rlgraph_memories=hookimpl(lambda: {"m": (ReplayMemory, dict)})), "rlgraph-junk")
    with pytest.warns(RuntimeWarning):
        loggers, memories = pm.names("loggers"), pm.names("memories")
    assert "console" in loggers and set(memories) == {"replay", "prioritized_replay"}
    errors = {f.distribution: f.error for f in pm.failed}
    assert "rlgraph_loggers() raised ImportError" in errors["rlgraph-boom"]
    assert "memory 'm'" in errors["rlgraph-junk"] and "MemorySettings" in errors["rlgraph-junk"]


# --------------------------------------------------------------------------- blocking
def test_blocked_plugins_by_env_var_and_argument_are_not_imported(monkeypatch):
    never = FakeEntryPoint("blocked-one", "rlgraph-blocked", error=AssertionError("a blocked plugin was imported"))
    good = FakeEntryPoint("good", "rlgraph-good", obj=fake_plugin("backends", {"good": FakeBackend}))
    monkeypatch.setattr(manager_module.md, "entry_points", lambda group=None, **kw: [never, good])
    monkeypatch.setenv("RLGRAPH_DISABLE_PLUGINS", " blocked-one , ")
    pm = PluginManager()
    assert pm.disabled == {"blocked-one"} and not pm.failed
    assert [(b.name, b.distribution) for b in pm.blocked] == [("blocked-one", "rlgraph-blocked")]
    with pytest.raises(PluginError, match=r"Blocked plugins \(not loaded\): blocked-one \(rlgraph-blocked\)"):
        pm.get("backends", "missing")
    monkeypatch.delenv("RLGRAPH_DISABLE_PLUGINS")
    by_dist = PluginManager(disabled=["rlgraph-good", "blocked-one"])  # distribution names work too
    assert {b.name for b in by_dist.blocked} == {"blocked-one", "good"} and "good" not in by_dist.names("backends")
    monkeypatch.setattr(manager_module.md, "entry_points", lambda group=None, **kw: [good])
    with pytest.warns(RuntimeWarning, match=r"'nosuch'.*matches no installed rlgraph plugin"):
        PluginManager(disabled=["nosuch"])


def test_core_builtins_cannot_be_blocked():
    with pytest.warns(RuntimeWarning, match="cannot be blocked"):
        pm = PluginManager(load_entry_points=False, disabled=["core", "rlgraph-core"])
    assert "dqn" in pm.names("agents") and "replay" in pm.names("memories") and not pm.blocked


def test_get_plugin_manager_is_recreated_when_the_blocked_set_changes(monkeypatch):
    good = FakeEntryPoint("good", "rlgraph-good", obj=fake_plugin("backends", {"good": FakeBackend}))
    monkeypatch.setattr(manager_module.md, "entry_points", lambda group=None, **kw: [good])
    monkeypatch.setattr(manager_module, "_DEFAULT", None)
    monkeypatch.delenv("RLGRAPH_DISABLE_PLUGINS", raising=False)
    first = get_plugin_manager()
    assert get_plugin_manager() is first and "good" in first.names("backends")
    monkeypatch.setenv("RLGRAPH_DISABLE_PLUGINS", "good")
    blocked = get_plugin_manager()
    assert blocked is not first and "good" not in blocked.names("backends")
    assert get_plugin_manager() is blocked
    monkeypatch.delenv("RLGRAPH_DISABLE_PLUGINS")
    assert "good" in get_plugin_manager().names("backends")
    assert get_plugin_manager(disabled=["good"]).disabled == {"good"}


def run_cli(*argv: str) -> tuple[int, str]:
    """``rlgraph ARGV`` in-process; returns (exit code, stdout)."""
    from rlgraph_core.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(list(argv))
    return code, out.getvalue()


def sections(out: str) -> dict[str, list[str]]:
    """``rlgraph plugins`` output as {section: its indented lines, stripped}."""
    found: dict[str, list[str]] = {}
    for line in out.splitlines():
        if not line.startswith(" "):
            section = found.setdefault(line.rstrip(":"), [])
        else:
            section.append(line.strip())
    return found


def test_cli_lists_both_claimants_of_a_duplicate_and_the_flag_blocks_one(monkeypatch):
    eps = [
        FakeEntryPoint("shout-a", "rlgraph-shout-a", obj=fake_plugin("loggers", {"shout": FakeBackend})),
        FakeEntryPoint("shout-b", "rlgraph-shout-b", obj=fake_plugin("loggers", {"shout": OtherBackend})),
    ]
    monkeypatch.setattr(manager_module.md, "entry_points", lambda group=None, **kw: eps)
    monkeypatch.setattr(manager_module, "_DEFAULT", None)
    monkeypatch.delenv("RLGRAPH_DISABLE_PLUGINS", raising=False)
    code, out = run_cli("plugins")
    assert code == 0
    loggers = sections(out)["loggers"]
    shout = [line for line in loggers if line.startswith("shout ")]
    assert len(shout) == 2 and "rlgraph-shout-a" in shout[0] and "'shout-a'" in shout[0]
    assert "rlgraph-shout-b" in shout[1] and "'shout-b'" in shout[1]
    [hint] = [line for line in loggers if line.startswith("!")]
    assert "'shout'" in hint and "--disable-plugins" in hint and "RLGRAPH_DISABLE_PLUGINS" in hint
    assert "blocked" not in sections(out)
    # the global flag, before the subcommand, reaches the plugin manager
    code, out = run_cli("--disable-plugins", "shout-b", "plugins")
    assert code == 0
    found = sections(out)
    assert [line.split()[:2] for line in found["loggers"] if line.startswith("shout")] == [["shout", "rlgraph-shout-a"]]
    assert [line.split()[:2] for line in found["blocked"]] == [["shout-b", "rlgraph-shout-b"]]
    assert "RLGRAPH_DISABLE_PLUGINS" not in __import__("os").environ  # restored after the command


# --------------------------------------------------------------------------- memories
class ProbeSettings(MemorySettings):
    """Settings of the probe memory: one extra field."""

    type: str = "probe"
    tag: str = Field("t", min_length=1)


PROBE_MODULE = """
from rlgraph_core.memories import ReplayMemory


class ProbeMemory(ReplayMemory):
    def __init__(self, capacity, seed=None, tag="t"):
        super().__init__(capacity, seed=seed)
        self.tag = tag
        self.seed = seed


class NotAMemory:
    def __init__(self, capacity, seed=None, tag="t"):
        pass
"""


def test_lazily_registered_memory_is_imported_only_when_built(tmp_path, monkeypatch):
    module = "rlgraph_test_probe_memory"
    (tmp_path / f"{module}.py").write_text(PROBE_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    pm = PluginManager(load_entry_points=False)
    pm.register(
        fake_plugin(
            "memories",
            {
                "probe": (LazyObject(f"{module}:ProbeMemory"), ProbeSettings),
                "not_a_memory": (LazyObject(f"{module}:NotAMemory"), ProbeSettings),
            },
        ),
        "rlgraph-probe",
    )
    assert {"probe", "replay", "prioritized_replay"} <= set(pm.names("memories"))
    settings = validate_memory_settings(pm, {"type": "probe", "capacity": 7, "tag": "x"})
    assert isinstance(settings, ProbeSettings) and settings.tag == "x"
    with pytest.raises(ConfigError, match=r"'agent.memory.tag' = \"\""):
        validate_memory_settings(pm, {"type": "probe", "tag": ""})
    assert module not in sys.modules  # registering, listing and validating imported nothing
    memory = make_memory(pm, settings, seed=3)
    assert module in sys.modules
    assert type(memory).__name__ == "ProbeMemory" and memory.tag == "x" and memory.seed == 3
    assert memory.capacity == 7
    with pytest.raises(PluginError, match=r"NotAMemory.*insert.*sample"):
        make_memory(pm, {"type": "not_a_memory"})


def test_builtin_memories_validate_and_build():
    pm = PluginManager(load_entry_points=False)
    assert "replay" not in pm.names("components")
    prioritized = make_memory(pm, {"type": "prioritized_replay", "capacity": 64, "beta": 0.5}, seed=1)
    assert isinstance(prioritized, PrioritizedReplay) and prioritized.capacity == 64 and prioritized.beta == 0.5
    assert isinstance(make_memory(pm, {"capacity": 8}), ReplayMemory)  # type defaults to replay
    with pytest.raises(ConfigError, match=r"'agent.memory.beta' = 1.5: .*less than or equal to 1"):
        validate_memory_settings(pm, {"type": "prioritized_replay", "beta": 1.5})
    with pytest.raises(
        ConfigError,
        match=r"'agent.memory.alpha' is not a known field.*Known fields of 'agent.memory': "
        r"type, capacity",
    ):
        validate_memory_settings(pm, {"type": "replay", "alpha": 0.5})
    with pytest.raises(
        ConfigError,
        match=r"Unknown memory 'replai' \(in field 'sac.memory.type'\)\. "
        r"Known memories: prioritized_replay, replay\. Did you mean 'replay'\?",
    ):
        validate_memory_settings(pm, {"type": "replai"}, field="sac.memory")
    with pytest.raises(ConfigError, match="'mlp' is a component, not a replay memory"):
        validate_memory_settings(pm, {"type": "mlp"})
    pm.register(fake_plugin("memories", {"replay": (ReplayMemory, ProbeSettings)}), "rlgraph-replay2", name="r2")
    with pytest.raises(ConfigError, match=r"'replay'.*'rlgraph-core'.*'rlgraph-replay2'.*--disable-plugins r2"):
        validate_memory_settings(pm, {"type": "replay"})


def test_rlgraph_warnings_print_as_one_line_each_once(monkeypatch, capsys):
    """Issue 35 §5: rlgraph's warnings reached users as raw Python lines (file, line, source), at times twice."""
    import warnings

    from rlgraph_core.cli import main
    from rlgraph_core.warning_lines import warning_lines

    monkeypatch.setattr(manager_module, "_DEFAULT", None)
    monkeypatch.delenv("RLGRAPH_DISABLE_PLUGINS", raising=False)
    assert main(["--disable-plugins", "no-such-plugin", "plugins"]) == 0
    err = capsys.readouterr().err.splitlines()
    [line] = [e for e in err if "no-such-plugin" in e]
    assert line.startswith("rlgraph: warning: RLGRAPH_DISABLE_PLUGINS / --disable-plugins names 'no-such-plugin'")
    assert not any("RuntimeWarning" in e or "manager.py" in e for e in err), err
    # The same message from two places prints once; another library's warning keeps Python's format.
    with warnings.catch_warnings(record=True) as passed_on, warning_lines():
        warnings.simplefilter("always")
        warnings.warn("rlgraph: the same thing", RuntimeWarning)
        warnings.warn("rlgraph: the same thing", RuntimeWarning)
        warnings.warn_explicit("deprecated", DeprecationWarning, "/x/site-packages/other/mod.py", 3)
    assert capsys.readouterr().err == "rlgraph: warning: the same thing\n"
    assert [str(w.message) for w in passed_on] == ["deprecated"]
