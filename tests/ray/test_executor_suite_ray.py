"""The executor suite (:mod:`rlgraph_core.testing.executor_suite`) on the three Ray executors, driven
through the Python facade (``make(..., executor=NAME).learn``), in one private Ray session for the
module: the same counters and episode bookkeeping as the local executor's (tests/torch)."""

from __future__ import annotations

import pytest

from rlgraph_core.plugins import get_plugin_manager
from rlgraph_core.testing.executor_suite import check_executor

if "ray_sync" not in get_plugin_manager().names("executors"):
    pytest.skip("rlgraph-ray is not installed", allow_module_level=True)


@pytest.mark.parametrize("executor", ["ray_sync", "ray_apex", "ray_impala"])
def test_executor_suite(executor, ray_session, tmp_path):
    summary = check_executor(executor, tmp_path / executor)
    assert summary["executor"] == executor and summary["worker_restarts"] == 0
