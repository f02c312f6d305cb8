"""The jax backend against the core's public conformance suite (both modes)."""

import pytest

pytest.importorskip("jax")

from rlgraph_core.testing.conformance import BackendConformance  # noqa: E402


class TestJaxConformance(BackendConformance):
    """Every contract test of :mod:`rlgraph_core.testing.conformance` on ``jax``."""

    backend_name = "jax"
