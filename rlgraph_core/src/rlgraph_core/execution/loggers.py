"""Built-in metric loggers: console lines and a JSON-lines metrics file."""

from __future__ import annotations

from pathlib import Path

from rlgraph_core.execution.run_dir import json_line


class MetricLogger:
    """Base class: receives the metrics dict of each reporting iteration.

    ``out_dir`` is the run's output folder. A logger that writes no files sets
    :attr:`writes_files` to False: it then also runs (with ``out_dir=None``) in runs without an
    output folder (the Python facade's default); the others are skipped there.
    """

    #: whether the logger writes under ``out_dir`` (loggers of other classes are assumed to)
    writes_files = True

    def __init__(self, out_dir: str | Path | None):
        self.out_dir = None if out_dir is None else Path(out_dir)

    def log(self, metrics: dict) -> None:
        """Record one iteration's metrics."""

    def close(self) -> None:
        """Flush and release resources."""


class ConsoleLogger(MetricLogger):
    """Prints one compact line per iteration (through tqdm so the progress bar stays intact)."""

    writes_files = False

    KEYS = (
        ("timesteps", "steps", "{:d}"),
        ("episode_return_mean", "return", "{:.1f}"),
        ("eval_return_mean", "eval", "{:.1f}"),
        ("loss", "loss", "{:.4f}"),
        ("env_steps_per_s", "env/s", "{:.0f}"),
        ("updates_per_s", "upd/s", "{:.0f}"),
        ("wall_time", "time", "{:.1f}s"),
    )

    def log(self, metrics):
        from tqdm import tqdm

        parts = []
        for key, label, fmt in self.KEYS:
            value = metrics.get(key)
            if value is not None:
                parts.append(f"{label} {fmt.format(int(value) if fmt == '{:d}' else value)}")
        tqdm.write(" | ".join(parts))


class JsonlLogger(MetricLogger):
    """Appends each iteration's metrics as one JSON object per line to ``metrics.jsonl`` (NaN -> null)."""

    def __init__(self, out_dir):
        super().__init__(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._file = open(self.out_dir / "metrics.jsonl", "a")

    def log(self, metrics):
        self._file.write(json_line(metrics) + "\n")
        self._file.flush()

    def close(self):
        self._file.close()
