"""A metric logger that writes each reporting iteration as one row of ``metrics.csv``."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

from rlgraph_core.execution.loggers import MetricLogger

__all__ = ["CsvLogger"]


class CsvLogger(MetricLogger):
    """Writes ``<out_dir>/metrics.csv``: a header row, then one row per :meth:`log` call.

    Metric dicts need not all have the same keys (evaluation rows carry extra ones, the loss
    appears once learning starts): a key seen for the first time becomes a new column and the
    file is rewritten with the wider header, so every row lines up. Missing values are empty
    cells; lists and dicts are written as JSON. An existing ``metrics.csv`` (a resumed run)
    is kept and continued.

    Args:
        out_dir: the run's output folder (created if needed).
    """

    FILENAME = "metrics.csv"

    def __init__(self, out_dir: str | Path):
        super().__init__(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.out_dir / self.FILENAME
        self._columns: list[str] = []
        self._rows: list[dict[str, str]] = []
        if self.path.is_file():
            with open(self.path, newline="") as f:
                reader = csv.DictReader(f)
                self._columns = list(reader.fieldnames or [])
                self._rows = [dict(row) for row in reader]
        self._file = None
        self._writer = None

    @staticmethod
    def _cell(value) -> str:
        """One metric value as CSV text."""
        if value is None:
            return ""
        if isinstance(value, (list, tuple, dict)):
            return json.dumps(value)
        return str(value)

    def _rewrite(self) -> None:
        """Write the whole file again (atomically) with the current columns, then keep appending."""
        if self._file is not None:
            self._file.close()
        tmp = self.path.with_name(f".{self.FILENAME}.tmp")
        with open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self._columns, restval="")
            writer.writeheader()
            writer.writerows(self._rows)
        os.replace(tmp, self.path)
        self._file = open(self.path, "a", newline="")
        self._writer = csv.DictWriter(self._file, fieldnames=self._columns, restval="")

    def log(self, metrics: dict) -> None:
        """Append one row with ``metrics`` (widening the header if it has new keys)."""
        row = {str(k): self._cell(v) for k, v in metrics.items()}
        self._rows.append(row)
        new = [k for k in row if k not in self._columns]
        if new or self._writer is None:
            self._columns.extend(new)
            self._rewrite()
        else:
            self._writer.writerow(row)
        self._file.flush()

    def close(self) -> None:
        """Close the file (a logger that never logged leaves no file behind)."""
        if self._file is not None:
            self._file.close()
            self._file = None
            self._writer = None
