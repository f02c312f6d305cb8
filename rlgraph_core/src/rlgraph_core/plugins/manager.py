"""The plugin manager: loads ``rlgraph`` entry points and resolves names by kind.

Registration is strict but never fatal to the core:

* a plugin that fails to import, whose hook implementations do not match the hook specs, or
  that implements a hook rlgraph does not define (a misspelled ``rlgraph_componets``) is
  warned about, recorded in :attr:`PluginManager.failed` and left out;
* a user can block plugins by entry-point (or distribution) name with the environment variable
  ``RLGRAPH_DISABLE_PLUGINS=name1,name2``, ``PluginManager(disabled=[...])`` or
  ``rlgraph --disable-plugins name1,name2``; a blocked plugin is not even imported;
* two plugins claiming one name of one kind are both kept: listing shows both claimants and
  :meth:`PluginManager.get` refuses the contested name with a message that says how to block one.
"""

from __future__ import annotations

import difflib
import importlib.metadata as md
import os
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pluggy

from rlgraph_core.backend.settings import backend_entry_problem
from rlgraph_core.callbacks import callback_entry_problem
from rlgraph_core.components.settings import component_entry_problem
from rlgraph_core.errors import PluginError
from rlgraph_core.execution.settings import executor_entry_problem
from rlgraph_core.memories.settings import MemorySettings
from rlgraph_core.plugins import hookspecs
from rlgraph_core.registration import entry_problem
from rlgraph_core.wrappers import wrapper_entry_problem
from rlgraph_core.install_hints import extra_install_command

KINDS = ("backends", "executors", "components", "agents", "memories", "loggers", "callbacks", "wrappers")
ENTRY_POINT_GROUP = "rlgraph"
#: Environment variable holding comma-separated plugin names to block.
DISABLE_ENV = "RLGRAPH_DISABLE_PLUGINS"
#: The distribution whose built-ins cannot be blocked (without them nothing can run).
CORE_DISTRIBUTION = "rlgraph-core"
#: Plugin name of rlgraph-core's built-ins (their entry-point name).
CORE_PLUGIN = "core"

_SINGULAR = {
    "backends": "backend",
    "executors": "executor",
    "components": "component",
    "agents": "agent",
    "memories": "memory",
    "loggers": "logger",
    "callbacks": "callback",
    "wrappers": "wrapper",
}


def parse_plugin_names(text: str | None) -> frozenset[str]:
    """The plugin names in a comma-separated list such as ``"a, b,c"`` (blanks ignored)."""
    return frozenset(part.strip() for part in (text or "").split(",") if part.strip())


def disabled_from_env(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The plugin names blocked by the ``RLGRAPH_DISABLE_PLUGINS`` environment variable."""
    return parse_plugin_names((os.environ if environ is None else environ).get(DISABLE_ENV))


@dataclass(frozen=True)
class RegisteredName:
    """One registered name: what it is, and which plugin (entry point) and distribution provided it."""

    kind: str
    name: str
    obj: Any
    distribution: str
    version: str
    plugin: str = ""


@dataclass(frozen=True)
class FailedPlugin:
    """A plugin that could not be used (import error, invalid or unknown hook); reported and skipped."""

    name: str
    distribution: str
    error: str


@dataclass(frozen=True)
class PluginInfo:
    """A plugin by its registered (entry-point) name, with its distribution and version."""

    name: str
    distribution: str
    version: str


class PluginManager:
    """Collects every plugin of the ``rlgraph`` entry-point group and the names each registers.

    Plugins are registered under their entry-point names. Plugins that fail to import, or whose
    hook implementations are invalid or name no rlgraph hook, are recorded in :attr:`failed`
    (and warned about) but never stop the core. Blocked plugins (``disabled`` plus the
    ``RLGRAPH_DISABLE_PLUGINS`` environment variable, matched against entry-point and
    distribution names) are recorded in :attr:`blocked` and never imported. A name registered
    by two plugins for one kind is kept with both claimants (:meth:`claimants`); :meth:`get`
    refuses it with a :class:`PluginError` that names both and how to block one.

    Args:
        load_entry_points: read the ``rlgraph`` entry-point group (False: only the built-ins,
            plus whatever :meth:`register` adds).
        disabled: plugin names to block, in addition to ``RLGRAPH_DISABLE_PLUGINS``.
    """

    def __init__(self, load_entry_points: bool = True, disabled: Iterable[str] | None = None):
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.disabled: frozenset[str] = frozenset(disabled or ()) | disabled_from_env()
        self.failed: list[FailedPlugin] = []
        self.blocked: list[PluginInfo] = []
        self._info: dict[str, PluginInfo] = {}
        self._hook_results: dict[tuple[str, str], dict] = {}
        self._registry: dict[str, dict[str, list[RegisteredName]]] | None = None
        if self.disabled & {CORE_PLUGIN, CORE_DISTRIBUTION}:
            warnings.warn(
                f"rlgraph-core's built-ins cannot be blocked; ignoring "
                f"{sorted(self.disabled & {CORE_PLUGIN, CORE_DISTRIBUTION})} in the disabled plugins.",
                RuntimeWarning,
                stacklevel=2,
            )
        if load_entry_points:
            self._load_entry_points()
        if not any(info.distribution == CORE_DISTRIBUTION for info in self._info.values()):
            self._register_core()

    # ------------------------------------------------------------------ loading
    def _register_core(self) -> None:
        """Register rlgraph-core's built-ins from its own ``core`` entry point.

        The manager never names the built-ins' module: it sits below them (they import the
        agents, which import the configs, which use this manager), so the built-ins arrive the
        way every plugin does, from rlgraph-core's package metadata (``pyproject.toml``).
        """
        try:
            dist = md.distribution(CORE_DISTRIBUTION)
        except md.PackageNotFoundError:
            raise PluginError(
                f"{CORE_DISTRIBUTION} is not installed, so its built-in agents, components and executors "
                f"cannot be registered; install it (pip install -e rlgraph_core from a source tree)."
            ) from None
        for ep in dist.entry_points:
            if ep.group == ENTRY_POINT_GROUP and ep.name == CORE_PLUGIN:
                self.register(ep.load(), CORE_DISTRIBUTION, dist.version, name=CORE_PLUGIN)
                return
        raise PluginError(
            f"{CORE_DISTRIBUTION} {dist.version} declares no '{CORE_PLUGIN}' entry point in the "
            f"'{ENTRY_POINT_GROUP}' group; reinstall it."
        )

    def _is_disabled(self, name: str, distribution: str) -> bool:
        return distribution != CORE_DISTRIBUTION and bool({name, distribution} & self.disabled)

    def _fail(self, name: str, distribution: str, error: str, what: str) -> None:
        self.failed.append(FailedPlugin(name, distribution, error))
        warnings.warn(
            f"rlgraph plugin '{name}' from distribution '{distribution}' {what} and was skipped ({error}).",
            RuntimeWarning,
            stacklevel=3,
        )

    def _load_entry_points(self) -> None:
        seen = set()
        for ep in md.entry_points(group=ENTRY_POINT_GROUP):
            dist = ep.dist.metadata["Name"] if ep.dist is not None else "unknown"
            version = ep.dist.version if ep.dist is not None else "?"
            if (dist, ep.value) in seen:
                continue
            seen.add((dist, ep.value))
            if self._is_disabled(ep.name, dist):
                self.blocked.append(PluginInfo(ep.name, dist, version))
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # a broken plugin must never break the core
                self._fail(ep.name, dist, f"{type(exc).__name__}: {exc}", "failed to import")
                continue
            self.register(plugin, dist, version, name=ep.name)
        matched = {n for p in self.blocked for n in (p.name, p.distribution)} | {CORE_PLUGIN, CORE_DISTRIBUTION}
        unmatched = sorted(self.disabled - matched)
        if unmatched:
            listed: list[PluginInfo | FailedPlugin] = [*self._info.values(), *self.blocked, *self.failed]
            known = sorted({p.name for p in listed})
            warnings.warn(
                f"{DISABLE_ENV} / --disable-plugins names {', '.join(repr(n) for n in unmatched)}, "
                f"which matches no installed rlgraph plugin; installed plugins: {', '.join(known)}.",
                RuntimeWarning,
                stacklevel=3,
            )

    def register(self, plugin: Any, distribution: str, version: str = "?", name: str | None = None) -> bool:
        """Register a plugin object (module or instance holding hook implementations).

        ``name`` is the plugin's name (its entry-point name; default: the distribution name).
        Returns whether the plugin was registered: a blocked plugin, one whose name is taken, or
        one with invalid or unknown hook implementations is left out (the latter two are recorded
        in :attr:`failed` with a warning).
        """
        if self.pm.is_registered(plugin):
            return False
        if name is None:
            name, n = distribution, 1
            while name in self._info:
                n += 1
                name = f"{distribution}#{n}"
        if self._is_disabled(name, distribution):
            self.blocked.append(PluginInfo(name, distribution, version))
            return False
        if name in self._info:
            other = self._info[name].distribution
            self._fail(
                name,
                distribution,
                f"the plugin name '{name}' is already used by distribution '{other}'; "
                f"block one by distribution name with {DISABLE_ENV}",
                "could not be registered",
            )
            return False
        try:
            self.pm.register(plugin, name=name)
        except pluggy.PluginValidationError as exc:  # an implementation that does not fit its spec
            problem = " ".join(str(exc).split())
            self._fail(name, distribution, f"invalid hook implementation: {problem}", "could not be registered")
            return False
        self._info[name] = PluginInfo(name, distribution, version)
        self._registry = None
        self._check_pending()
        return name in self._info

    def _check_pending(self) -> None:
        """Unregister every plugin that implements a hook rlgraph does not define (pluggy's check)."""
        known = sorted(n for n, caller in vars(self.pm.hook).items() if not n.startswith("_") and caller.has_spec())
        while True:
            try:
                self.pm.check_pending()
                return
            except pluggy.PluginValidationError as exc:
                plugin = exc.plugin
                name = self.pm.get_name(plugin) or repr(plugin)
                unknown = sorted(
                    hook
                    for hook, caller in vars(self.pm.hook).items()
                    if not hook.startswith("_")
                    and not caller.has_spec()
                    and any(impl.plugin is plugin and not impl.optionalhook for impl in caller.get_hookimpls())
                )
                problems = []
                for hook in unknown:
                    close = difflib.get_close_matches(hook, known, n=1)
                    problems.append(f"unknown hook '{hook}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
                self.pm.unregister(plugin)
                info = self._info.pop(name, PluginInfo(name, "unknown", "?"))
                self._registry = None
                self._fail(
                    name,
                    info.distribution,
                    f"{', '.join(problems) or 'unknown hook'}; the rlgraph hooks are {', '.join(known)}",
                    "implements a hook rlgraph does not define",
                )

    # ------------------------------------------------------------------ queries
    @property
    def hook(self):
        """The pluggy hook relay, for lifecycle calls such as ``hook.rlgraph_on_iteration``."""
        return self.pm.hook

    def plugins(self) -> list[PluginInfo]:
        """The registered plugins, in registration order."""
        return list(self._info.values())

    def _call_registration_hook(self, kind: str, impl) -> dict:
        """One plugin's answer to ``rlgraph_<kind>()``, cached; a broken answer is reported once."""
        key = (impl.plugin_name, kind)
        if key not in self._hook_results:
            info = self._info.get(impl.plugin_name, PluginInfo(impl.plugin_name, impl.plugin_name, "?"))
            try:
                result = impl.function() or {}
                if not isinstance(result, Mapping) or not all(isinstance(k, str) for k in result):
                    raise TypeError(f"it returned {type(result).__name__}, not a dict of names")
                result = dict(result)
                problems = [
                    f"{_SINGULAR[kind]} '{n}': {p}" for n, obj in result.items() if (p := _entry_problem(kind, obj))
                ]
                if problems:
                    result = {n: obj for n, obj in result.items() if not _entry_problem(kind, obj)}
                    self._fail(
                        info.name,
                        info.distribution,
                        f"rlgraph_{kind}() registered " + "; ".join(problems),
                        "registered invalid entries, which",
                    )
            except Exception as exc:  # a broken hook must never break the core
                result = {}
                self._fail(
                    info.name,
                    info.distribution,
                    f"rlgraph_{kind}() raised {type(exc).__name__}: {exc}",
                    f"could not register its {kind}",
                )
            self._hook_results[key] = result
        return self._hook_results[key]

    def _collect(self) -> dict[str, dict[str, list[RegisteredName]]]:
        registry: dict[str, dict[str, list[RegisteredName]]] = {kind: {} for kind in KINDS}
        for kind in KINDS:
            caller = getattr(self.pm.hook, f"rlgraph_{kind}")
            for impl in caller.get_hookimpls():
                info = self._info.get(impl.plugin_name, PluginInfo(impl.plugin_name, impl.plugin_name, "?"))
                for name, obj in self._call_registration_hook(kind, impl).items():
                    registry[kind].setdefault(name, []).append(
                        RegisteredName(kind, name, obj, info.distribution, info.version, info.name)
                    )
        return registry

    def _claims(self, kind: str) -> dict[str, list[RegisteredName]]:
        if kind not in KINDS:
            raise PluginError(f"Unknown plugin kind '{kind}'; the kinds are {', '.join(KINDS)}.")
        if self._registry is None:
            self._registry = self._collect()
        return self._registry[kind]

    def names(self, kind: str) -> dict[str, RegisteredName]:
        """The usable names of one kind (``backends``, ``memories``, ...): every name with one claimant.

        A name claimed by several plugins is left out (see :meth:`contested`) until all but one
        are blocked.
        """
        return {name: claims[0] for name, claims in self._claims(kind).items() if len(claims) == 1}

    def claimants(self, kind: str) -> dict[str, list[RegisteredName]]:
        """Every registered name of one kind with all the plugins that registered it."""
        return {name: list(claims) for name, claims in self._claims(kind).items()}

    def contested(self, kind: str) -> dict[str, list[RegisteredName]]:
        """The names of one kind that more than one plugin registered, with their claimants."""
        return {name: list(claims) for name, claims in self._claims(kind).items() if len(claims) > 1}

    def get(self, kind: str, name: str, field: str | None = None) -> Any:
        """Resolve ``name`` of ``kind``, or raise a PluginError: for an unknown name it lists the
        known names (and plugins that failed or were blocked), for a contested one it names every
        claimant and how to block one."""
        where = f" (in field '{field}')" if field else ""
        claims = self._claims(kind).get(name, [])
        if len(claims) > 1:
            raise PluginError(contested_message(kind, name, claims, where))
        if claims:
            return claims[0].obj
        entries = self.names(kind)
        hint = ""
        long = isinstance(name, str) and len(name) > 100  # no name is that long: no matching, a short quote
        close = difflib.get_close_matches(name, list(entries), n=1) if isinstance(name, str) and not long else []
        if close:
            hint += f" Did you mean '{close[0]}'?"
        provider = providing_extra(name) if isinstance(name, str) and not long else None
        if provider is not None:
            dist, extra = provider
            if dist in {b.distribution for b in self.blocked}:
                hint += f" It is provided by '{dist}', which is blocked."
            else:
                hint += f" It is provided by '{dist}': {extra_install_command(extra, dist)}."
        if self.failed:
            hint += (
                " Plugins that failed to load: "
                + "; ".join(f"{f.name} ({f.distribution}): {f.error}" for f in self.failed)
                + "."
            )
        if self.blocked:
            hint += (
                " Blocked plugins (not loaded): "
                + ", ".join(f"{b.name} ({b.distribution})" for b in self.blocked)
                + f" (see {DISABLE_ENV} / --disable-plugins)."
            )
        raise PluginError(
            f"Unknown {_SINGULAR[kind]} '{name[:60] + '... (cut)' if long else name}'{where}. Known {kind}: "
            f"{', '.join(sorted(entries)) or '(none installed)'}.{hint}"
        )


def providing_extra(name: str) -> tuple[str, str] | None:
    """``(distribution, extra)`` of the rlgraph plugin that would provide ``name``, if rlgraph-core
    declares one: the extra named ``name`` or its first ``_``-separated word (``ray_apex`` -> ``ray``)
    that brings exactly one ``rlgraph-*`` distribution.

    Read from rlgraph-core's own package metadata (its ``[project.optional-dependencies]``), so the
    table of plugins lives in ``pyproject.toml`` and no plugin's name is written in core code.
    """
    try:
        requires = md.requires(CORE_DISTRIBUTION) or []
    except md.PackageNotFoundError:
        return None
    by_extra: dict[str, list[str]] = {}
    for req in requires:
        spec, _, marker = req.partition(";")
        extra = marker.split("extra ==")[-1].strip().strip("\"'") if "extra ==" in marker else None
        dist = spec.strip().split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip()
        if extra and dist.startswith("rlgraph-"):
            by_extra.setdefault(extra, []).append(dist)
    for extra in (name, name.split("_", 1)[0]):
        dists = by_extra.get(extra, [])
        if len(dists) == 1:
            return dists[0], extra
    return None


def _entry_problem(kind: str, obj: Any) -> str | None:
    """Why a registered object does not fit its kind's registration format (None: it fits)."""
    if kind == "backends":
        return backend_entry_problem(obj)
    if kind == "executors":
        return executor_entry_problem(obj)
    if kind == "components":
        return component_entry_problem(obj)
    if kind == "callbacks":
        return callback_entry_problem(obj)
    if kind == "wrappers":
        return wrapper_entry_problem(obj)
    if kind == "memories":
        return entry_problem(obj, kind="memory", base=MemorySettings, plain=False)
    return None


def block_hint(claims: list[RegisteredName]) -> str:
    """How to block all but one claimant of a contested name (core's built-ins cannot be blocked)."""
    blockable = [c.plugin for c in claims if c.distribution != CORE_DISTRIBUTION] or [claims[-1].plugin]
    return (
        f"block all but one with `rlgraph --disable-plugins <entry-point name>` or "
        f"{DISABLE_ENV}=<entry-point name> (e.g. --disable-plugins {blockable[-1]})"
    )


def contested_message(kind: str, name: str, claims: list[RegisteredName], where: str = "") -> str:
    """The explanation for a name of ``kind`` that several plugins registered."""
    who = ", and ".join(f"entry point '{c.plugin}' of distribution '{c.distribution}' {c.version}" for c in claims)
    return (
        f"The {_SINGULAR[kind]} name '{name}'{where} is registered by {len(claims)} plugins: {who}. "
        f"rlgraph does not pick one: {block_hint(claims)}, or uninstall one of the distributions."
    )


_DEFAULT: PluginManager | None = None


def get_plugin_manager(refresh: bool = False, disabled: Iterable[str] | None = None) -> PluginManager:
    """The process-wide plugin manager (created on first use; ``refresh`` re-reads entry points).

    It is created again whenever the set of blocked plugins (``disabled`` plus the
    ``RLGRAPH_DISABLE_PLUGINS`` environment variable) differs from the one it was made with.
    It holds only the name registries, never backend state, so any number of backends can
    live side by side in one process.
    """
    global _DEFAULT
    wanted = frozenset(disabled or ()) | disabled_from_env()
    if _DEFAULT is None or refresh or _DEFAULT.disabled != wanted:
        _DEFAULT = PluginManager(disabled=wanted)
    return _DEFAULT
