"""One rlgraph training run of a benchmark, observed by a plugin, in a scratch folder.

The benchmarks that clock rlgraph's real executors (``bench_dqn``, ``bench_sac``, ``bench_ppo``)
register a plugin that records each metric row, train in a temporary output folder and remove
both afterwards; :func:`observed_run` is that setup once, and :func:`clocked_train` the ``train``
section of such a run (no evaluation, no loggers, no progress bar).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from typing import Iterator

from rlgraph_core.plugins import get_plugin_manager


def clocked_train(
    total_timesteps: int, log_interval: int, seed: int, backend: str, mode: str, device: str = "cpu"
) -> dict:
    """The ``train`` section of a clocked run: a metric row every ``log_interval`` env steps (the
    plugin's clock marks), and nothing else that would take time inside the timed window."""
    return {
        "total_timesteps": total_timesteps,
        "eval_interval": 10**12,
        "log_interval": log_interval,
        "target_return": None,
        "loggers": [],
        "progress_bar": False,
        "seed": seed,
        "backend": backend,
        "mode": mode,
        "device": device,
    }


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
