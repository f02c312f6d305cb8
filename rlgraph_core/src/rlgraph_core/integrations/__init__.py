"""Optional integrations with the tools RL users already use, each a plugin behind an extra.

Each module registers through the ``rlgraph`` hooks under its own entry point (so it can be
blocked with ``--disable-plugins NAME`` like any third party's) and imports its library only
when used, so rlgraph-core never depends on it: ``tensorboard`` (extra ``tensorboard``:
tensorboardX) and ``wandb`` (extra ``wandb``) loggers. A missing extra is reported when a
config naming the part is validated, with the ``pip install`` line that brings it.
"""

from rlgraph_core.errors import ConfigError
from rlgraph_core.install_hints import extra_install_command


def missing_extra(what: str, module: str, extra: str, exc: BaseException | None = None):
    """The ConfigError for ``what`` needing ``module``, installed by rlgraph-core's ``extra``."""

    why = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
    return ConfigError(
        f"{what} needs the Python package '{module}', which is not installed{why}. Install it with "
        f"{extra_install_command(extra)}."
    )
