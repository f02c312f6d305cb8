"""The executor suite (:mod:`rlgraph_core.testing.executor_suite`) on the local executor; the Ray
executors run the same suite in tests/ray, Horovod's single rank in tests/horovod."""

from __future__ import annotations

import pytest

from rlgraph_core.plugins import get_plugin_manager
from rlgraph_core.testing.executor_suite import check_executor

if "torch" not in get_plugin_manager().names("backends"):
    pytest.skip("the torch backend (rlgraph-torch) is not installed", allow_module_level=True)


@pytest.mark.parametrize("executor", ["local"])
def test_executor_suite(executor, tmp_path):
    check_executor(executor, tmp_path / executor, again=128)
