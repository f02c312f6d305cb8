"""The executor contract and the helpers every executor shares."""

from __future__ import annotations

import abc
from pathlib import Path


class Executor(abc.ABC):
    """Runs a training job (validated run config + environment + stop condition).

    Args:
        config: a :class:`~rlgraph_core.config.run.RunConfig`.
        out_dir: where metrics, plots and checkpoints go.
        resume_dir: a checkpoint directory to continue from, or None.
        plugin_manager: the plugin manager to resolve names with (default: the process one).
    """

    def __init__(self, config, out_dir: str | Path, resume_dir: str | Path | None = None, plugin_manager=None):
        from rlgraph_core.plugins import get_plugin_manager

        self.config = config
        self.out_dir = Path(out_dir)
        self.resume_dir = Path(resume_dir) if resume_dir else None
        self.pm = plugin_manager or get_plugin_manager()

    @abc.abstractmethod
    def run(self) -> dict:
        """Train until the stop condition; return a summary dict (final metrics, paths)."""
