"""The learning-curve plot written at the end of a run."""

from __future__ import annotations

from pathlib import Path

from rlgraph_core.execution.run_dir import read_metrics


def plot_learning_curve(metrics_file: str | Path, out_png: str | Path, title: str = "") -> bool:
    """Plot training and evaluation returns against timesteps; False if nothing to plot."""
    rows = read_metrics(metrics_file)  # a torn last line (after a crash) is skipped with a warning
    if not rows:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for key, label in (("episode_return_mean", "training episodes"), ("eval_return_mean", "evaluation")):
        pts = [(r["timesteps"], r[key]) for r in rows if r.get(key) is not None]
        if pts:
            ax.plot(*zip(*pts), marker="o" if key.startswith("eval") else None, label=label)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("mean episode return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)
    plt.close(fig)
    return True
