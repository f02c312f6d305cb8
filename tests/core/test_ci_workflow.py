"""The GitHub workflow runs every nox session of the default set (the `docs` session was once missing)."""

from __future__ import annotations

import ast
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _default_sessions() -> set[str]:
    """The names in ``nox.options.sessions`` of the noxfile, with their ``-{PYTHON}`` suffix dropped."""
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "nox.options.sessions":
            names = set()
            for elt in node.value.elts:
                text = elt.value if isinstance(elt, ast.Constant) else ast.unparse(elt.values[0]).strip("'\"")
                names.add(text.rstrip("-"))
            return names
    raise AssertionError("noxfile.py sets no nox.options.sessions")


def test_the_workflow_matrix_runs_every_default_session():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())
    in_workflow = {s for job in workflow["jobs"].values() for s in job["strategy"]["matrix"]["session"]}
    sessions = _default_sessions()
    assert {"lint", "core", "torch", "docs"} <= sessions  # the parser read the list
    assert in_workflow == sessions, (
        f"only in nox: {sessions - in_workflow}; only in the workflow: {in_workflow - sessions}"
    )
