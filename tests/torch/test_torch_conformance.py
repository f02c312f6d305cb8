"""The torch backend against the core's public conformance suite (both modes)."""

import pytest

pytest.importorskip("rlgraph_torch")

from rlgraph_core.testing.conformance import BackendConformance  # noqa: E402


class TestTorchConformance(BackendConformance):
    """Every contract test of :mod:`rlgraph_core.testing.conformance` on ``torch``."""

    backend_name = "torch"
