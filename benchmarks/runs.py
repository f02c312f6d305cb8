"""One rlgraph training run of a benchmark, observed by a plugin, in a scratch folder.

The benchmarks that clock rlgraph's real executors (``bench_dqn``, ``bench_sac``, ``bench_ppo``)
register a plugin that records each metric row, train in a temporary output folder and remove
both afterwards; :func:`observed_run` is that setup once.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from typing import Iterator

from rlgraph_core.plugins import get_plugin_manager


@contextlib.contextmanager
def observed_run(plugin, name: str) -> Iterator[tuple[object, str]]:
    """``(plugin manager with plugin registered as name, scratch output folder)`` for one run;
    the plugin is unregistered and the folder removed when the block ends, however it ends."""
    pm = get_plugin_manager()
    pm.register(plugin, name)
    out_dir = tempfile.mkdtemp(prefix=f"{name}_")
    try:
        yield pm, out_dir
    finally:
        pm.pm.unregister(plugin)
        shutil.rmtree(out_dir, ignore_errors=True)
