"""Built-in metric loggers (console lines, a JSON-lines metrics file) and the logger base class.

A logger is made once per run, in the one process that records the run (the local process,
a distributed executor's driver, Horovod's rank 0): ``LoggerClass(out_dir)``, or
``LoggerClass(out_dir, config=run_config)`` when its constructor takes ``config``. It receives
every metrics row (:meth:`MetricLogger.log`) and, when it sets :attr:`MetricLogger.wants_weights`,
the agent's weights every ``train.histogram_interval`` rows (:meth:`MetricLogger.log_weights`).
"""

from __future__ import annotations

import inspect
from pathlib import Path

from rlgraph_core.errors import ConfigError
from rlgraph_core.execution.run_dir import json_line


class MetricLogger:
    """Base class: receives the metrics dict of each reporting iteration.

    ``out_dir`` is the run's output folder. A logger that writes no files sets
    :attr:`writes_files` to False: it then also runs (with ``out_dir=None``) in runs without an
    output folder (the Python facade's default); the others are skipped there.
    """

    #: whether the logger writes under ``out_dir`` (loggers of other classes are assumed to)
    writes_files = True
    #: Whether :meth:`log_weights` wants the agent's weights (fetching them costs a copy).
    wants_weights: bool = False

    def __init__(self, out_dir: str | Path | None):
        self.out_dir = None if out_dir is None else Path(out_dir)

    @classmethod
    def check_available(cls) -> None:
        """Raise :class:`~rlgraph_core.errors.ConfigError` if what the logger needs is not installed.

        Called when a config naming the logger is validated, so a missing extra stops the run
        before anything is built. The default needs nothing.
        """

    @classmethod
    def check_out_dir(cls, out_dir: Path) -> None:
        """Raise :class:`~rlgraph_core.errors.ConfigError` if the logger cannot write under ``out_dir``.

        Called before a run claims its output folder (and by ``--dry-run``), so that a logger
        that could not start refuses the run before anything is created. The default checks nothing.
        """

    def log(self, metrics: dict) -> None:
        """Record one iteration's metrics."""

    def log_weights(self, weights: dict, timesteps: int) -> None:
        """Record the agent's weights (``{name: numpy array}``) at ``timesteps`` env steps.

        Called every ``train.histogram_interval`` rows for loggers that set :attr:`wants_weights`.
        """

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
        ("first_update_s", "first update (static mode: compiled)", "{:.1f}s"),
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


def make_logger(cls, out_dir: str | Path, config=None) -> MetricLogger:
    """``cls(out_dir, config=config)`` when the constructor takes ``config``, else ``cls(out_dir)``."""
    target = cls.resolve() if hasattr(cls, "resolve") else cls
    try:
        takes_config = "config" in inspect.signature(target).parameters
    except (TypeError, ValueError):
        takes_config = False
    return target(Path(out_dir), config=config) if takes_config else target(Path(out_dir))


def start_loggers(names, classes, out_dir: str | Path, config=None) -> list[MetricLogger]:
    """One instance of each logger class (named ``names`` in ``train.loggers``) writing under ``out_dir``.

    A constructor that raises is one paragraph naming the logger (a ConfigError, raised before any
    training); the loggers made before it are closed first.
    """

    made: list[MetricLogger] = []
    for name, cls in zip(names, classes):
        try:
            made.append(make_logger(cls, out_dir, config))
        except Exception as exc:
            for logger in made:
                close_quietly(logger)
            raise ConfigError(
                f"train.loggers: the '{name}' logger could not start ({type(exc).__name__}: {_first_line(exc)}). "
                f"Nothing was trained; fix what it names, or remove '{name}' from train.loggers."
            ) from None
    return made


def _first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of ``exc``'s message, at most ``limit`` characters."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else "(no message)"
    return text if len(text) <= limit else text[:limit] + " ..."


def logger_name(logger) -> str:
    """How warnings name a logger: its class name."""
    return type(logger).__name__


def close_quietly(logger) -> None:
    """``logger.close()``, ignoring what it raises (used when it is dropped or others failed)."""
    try:
        logger.close()
    except Exception:
        pass


def call_logger(logger, method: str, *args) -> bool:
    """``logger.<method>(*args)``; if it raises, warn once (naming the logger and the error) and
    return False: the caller drops the logger, and the run goes on to its final checkpoint."""
    import warnings

    try:
        getattr(logger, method)(*args)
        return True
    except Exception as exc:
        warnings.warn(
            f"rlgraph: the logger {logger_name(logger)} raised {type(exc).__name__} in {method}(): {_first_line(exc)}; "
            f"it is dropped for the rest of this run, which goes on to its final checkpoint, summary.json and plot.",
            RuntimeWarning,
            stacklevel=2,
        )
        return False


def check_logger_available(cls) -> None:
    """Run the logger class's ``check_available`` (if it has one): a ConfigError when its extra is missing."""
    target = cls.resolve() if hasattr(cls, "resolve") else cls
    check = getattr(target, "check_available", None)
    if callable(check):
        check()


def metric_scalars(metrics: dict) -> dict[str, float]:
    """The numeric entries of a metrics row as floats (None, strings, lists and NaN left out)."""
    import math

    out = {}
    for key, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            out[key] = number
    return out
