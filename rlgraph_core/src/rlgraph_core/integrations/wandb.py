"""The ``wandb`` metric logger (extra ``wandb``: Weights & Biases).

One wandb run per rlgraph run, with the whole validated config as the run's config and the run
folder as its name; every numeric metric of every row logged at step ``timesteps``, and weight
histograms (``weights/<name>``) every ``train.histogram_interval`` rows. The usual wandb
environment variables apply: ``WANDB_PROJECT`` (default ``rlgraph``), ``WANDB_ENTITY``, and
``WANDB_MODE=offline`` to write the run under ``<out_dir>/wandb`` without a network
(``wandb sync`` uploads it later).
"""

from __future__ import annotations

import os

from rlgraph_core.execution.loggers import MetricLogger, metric_scalars
from rlgraph_core.integrations import missing_extra
from rlgraph_core.plugins import hookimpl


class WandbLogger(MetricLogger):
    """Metric rows, the config and weight histograms to a Weights & Biases run."""

    wants_weights = True

    def __init__(self, out_dir, config=None):
        super().__init__(out_dir)
        try:
            import wandb
        except ImportError as exc:
            raise missing_extra("The 'wandb' logger", "wandb", "wandb", exc) from None
        self._wandb = wandb
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "rlgraph"),
            name=self.out_dir.resolve().name,
            dir=str(self.out_dir),
            config=config.to_dict() if config is not None else None,
            reinit="create_new",
        )

    @classmethod
    def check_available(cls) -> None:
        """A ConfigError naming the extra when wandb is not installed."""
        import importlib.util

        if importlib.util.find_spec("wandb") is None:
            raise missing_extra("The 'wandb' logger (train.loggers)", "wandb", "wandb")

    def log(self, metrics):
        """Every numeric metric at step ``metrics['timesteps']``."""
        scalars = metric_scalars(metrics)
        self.run.log(scalars, step=int(metrics.get("timesteps", 0)))

    def log_weights(self, weights, timesteps):
        """One histogram per weight array, ``weights/<name>`` (logged with the next row's step)."""
        hist = {f"weights/{k}": self._wandb.Histogram(v) for k, v in weights.items() if getattr(v, "size", 0)}
        self.run.log(hist, step=int(timesteps))

    def close(self):
        """Finish the wandb run (in offline mode: write it to disk)."""
        self.run.finish()


@hookimpl
def rlgraph_loggers():
    """``wandb``: see :class:`WandbLogger`."""
    return {"wandb": WandbLogger}
