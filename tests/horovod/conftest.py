"""Horovod tests: the ``test_hvd_*`` modules launch ``horovodrun -np 2 --gloo`` subprocesses.

Those need Horovod built for this interpreter (``python -m rlgraph_horovod.install``). Without it
they skip, except where ``RLGRAPH_REQUIRE_HOROVOD=1`` (the nox session sets it): there a missing
Horovod is a failure, not a skip.
"""

import importlib.util
import os

import pytest


def _horovod_installed() -> bool:
    """Whether the real Horovod package imports. pytest puts ``tests/`` on ``sys.path`` (it holds a
    conftest), so this folder itself is found as a namespace package ``horovod``, with no origin."""
    spec = importlib.util.find_spec("horovod")
    return spec is not None and spec.origin is not None


def pytest_collection_modifyitems(config, items):
    if _horovod_installed():
        return
    if os.environ.get("RLGRAPH_REQUIRE_HOROVOD") == "1":
        raise pytest.UsageError(
            "RLGRAPH_REQUIRE_HOROVOD=1 but horovod is not installed; run `python -m rlgraph_horovod.install`."
        )
    skip = pytest.mark.skip(reason="horovod is not installed (python -m rlgraph_horovod.install)")
    for item in items:
        if item.fspath.basename.startswith("test_hvd_"):
            item.add_marker(skip)
