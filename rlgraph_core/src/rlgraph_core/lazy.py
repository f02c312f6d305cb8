"""Lazy public names for a package (PEP 562): each name's module is imported on first use, so
importing the package (or one of its modules) does not import all of them.

rlgraph-core's own packages use it, and so do the backend plugins, whose package must be
importable without their framework (``rlgraph_torch.TorchBackend`` imports torch on first use).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Iterable


def lazy_exports(
    namespace: dict[str, Any], exports: dict[str, str], names: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's ``__getattr__`` and ``__dir__``.

    Args:
        namespace: the package's ``globals()`` (a looked-up name is cached there).
        exports: public name -> absolute name of the module that defines it.
        names: what ``dir(package)`` lists.
    """
    listed = sorted(names)

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return listed

    return __getattr__, __dir__
