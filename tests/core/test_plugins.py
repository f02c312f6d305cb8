"""Plugin manager: duplicate names, unknown names, and plugins that fail to import."""

from __future__ import annotations

import types

import pytest

from rlgraph_core.errors import PluginError
from rlgraph_core.plugins import PluginManager, hookimpl
from rlgraph_core.plugins import manager as manager_module


def fake_plugin(kind: str, names: dict) -> types.SimpleNamespace:
    """A plugin object implementing the registration hook of ``kind`` with ``names``."""
    impl = hookimpl(lambda: dict(names))
    return types.SimpleNamespace(**{f"rlgraph_{kind}": impl})


class FakeBackend:
    """Stands in for a backend factory."""


class OtherBackend:
    """Another backend factory."""


def test_duplicate_names_across_plugins_name_both_distributions():
    pm = PluginManager(load_entry_points=False)
    pm.register(fake_plugin("backends", {"fast": FakeBackend}), "rlgraph-fast")
    pm.register(fake_plugin("backends", {"fast": OtherBackend}), "rlgraph-faster")
    with pytest.raises(PluginError) as info:
        pm.names("backends")
    msg = str(info.value)
    assert "'fast'" in msg and "'rlgraph-fast'" in msg and "'rlgraph-faster'" in msg


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
    with pytest.raises(PluginError, match=r'rlgraph-tf.*pip install "rlgraph-core\[tf\]"'):
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
