"""rlgraph-core's modules import each other without a cycle and only downwards through the floors
of ARCHITECTURE.md; only the application layer looks names up in the plugin manager; function-local
imports of rlgraph modules each say why they are deferred; and no distribution imports another's
private names.

The graph is of modules, not folders. It holds every import statement (module-level and
function-local), every string naming a first-party module (``importlib.import_module("...")``,
``LazyObject("module:attr")``, the lazy export tables), and the package ``__init__`` files an
import runs on its way (importing ``a.b.c`` from outside ``a.b`` runs ``a/b/__init__.py``).
:data:`FLOORS` is also the source of the floor diagram in ``docs/architecture.md``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import rlgraph_core

ROOT = Path(rlgraph_core.__file__).parent
PACKAGE = ROOT.name
REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"

#: rlgraph-core's floors, bottom up: a module may import modules of its own floor or of a floor
#: below, never above. Each entry is ``(floor, module prefixes)``; a module belongs to the floor
#: of its longest matching prefix (a prefix matches the module itself and everything under it).
FLOORS: list[tuple[str, tuple[str, ...]]] = [
    (
        "spaces/errors",
        ("spaces", "errors", "lazy", "readonly", "registration", "warning_lines", "install_hints", "stats"),
    ),
    (
        "graph/backend/checkpoint",
        ("graph", "backend", "checkpoint", "testing.numpy_backend", "testing.recurrent_reference"),
    ),
    ("memories", ("memories", "datasets")),
    (
        "components/execution",
        ("components", "execution", "callbacks", "wrappers", "envs", "env_checks", "envpool_envs", "evaluation")
        + ("atari_wrappers", "integrations", "integrations.video", "action_masks", "offline", "multi_agent"),
    ),
    ("plugins", ("plugins", "integrations.tensorboard", "integrations.wandb", "testing")),
    ("config", ("config",)),
    ("agents", ("agents",)),
    ("assembly", ("assemble", "builtins", "offline.plugin")),
    ("training/export", ("training", "export")),
    ("api", ("api", "facade_config", "", "testing.executor_suite")),
    ("cli", ("cli",)),
]

#: What each floor holds, for the diagram in docs/architecture.md.
FLOOR_NOTES = {
    "spaces/errors": "spaces, error types, small pure helpers",
    "graph/backend/checkpoint": "the component model and build, the backend contract, checkpoint files",
    "memories": "replay and rollout memories (vectorised numpy), offline datasets",
    "components/execution": "the component library, env runner, recorder, local executor, envs (PettingZoo too), callbacks",
    "plugins": "hook specs, the plugin manager, logger plugins, the component test harness",
    "config": "pydantic config models and their validation through the registry",
    "agents": "DQN, PPO, A2C, SAC, IMPALA and their shared bases",
    "assembly": "a validated config turned into built parts; the built-ins' registration (core, offline)",
    "training/export": "the training function (CLI and facade share it), ONNX export",
    "api": "the Python facade (make, learn, predict, evaluate) and the package's public names",
    "cli": "the rlgraph command",
}

#: Modules that may call ``get_plugin_manager``: they sit above agents, backends and executors
#: (``api`` is the Python facade, ``training`` the training path it shares with the CLI).
APPLICATION_LAYER = {"api", "assemble", "cli", "config", "testing", "plugins", "training"}

#: The distributions whose sources must import only public names of each other.
DISTRIBUTIONS = {
    "rlgraph_core": REPO / "rlgraph_core" / "src",
    "rlgraph_torch": REPO / "rlgraph_torch" / "src",
    "rlgraph_tf": REPO / "rlgraph_tf" / "src",
    "rlgraph_ray": REPO / "rlgraph_ray" / "src",
    "rlgraph_horovod": REPO / "rlgraph_horovod" / "src",
}


def _modules(root: Path = ROOT) -> dict[str, tuple[Path, bool]]:
    """``{module name: (path, is a package __init__)}`` of every ``.py`` file under ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


MODULES = _modules()


def _known(name: str) -> str | None:
    """The first-party module ``name`` (``a.b.c`` or ``a.b:attr``) is, or lies in; None if none."""
    name = name.split(":", 1)[0]
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _raw_imports(module: str, source: str | None = None) -> list[tuple[str, int, bool]]:
    """``(imported name, line, function-local)`` for every import and module-naming string of
    ``module`` (its file, or ``source`` as if it were its text)."""
    path, is_package = MODULES[module]
    tree = ast.parse(path.read_text() if source is None else source, filename=str(path))
    base = module if is_package else module.rpartition(".")[0]
    found: list[tuple[str, int, bool]] = []

    def walk(node: ast.AST, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno, local) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    parent = base
                    for _ in range(child.level - 1):
                        parent = parent.rpartition(".")[0]
                    target = parent + ("." + child.module if child.module else "")
                else:
                    target = child.module or ""
                for alias in child.names:
                    sub = f"{target}.{alias.name}"
                    found.append((sub if sub in MODULES else target, child.lineno, local))
            elif isinstance(child, ast.Constant) and isinstance(child.value, str):
                text = child.value
                if re.fullmatch(rf"{PACKAGE}(\.\w+)+(:\w+)?", text) and text.split(":")[0] in MODULES:
                    found.append((text, child.lineno, local))
            walk(child, local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(tree, False)
    return found


def import_graph() -> dict[str, dict[str, list[tuple[int, bool]]]]:
    """``{module: {imported module: [(line, function-local), ...]}}`` over rlgraph-core's modules.

    An import of ``a.b.c`` from a module outside ``a.b`` also counts as an import of the package
    ``a.b`` (Python runs its ``__init__`` first).
    """
    graph: dict[str, dict[str, list[tuple[int, bool]]]] = {}
    for module in MODULES:
        for name, line, local in _raw_imports(module):
            if name != PACKAGE and not name.startswith(PACKAGE + "."):
                continue
            target = _known(name)
            if target is None or target == module:
                continue
            targets = [target]
            parent = target
            while "." in parent:
                parent = parent.rpartition(".")[0]
                if parent == PACKAGE or module == parent or module.startswith(parent + "."):
                    break
                targets.append(parent)
            for t in targets:
                graph.setdefault(module, {}).setdefault(t, []).append((line, local))
    return graph


def floor_of(module: str) -> int | None:
    """The index in :data:`FLOORS` of ``module``'s floor (longest matching prefix), or None."""
    short = module[len(PACKAGE) + 1 :] if module.startswith(PACKAGE + ".") else ""
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(FLOORS):
        for prefix in prefixes:
            if short == prefix or short.startswith(prefix + ".") or prefix == "" and short == "":
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), index)
    return None if best is None else best[1]


def find_cycle(graph) -> list[str] | None:
    """One import cycle as a list of nodes (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, {}):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in list(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def floors_markdown() -> str:
    """The floor table of docs/architecture.md, made from :data:`FLOORS` (top floor first)."""
    lines = ["| floor | name | modules of `rlgraph_core` | what it holds |", "|---|---|---|---|"]
    for index in range(len(FLOORS) - 1, -1, -1):
        name, prefixes = FLOORS[index]
        held = ", ".join("the package `__init__`" if p == "" else f"`{p}`" for p in prefixes)
        lines.append(f"| {index} | {name} | {held} | {FLOOR_NOTES[name]} |")
    return "\n".join(lines)


def test_find_cycle_detects_a_cycle():
    assert find_cycle({"a": {"b": []}, "b": {"c": []}, "c": {"a": []}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": []}, "b": {"c": []}}) is None


def test_the_graph_follows_strings_function_local_imports_and_packages():
    graph = import_graph()
    manager = graph[f"{PACKAGE}.plugins.manager"]
    assert f"{PACKAGE}.plugins.hookspecs" in manager  # a module-level import
    assert f"{PACKAGE}.api" in graph[PACKAGE]  # a lazy-export string
    assert f"{PACKAGE}.testing" in graph[f"{PACKAGE}.export.tracing"]  # the package __init__ an import runs
    source = (
        "import importlib\n"
        "def f():\n"
        "    from rlgraph_core.agents import dqn\n"
        "    return importlib.import_module('rlgraph_core.cli')\n"
    )
    assert _raw_imports(f"{PACKAGE}.errors", source) == [
        ("importlib", 1, False),
        (f"{PACKAGE}.agents.dqn", 3, True),
        (f"{PACKAGE}.cli", 4, True),
    ]


def test_modules_import_without_cycles():
    graph = import_graph()
    assert len(graph) > 80  # the walk saw the modules
    cycle = find_cycle(graph)
    assert cycle is None, (
        "import cycle: "
        + " -> ".join(f"{a} (line {graph[a][b][0][0]})" for a, b in zip(cycle, cycle[1:]))
        + f" -> {cycle[-1]}"
    )


def test_every_module_has_a_floor():
    assert [m for m in MODULES if floor_of(m) is None] == []


def test_imports_go_down_the_floors():
    """A module imports its own floor or floors below (ARCHITECTURE.md: spaces/errors -> ... -> cli)."""
    up = []
    for module, edges in import_graph().items():
        for target, uses in edges.items():
            if floor_of(target) > floor_of(module):
                up.append(
                    f"{module} (floor {FLOORS[floor_of(module)][0]}) line {uses[0][0]} imports {target} "
                    f"(floor {FLOORS[floor_of(target)][0]})"
                )
    assert not up, "imports going up the floors:\n" + "\n".join(up)


def _commented(path: Path, line: int) -> bool:
    lines = path.read_text().splitlines()
    return "#" in lines[line - 1] or lines[line - 2].strip().startswith("#")


def test_function_local_imports_say_why():
    """A function-local import of an rlgraph module defers something heavy or optional; it says which."""
    silent = []
    for module, edges in import_graph().items():
        path = MODULES[module][0]
        for target, uses in edges.items():
            silent += [
                f"{path.relative_to(ROOT)}:{line} ({target})"
                for line, local in uses
                if local and not _commented(path, line)
            ]
    assert not silent, "function-local imports without a reason comment: " + ", ".join(sorted(set(silent)))


def test_only_the_application_layer_looks_names_up():
    """Agents, backends, components, memories and executors receive instances, never a registry."""
    offenders = []
    for module, (path, _) in MODULES.items():
        unit = module.split(".")[1] if "." in module else "__init__"
        if unit in APPLICATION_LAYER:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
            if name == "get_plugin_manager":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, f"get_plugin_manager used below the application layer: {offenders}"


def test_distributions_import_only_public_names_of_each_other():
    offenders = []
    for dist, src in DISTRIBUTIONS.items():
        for path in sorted(src.rglob("*.py")) if src.is_dir() else []:
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                    continue
                other = node.module.split(".")[0]
                if other == dist or other not in DISTRIBUTIONS:
                    continue
                private = [a.name for a in node.names if a.name.startswith("_")]
                private += [p for p in node.module.split(".")[1:] if p.startswith("_")]
                if private:
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno} {node.module} {private}")
    assert not offenders, "private names imported across distributions: " + "; ".join(offenders)


def test_architecture_doc_draws_the_floors_of_this_table():
    text = DOC.read_text()
    assert floors_markdown() in text, (
        f"{DOC.relative_to(REPO)} does not hold the floor diagram of tests/core/test_import_graph.py's FLOORS; "
        f"replace its diagram with:\n{floors_markdown()}"
    )
