"""The plugin manager: loads ``rlgraph`` entry points and resolves names by kind."""

from __future__ import annotations

import importlib
import importlib.metadata as md
import warnings
from dataclasses import dataclass
from typing import Any

import pluggy

from rlgraph_core.errors import PluginError
from rlgraph_core.plugins import hookspecs

KINDS = ("backends", "executors", "components", "agents", "loggers")
ENTRY_POINT_GROUP = "rlgraph"


@dataclass(frozen=True)
class RegisteredName:
    """One registered name: what it is, and which distribution provided it."""

    kind: str
    name: str
    obj: Any
    distribution: str
    version: str


@dataclass(frozen=True)
class FailedPlugin:
    """An entry point that could not be imported; reported and skipped."""

    name: str
    distribution: str
    error: str


class PluginManager:
    """Collects every plugin of the ``rlgraph`` entry-point group and the names each registers.

    Plugins that fail to import are recorded in :attr:`failed` (and warned about) but never
    stop the core. Two plugins registering one name of one kind is a :class:`PluginError` that
    names both distributions.
    """

    def __init__(self, load_entry_points: bool = True):
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.failed: list[FailedPlugin] = []
        self._dist_of: dict[int, tuple[str, str]] = {}
        self._registry: dict[str, dict[str, RegisteredName]] | None = None
        if load_entry_points:
            self._load_entry_points()
        if not any(dist == "rlgraph-core" for dist, _ in self._dist_of.values()):
            # Running from a source tree without installed metadata: register the built-ins
            # directly, through the same hooks an installed core would use.
            self.register(importlib.import_module("rlgraph_core.builtins"), "rlgraph-core")

    def _load_entry_points(self) -> None:
        seen = set()
        for ep in md.entry_points(group=ENTRY_POINT_GROUP):
            dist = ep.dist.metadata["Name"] if ep.dist is not None else "unknown"
            version = ep.dist.version if ep.dist is not None else "?"
            if (dist, ep.value) in seen:
                continue
            seen.add((dist, ep.value))
            try:
                plugin = ep.load()
            except Exception as exc:  # a broken plugin must never break the core
                self.failed.append(FailedPlugin(ep.name, dist, f"{type(exc).__name__}: {exc}"))
                warnings.warn(
                    f"rlgraph plugin '{ep.name}' from distribution '{dist}' failed to import "
                    f"and was skipped ({type(exc).__name__}: {exc}).",
                    RuntimeWarning,
                    stacklevel=2,
                )
                continue
            self.register(plugin, dist, version)

    def register(self, plugin: Any, distribution: str, version: str = "?") -> None:
        """Register a plugin object (module or instance holding hook implementations)."""
        if self.pm.is_registered(plugin):
            return
        self.pm.register(plugin)
        self._dist_of[id(plugin)] = (distribution, version)
        self._registry = None

    @property
    def hook(self):
        """The pluggy hook relay, for lifecycle calls such as ``hook.rlgraph_on_iteration``."""
        return self.pm.hook

    def _collect(self) -> dict[str, dict[str, RegisteredName]]:
        registry: dict[str, dict[str, RegisteredName]] = {kind: {} for kind in KINDS}
        for kind in KINDS:
            caller = getattr(self.pm.hook, f"rlgraph_{kind}")
            for impl in caller.get_hookimpls():
                dist, version = self._dist_of.get(id(impl.plugin), (impl.plugin_name, "?"))
                for name, obj in (impl.function() or {}).items():
                    if name in registry[kind]:
                        other = registry[kind][name]
                        raise PluginError(
                            f"The {kind[:-1]} name '{name}' is registered twice: by distribution "
                            f"'{other.distribution}' and by distribution '{dist}'. Names must be "
                            f"unique per kind; uninstall one of the two or rename the plugin's entry."
                        )
                    registry[kind][name] = RegisteredName(kind, name, obj, dist, version)
        return registry

    def names(self, kind: str) -> dict[str, RegisteredName]:
        """All registered names of one kind (``backends``, ``agents``, ...)."""
        if kind not in KINDS:
            raise PluginError(f"Unknown plugin kind '{kind}'; the kinds are {', '.join(KINDS)}.")
        if self._registry is None:
            self._registry = self._collect()
        return self._registry[kind]

    def get(self, kind: str, name: str, field: str | None = None) -> Any:
        """Resolve ``name`` of ``kind`` or raise a PluginError listing the known names."""
        entries = self.names(kind)
        if name not in entries:
            where = f" (in field '{field}')" if field else ""
            hint = ""
            missing = {"torch": "rlgraph-torch", "tf": "rlgraph-tf", "ray-apex": "rlgraph-ray",
                       "ray-sync": "rlgraph-ray", "ray-impala": "rlgraph-ray", "horovod": "rlgraph-horovod"}
            if name in missing:
                hint = f" It is provided by '{missing[name]}': pip install \"rlgraph-core[{name.split('-')[0]}]\"."
            failed = [f for f in self.failed]
            if failed:
                hint += " Plugins that failed to load: " + "; ".join(
                    f"{f.name} ({f.distribution}): {f.error}" for f in failed) + "."
            raise PluginError(
                f"Unknown {kind[:-1]} '{name}'{where}. Known {kind}: "
                f"{', '.join(sorted(entries)) or '(none installed)'}.{hint}"
            )
        return entries[name].obj


_DEFAULT: PluginManager | None = None


def get_plugin_manager(refresh: bool = False) -> PluginManager:
    """The process-wide plugin manager (created on first use; ``refresh`` re-reads entry points).

    It holds only the name registries, never backend state, so any number of backends can
    live side by side in one process.
    """
    global _DEFAULT
    if _DEFAULT is None or refresh:
        _DEFAULT = PluginManager()
    return _DEFAULT
