"""The tf backend against the core's public conformance suite (both modes)."""

import pytest

pytest.importorskip("rlgraph_tf")

from rlgraph_core.testing.conformance import BackendConformance  # noqa: E402


class TestTFConformance(BackendConformance):
    """Every contract test of :mod:`rlgraph_core.testing.conformance` on ``tf``."""

    backend_name = "tf"
