"""Resolve a backend by registry name through the plugin manager."""

from __future__ import annotations

from rlgraph_core.backend.contract import Backend


def make_backend(name: str, mode: str = "eager", device: str = "auto", seed: int | None = None,
                 plugin_manager=None) -> Backend:
    """Instantiate the backend registered as ``name`` (e.g. ``"torch"``) in ``mode``."""
    from rlgraph_core.plugins import get_plugin_manager

    pm = plugin_manager or get_plugin_manager()
    factory = pm.get("backends", name, field="backend")
    return factory(mode=mode, device=device, seed=seed)
