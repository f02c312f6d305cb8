"""Build the API reference of rlgraph's public names with pdoc, and fail on broken references.

Usage: ``python docs/build_api.py [OUT]`` (default ``build/api``); the nox ``docs`` session runs it.

pdoc renders the modules in :data:`MODULES` (their docstrings are reStructuredText: pdoc turns
``:class:`Name``` and the other roles into links where it can). pdoc leaves a reference it cannot
resolve as plain text without a word, so this script checks every role reference of every
documented docstring itself: each target must import (``pkg.module.Name.attr``) or be a name
visible from where the docstring is (its module's globals, its class's attributes). Any warning
pdoc raises (a module that fails to import, a docstring it cannot parse) is an error too. The exit
status is 1 with one line per broken reference, naming where it is.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import warnings
from pathlib import Path

import pdoc
import pdoc.doc
import pdoc.render

#: The public modules: the package faces and the modules their public names live in.
MODULES = [
    "rlgraph_core",
    "rlgraph_core.api",
    "rlgraph_core.callbacks",
    "rlgraph_core.training",
    "rlgraph_core.agents",
    "rlgraph_core.components",
    "rlgraph_core.spaces",
    "rlgraph_core.config.run",
    "rlgraph_core.config.common",
    "rlgraph_core.config.sections",
    "rlgraph_core.config.errors",
    "rlgraph_core.errors",
    "rlgraph_core.plugins",
    "rlgraph_core.execution.base",
    "rlgraph_core.execution.env_runner",
    "rlgraph_core.execution.counters",
    "rlgraph_core.execution.recorder",
    "rlgraph_core.execution.run_dir",
    "rlgraph_core.memories",
    "rlgraph_core.backend",
    "rlgraph_core.testing.executor_suite",
]

#: A Sphinx-style role reference: ``:func:`name```, ``:class:`~pkg.Name```, ``:meth:`Text <target>```.
ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|exc|obj):`(?:[^`<]*<)?~?\.?([A-Za-z_][\w.]*)>?`")


def _resolve_absolute(target: str) -> bool:
    """Whether ``target`` is an importable module, or a module followed by attributes."""
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            return False
        return True
    return False


_SELF_ATTR = re.compile(r"self\.([A-Za-z_]\w*)\s*(?::[^=\n]+)?=[^=]")


def _instance_attributes(cls: type) -> set[str]:
    """Attributes instances of ``cls`` get in its methods (``self.name = ...``), base classes included."""
    names: set[str] = set()
    for klass in cls.__mro__:
        try:
            names.update(_SELF_ATTR.findall(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
    return names


def _has(obj, name: str) -> bool:
    """Whether ``obj`` has attribute ``name``, counting a class's instance attributes."""
    return hasattr(obj, name) or (isinstance(obj, type) and name in _instance_attributes(obj))


def _resolve_from(target: str, scopes: list[object]) -> bool:
    """Whether ``target`` is reachable as ``scope.first.rest`` from one of ``scopes`` (a module's
    globals, a class and its instance attributes), or absolutely."""
    first, *rest = target.split(".")
    for scope in scopes:
        namespace = vars(scope) if isinstance(scope, type) else getattr(scope, "__dict__", {})
        if first in namespace or (isinstance(scope, type) and _has(scope, first)):
            obj = getattr(scope, first, namespace.get(first))
            for name in rest:
                if not _has(obj, name):
                    break
                obj = getattr(obj, name, None)
            else:
                return True
    return _resolve_absolute(target)


def _false_alarm(message: str) -> bool:
    """pdoc's warning about a NamedTuple's generated ``__init__``, whose annotations it evaluates
    in a namespace of Python's own (it cannot see the defining module's imports)."""
    m = re.search(r"for (\S+)\.__init__\.", message)
    if "Error parsing type annotation" not in message or m is None:
        return False
    module, _, name = m.group(1).rpartition(".")
    cls = getattr(sys.modules.get(module), name, None)
    return isinstance(cls, type) and issubclass(cls, tuple)


def _walk(doc: pdoc.doc.Doc, module, cls=None):
    """``(doc, module, class)`` for ``doc`` and every member documented under it."""
    yield doc, module, cls
    if isinstance(doc, pdoc.doc.Class):
        for member in doc.own_members:
            yield from _walk(member, module, doc.obj)
    elif isinstance(doc, pdoc.doc.Module):
        for member in doc.own_members:
            yield from _walk(member, module, None)


def broken_references(modules: list[str]) -> list[str]:
    """One line per role reference in the docstrings of ``modules`` that resolves to nothing."""
    broken = []
    for name in modules:
        module_doc = pdoc.doc.Module(importlib.import_module(name))
        for doc, module, cls in _walk(module_doc, module_doc.obj):
            if isinstance(doc, pdoc.doc.Class):
                cls = doc.obj  # a class docstring names its own members
            # the face (rlgraph_core.agents) re-exports names: the defining module's globals count
            home = sys.modules.get(getattr(cls if cls is not None else doc.obj, "__module__", None) or "")
            scopes = [s for s in (cls, home, module) if s is not None]
            for target in ROLE.findall(doc.docstring or ""):
                if not _resolve_from(target, scopes):
                    broken.append(f"{doc.fullname}: reference to '{target}' resolves to nothing")
    return sorted(set(broken))


def main(argv: list[str]) -> int:
    out = Path(argv[1] if len(argv) > 1 else "build/api")
    pdoc.render.configure(docformat="restructuredtext", search=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc(*MODULES, output_directory=out)
    problems = [
        f"pdoc: {w.category.__name__}: {w.message}"
        for w in caught
        if issubclass(w.category, UserWarning) and not _false_alarm(str(w.message))
    ]
    problems += broken_references(MODULES)
    pages = sorted(p.name for p in out.glob("**/*.html"))
    for line in problems:
        print(line, file=sys.stderr)
    print(f"docs: {len(pages)} pages in {out}; {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
