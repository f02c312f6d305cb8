"""Shared pieces of the rlgraph-ray tests: one private Ray session per test module."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")


@pytest.fixture(scope="module")
def ray_session(tmp_path_factory):
    """A private local Ray (2 CPUs, no dashboard) for the whole module; the executors reuse it."""
    ray = pytest.importorskip("ray")
    tmp = tmp_path_factory.mktemp("ray")
    ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=str(tmp), configure_logging=False)
    yield ray
    ray.shutdown()
