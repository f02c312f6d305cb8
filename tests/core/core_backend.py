"""The backend that whole-config tests in tests/core validate against.

The shipped configs name the torch backend. Where rlgraph-torch is installed they validate as
they are; where it is not (the core nox session has no framework) :func:`on_core_backend` makes
them name the framework-free numpy test backend instead, which :data:`BACKEND` registers with the
process's plugin manager. So the core session exercises the core's validation rather than skipping
it; only tests about the torch backend's own names (its devices) still need rlgraph-torch.
"""

from __future__ import annotations

from rlgraph_core.config.run import DEFAULT_CONFIG as SHIPPED_DEFAULT
from rlgraph_core.config.run import apply_overrides
from rlgraph_core.config.run import load_shipped_config as _load_shipped_config
from rlgraph_core.plugins import get_plugin_manager, hookimpl


class NumpyBackendPlugin:
    """Registers the numpy test backend (no autodiff: configs validate and agents build, not train)."""

    @hookimpl
    def rlgraph_backends(self):
        from rlgraph_core.testing.numpy_backend import NumpyBackend

        return {"numpy": NumpyBackend}


def _core_backend() -> str:
    pm = get_plugin_manager()
    names = pm.names("backends")
    if "torch" in names:
        return "torch"
    if "numpy" not in names:
        pm.register(NumpyBackendPlugin(), "rlgraph-core-tests", name="numpy-test-backend")
    return "numpy"


#: ``torch`` where rlgraph-torch is installed, else ``numpy`` (registered on import).
BACKEND = _core_backend()


def on_core_backend(raw: dict) -> dict:
    """``raw`` as is where the torch backend is installed, else with ``train.backend=numpy``."""
    return raw if BACKEND == "torch" else apply_overrides(raw, ["train.backend=numpy"])


#: The default config on the core tests' backend.
DEFAULT_CONFIG = on_core_backend(SHIPPED_DEFAULT)


def load_shipped_config(name: str) -> dict:
    """A shipped config on the core tests' backend."""
    return on_core_backend(_load_shipped_config(name))
