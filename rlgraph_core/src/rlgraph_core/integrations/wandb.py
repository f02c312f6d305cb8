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

from rlgraph_core.errors import ConfigError
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
        """A ConfigError when wandb is not installed (naming the extra), when W&B would reject the
        project name (``WANDB_PROJECT``), or when it would run online without credentials: checked
        when the config is validated, so ``--dry-run`` says so and no run folder is made."""
        import importlib.util

        if importlib.util.find_spec("wandb") is None:
            raise missing_extra("The 'wandb' logger (train.loggers)", "wandb", "wandb")
        import wandb

        project = os.environ.get("WANDB_PROJECT", "rlgraph")
        try:  # W&B's own reading of its environment variables, and its own validation of the name
            settings = wandb.Settings(project="rlgraph")
            settings.update_from_env_vars(dict(os.environ))
        except Exception as exc:
            raise ConfigError(
                f"train.loggers: W&B rejects the settings of the 'wandb' logger (WANDB_PROJECT={project[:80]!r}, "
                f"WANDB_* variables): {str(exc).splitlines()[0][:200]}. Nothing was run; set WANDB_PROJECT to a "
                f"name W&B accepts (letters, digits, '-', '_', '.'; at most 128 characters) and fix what it names."
            ) from None
        if settings.mode in ("online", "shared", "run") and not _has_credentials(settings):
            raise ConfigError(
                "train.loggers: the 'wandb' logger would log online, but W&B has no credentials here (no "
                "WANDB_API_KEY, no 'wandb login'). Log in with 'wandb login' (or set WANDB_API_KEY), or log to "
                "disk with WANDB_MODE=offline ('wandb sync' uploads it later), or remove 'wandb' from train.loggers."
            )

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


def _has_credentials(settings) -> bool:
    """Whether W&B finds credentials for ``settings.base_url`` where ``wandb.init`` looks: the
    environment (``WANDB_API_KEY``, ``WANDB_IDENTITY_TOKEN_FILE``), the netrc file ``wandb login``
    writes, or the settings. True when this wandb version's lookup cannot be used (not refused)."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE") or settings.api_key:
        return True
    try:
        from wandb.sdk.lib.wbauth import read_netrc_auth

        return bool(read_netrc_auth(host=settings.base_url))
    except Exception:  # another wandb version's layout: let wandb.init decide
        return True


@hookimpl
def rlgraph_loggers():
    """``wandb``: see :class:`WandbLogger`."""
    return {"wandb": WandbLogger}
