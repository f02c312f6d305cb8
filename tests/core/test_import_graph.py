"""rlgraph-core's subpackages import each other without cycles, and only the application layer
(assembly, CLI, built-in registration, test harness) looks names up in the plugin manager."""

from __future__ import annotations

import ast
from pathlib import Path

import rlgraph_core

ROOT = Path(rlgraph_core.__file__).parent

#: Modules that may call ``get_plugin_manager``: they sit above agents, backends and executors
#: (``api`` is the Python facade, ``training`` the training path it shares with the CLI).
APPLICATION_LAYER = {"api", "assemble", "cli", "config", "testing", "plugins", "training"}


def _unit(module: str) -> str:
    """``rlgraph_core.agents.dqn`` -> ``agents``; ``rlgraph_core`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _modules():
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield module, path, ast.parse(path.read_text(), filename=str(path))


def import_graph() -> dict[str, dict[str, list[str]]]:
    """``{unit: {imported unit: [files]}}`` over every import statement (function-level included)."""
    graph: dict[str, dict[str, list[str]]] = {}
    for module, path, tree in _modules():
        src = _unit(module)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                if name.startswith("rlgraph_core.") and _unit(name) != src:
                    graph.setdefault(src, {}).setdefault(_unit(name), []).append(path.name)
    return graph


def find_cycle(graph: dict[str, dict[str, list[str]]]) -> list[str] | None:
    """One import cycle as a list of units, or None."""
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


def test_find_cycle_detects_a_cycle():
    assert find_cycle({"a": {"b": []}, "b": {"c": []}, "c": {"a": []}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": []}, "b": {"c": []}}) is None


def test_subpackages_import_without_cycles():
    graph = import_graph()
    assert {"agents", "assemble", "builtins", "cli", "components"} <= set(graph)  # the walk saw them
    cycle = find_cycle(graph)
    assert cycle is None, (
        "import cycle: "
        + " -> ".join(cycle)
        + " ("
        + "; ".join(f"{a}->{b} in {sorted(set(graph[a][b]))}" for a, b in zip(cycle, cycle[1:]))
        + ")"
    )


def test_only_the_application_layer_looks_names_up():
    """Agents, backends, components, memories and executors receive instances, never a registry."""
    offenders = []
    for module, path, tree in _modules():
        if _unit(module) in APPLICATION_LAYER:
            continue
        for node in ast.walk(tree):
            name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
            if name == "get_plugin_manager":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, f"get_plugin_manager used below the application layer: {offenders}"
