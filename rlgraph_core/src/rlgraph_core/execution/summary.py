"""What a finished run leaves in its output folder beside the checkpoint: ``summary.json`` and the plot."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from rlgraph_core.execution.plotting import plot_learning_curve

__all__ = ["plot_title", "write_summary"]


def plot_title(config) -> str:
    """The learning curve's title: agent, env, backend, mode (and the executor unless local)."""
    tc = config.train
    executor = "" if tc.executor == "local" else f", {tc.executor}"
    return f"{config.agent.type} on {config.env.id} ({tc.backend}, {tc.mode}{executor})"


def write_summary(out_dir: Path, summary: dict, config) -> None:
    """Write ``summary.json`` and, when the run logged metrics rows, ``learning_curve.png``.

    A write that fails (e.g. the disk is full) is warned about: the caller still has the summary.
    """
    try:
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        metrics = out_dir / "metrics.jsonl"
        if metrics.is_file():
            plot_learning_curve(metrics, out_dir / "learning_curve.png", plot_title(config))
    except OSError as exc:
        warnings.warn(
            f"rlgraph: could not write summary.json or the plot in '{out_dir}': {exc}",
            RuntimeWarning,
            stacklevel=3,
        )
