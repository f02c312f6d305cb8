"""The ``tensorboard`` metric logger (extra ``tensorboard``: tensorboardX, no deep-learning framework).

Writes TensorBoard event files under ``<out_dir>/tensorboard``: every numeric metric of every
row as a scalar tagged with its metrics.jsonl key (``episode_return_mean``, ``eval_return_mean``,
``loss`` ...) at step ``timesteps``, and a histogram of every weight (``weights/<name>``) every
``train.histogram_interval`` rows. ``tensorboard --logdir runs/`` shows them.
"""

from __future__ import annotations

from rlgraph_core.errors import ConfigError
from rlgraph_core.execution.loggers import MetricLogger, metric_scalars
from rlgraph_core.execution.out_dir import _probe_writable
from rlgraph_core.integrations import missing_extra
from rlgraph_core.plugins import hookimpl


class TensorBoardLogger(MetricLogger):
    """Metric rows as TensorBoard scalars and weight histograms (tensorboardX's ``SummaryWriter``)."""

    wants_weights = True

    def __init__(self, out_dir):
        super().__init__(out_dir)
        try:
            from tensorboardX import SummaryWriter
        except ImportError as exc:
            raise missing_extra("The 'tensorboard' logger", "tensorboardX", "tensorboard", exc) from None
        self.log_dir = self.out_dir / "tensorboard"
        self.writer = SummaryWriter(logdir=str(self.log_dir), flush_secs=10)

    @classmethod
    def check_available(cls) -> None:
        """A ConfigError naming the extra when tensorboardX is not installed."""
        import importlib.util

        if importlib.util.find_spec("tensorboardX") is None:
            raise missing_extra("The 'tensorboard' logger (train.loggers)", "tensorboardX", "tensorboard")

    @classmethod
    def check_out_dir(cls, out_dir) -> None:
        """A ConfigError when ``<out_dir>/tensorboard`` exists but is not a writable folder."""
        import os

        folder = out_dir / "tensorboard"
        problem = None
        if os.path.lexists(folder) and not folder.is_dir():
            problem = "is not a folder"
        elif folder.is_dir() and (why := _probe_writable(folder)):
            problem = f"cannot be written ({why})"
        if problem:
            raise ConfigError(
                f"train.loggers: the 'tensorboard' logger writes its event files into '{folder}', which {problem}. "
                f"Nothing was run; move it away, make it a writable folder, pass another --out folder, or remove "
                f"'tensorboard' from train.loggers."
            )

    def log(self, metrics):
        """Every numeric metric as a scalar at step ``metrics['timesteps']``."""
        step = int(metrics.get("timesteps", 0))
        for key, value in metric_scalars(metrics).items():
            if key != "timesteps":
                self.writer.add_scalar(key, value, step)

    def log_weights(self, weights, timesteps):
        """One histogram per weight array, tagged ``weights/<name>``."""
        for name, value in weights.items():
            if getattr(value, "size", 0):
                self.writer.add_histogram(f"weights/{name}", value, int(timesteps))

    def close(self):
        """Flush and close the event file."""
        self.writer.close()


@hookimpl
def rlgraph_loggers():
    """``tensorboard``: see :class:`TensorBoardLogger`."""
    return {"tensorboard": TensorBoardLogger}
