"""Documentation that cannot rot: the Python code blocks of the README and docs/ run (or import).

* ``docs/quickstart.md``: every block, in order, in one fresh interpreter in an empty folder; the
  values its comments promise are checked in the output.
* ``README.md``: the Stable-Baselines3-equivalent block on every installed backend and mode (the
  budget cut to 512 env steps for the three it is not written for), and the two "by hand" blocks.
* ``docs/plugins.md``: every block parses, and every ``from rlgraph_core... import`` in it works
  (the sketches elide bodies with ``...``, so they are not run).
"""

from __future__ import annotations

import ast
import builtins
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rlgraph_core.plugins import get_plugin_manager

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = [b for b in ("torch", "tf") if b in get_plugin_manager().names("backends")]


def python_blocks(path: Path) -> list[str]:
    """The ```python fenced blocks of a markdown file, in order."""
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), flags=re.S | re.M)


def _run(code: str) -> None:
    exec(compile(code, "<docs>", "exec"), {"__name__": "__docs__"})


def test_quickstart_blocks_run_in_order(tmp_path):
    if "torch" not in BACKENDS:
        pytest.skip("the quickstart uses the torch backend")
    code = "\n\n".join(python_blocks(ROOT / "docs" / "quickstart.md"))
    assert "rl.make(" in code and "rl.load(" in code and "rl.Callback" in code and "class Corridor" in code
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "512 total_timesteps"
    assert "640" in lines and "384 callback StopAfterUpdates" in lines and "128 callback" in lines
    assert (tmp_path / "ppo_cartpole_ckpt" / "meta.json").is_file()
    assert {p.name for p in tmp_path.iterdir()} == {"ppo_cartpole_ckpt", ".ppo_cartpole_ckpt.versions"}  # nothing else


@pytest.mark.parametrize("mode", ["eager", "static"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_readme_sb3_equivalent_runs_on_every_backend_and_mode(backend, mode, tmp_path, monkeypatch):
    block = python_blocks(ROOT / "README.md")[0]
    assert 'backend="torch", mode="eager"' in block and "total_timesteps=10_000" in block
    assert len([line for line in block.splitlines() if line.strip() and not line.startswith("import")]) <= 5
    if (backend, mode) != ("torch", "eager"):
        block = block.replace('backend="torch", mode="eager"', f'backend="{backend}", mode="{mode}"')
        block = block.replace("total_timesteps=10_000", "total_timesteps=512")
    monkeypatch.chdir(tmp_path)
    _run(block)
    assert list(tmp_path.iterdir()) == []


def test_readme_by_hand_blocks_run(tmp_path, monkeypatch):
    if "torch" not in BACKENDS:
        pytest.skip("the README's blocks use the torch backend")
    blocks = python_blocks(ROOT / "README.md")
    assert len(blocks) == 3
    monkeypatch.chdir(tmp_path)
    _run(blocks[1] + "\n" + blocks[2])
    assert (tmp_path / "ckpt" / "meta.json").is_file()


@pytest.mark.parametrize("index", range(len(python_blocks(ROOT / "docs" / "plugins.md"))))
def test_plugins_md_blocks_parse_and_import_what_they_use(index):
    code = python_blocks(ROOT / "docs" / "plugins.md")[index]
    tree = ast.parse(code)
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("rlgraph_core"):
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{node.module} has no {alias.name}"
            imported.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            imported.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    defined |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) for a in n.args.args}
    # every capitalised name a block uses as a base class or decorator is imported or defined in it
    used = {
        n.id
        for node in ast.walk(tree)
        if isinstance(node, (ast.ClassDef, ast.FunctionDef))
        for n in [*getattr(node, "bases", []), *node.decorator_list]
        if isinstance(n, ast.Name)
    }
    used |= {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    used |= {
        n.id
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign)
        for n in ast.walk(node.annotation)
        if isinstance(n, ast.Name)
    }
    missing = sorted(used - imported - defined - set(dir(builtins)))
    assert not missing, f"docs/plugins.md block {index} uses {missing} without importing them"
