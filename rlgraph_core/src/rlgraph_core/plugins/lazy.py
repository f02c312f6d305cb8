"""Lazy references, so listing or resolving plugin names never imports a heavy framework."""

from __future__ import annotations

import importlib

from rlgraph_core.errors import PluginError


class LazyObject:
    """A ``"package.module:attribute"`` reference imported on first use.

    Calling it imports the target and calls it with the same arguments; :meth:`resolve`
    returns the target itself. Registering backends this way keeps ``rlgraph plugins`` and
    config validation from importing torch or TensorFlow.
    """

    def __init__(self, target: str):
        if ":" not in target:
            raise ValueError(f"Lazy target '{target}' must look like 'package.module:attribute'.")
        self.target = target
        self._obj = None

    def resolve(self):
        """Import and return the referenced object (a PluginError names the failing target)."""
        if self._obj is None:
            module, attr = self.target.split(":", 1)
            try:
                self._obj = getattr(importlib.import_module(module), attr)
            except Exception as exc:
                raise PluginError(
                    f"Plugin object '{self.target}' failed to import: "
                    f"{type(exc).__name__}: {exc}. Reinstall the package that provides it."
                ) from exc
        return self._obj

    def __call__(self, *args, **kwargs):
        return self.resolve()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"LazyObject({self.target!r})"
