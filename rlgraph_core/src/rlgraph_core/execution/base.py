"""The executor contract."""

from __future__ import annotations

import abc
from pathlib import Path


class Executor(abc.ABC):
    """Runs a training job (validated run config + environment + stop condition).

    Executors never look names up: every part comes from the ``assembly``
    (:class:`rlgraph_core.assemble.Assembly`), built once by :func:`rlgraph_core.assemble.assemble`.

    Args:
        config: a validated run config.
        out_dir: where metrics, plots and checkpoints go (None: a run that writes nothing, which
            executors that need a folder of their own may refuse).
        assembly: the resolved parts of the run (backend, agent factory, memory, loggers, envs).
        resume_dir: a checkpoint directory to continue from, or None.
    """

    #: Whether the executor can train an agent the caller already built (``agent=`` and
    #: ``run_state=`` keyword arguments), as the Python facade's repeated ``learn`` does. Others
    #: are driven through a checkpoint (``resume_dir``).
    accepts_agent = False

    def __init__(self, config, out_dir: str | Path | None, *, assembly, resume_dir: str | Path | None = None):
        self.config = config
        self.out_dir = None if out_dir is None else Path(out_dir)
        self.resume_dir = Path(resume_dir) if resume_dir else None
        self.assembly = assembly

    @classmethod
    def owns_out_dir(cls) -> bool:
        """Whether this process owns the run's output folder: locks it, writes it, reports the run.

        True for single-process executors and for drivers of distributed ones. An executor that
        is started once per process by an outside launcher (``horovodrun`` starts ``rlgraph
        train`` on every rank) answers False on all processes but one, so only that one claims
        the folder and prints; the others still run.
        """
        return True

    @classmethod
    def plan_note(cls, config) -> str | None:
        """One line on how many processes the run will have and why (``--dry-run`` prints it, the
        executor prints it at the start), or None where there is nothing to say (the default)."""
        return None

    @abc.abstractmethod
    def run(self) -> dict:
        """Train until the stop condition; return a summary dict (final metrics, paths)."""
