"""The executor suite (:mod:`rlgraph_core.testing.executor_suite`) on the ``horovod`` executor's
single rank (no launcher, so no Horovod needed), driven through the Python facade: the same
counters and episode bookkeeping as the local and Ray executors'."""

from __future__ import annotations

import pytest

from rlgraph_core.plugins import get_plugin_manager
from rlgraph_core.testing.executor_suite import check_executor

if "torch" not in get_plugin_manager().names("backends"):
    pytest.skip("the torch backend (rlgraph-torch) is not installed", allow_module_level=True)


@pytest.mark.parametrize("executor", ["horovod"])
def test_executor_suite(executor, tmp_path, monkeypatch):
    for var in ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        monkeypatch.delenv(var, raising=False)
    summary = check_executor(executor, tmp_path / executor, again=128)
    assert summary["ranks"] == 1
