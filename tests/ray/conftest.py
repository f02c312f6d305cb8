"""Shared pieces of the rlgraph-ray tests: one private Ray session for every module that asks for it."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")


@pytest.fixture(scope="session")
def _ray_temp_dir(tmp_path_factory):
    """The temp dir of the shared Ray session; ended (and Ray shut down) with the test session."""
    path = tmp_path_factory.mktemp("ray")
    yield path
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


@pytest.fixture(scope="module")
def ray_session(_ray_temp_dir):
    """A private local Ray (2 CPUs, no dashboard) that the executors reuse.

    One session serves every module that asks for it: ``ray.init`` takes 4-11 s here and a
    shutdown 1-2 s, paid once instead of once per module. It is started again only when a module
    in between shut it down (those testing ``--address``, the CLI or a cluster start Ray their own
    way, and the image module starts one whose workers see its env module, each shutting down any
    session it finds). The executors end their actors and placement groups
    at the end of each run, so nothing of one module's runs is left to the next.
    """
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            _temp_dir=str(_ray_temp_dir),
            configure_logging=False,
        )
    yield ray
