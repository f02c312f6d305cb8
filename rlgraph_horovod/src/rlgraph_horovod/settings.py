"""Settings of the ``horovod`` executor (the run config's ``executor:`` section).

Only pydantic and core are imported here, so configs validate without Horovod installed.
"""

from __future__ import annotations

from typing import Optional

from pydantic import Field

from rlgraph_core.errors import ConfigError
from rlgraph_core.execution.settings import ExecutorSettings
from rlgraph_horovod.ranks import launched_size, require_elastic_launch, under_launcher


class HorovodSettings(ExecutorSettings):
    """Knobs of the data-parallel executor; the budget, evaluation and seeds stay in ``train``."""

    check_interval: int = Field(
        100,
        ge=0,
        description="updates between checks that every rank holds identical weights (a CRC of the "
        "weights compared across ranks); 0 turns the check off",
    )
    sync_interval: int = Field(
        16,
        ge=1,
        description="vector-env steps between the ranks' agreement on whether to stop (target return, "
        "Ctrl-C/SIGTERM on any rank; the step budget is always met exactly); larger saves one tiny "
        "allreduce per step but stops up to this many steps later",
    )

    elastic: bool = Field(
        False,
        description="survive losing ranks with Horovod's elastic API: the agent's state is committed every "
        "commit_interval updates and, when a rank dies, the others restore the last commit and train on with "
        "fewer ranks. Needs an elastic launch (horovodrun --min-np/--max-np with --host-discovery-script); "
        "rank 0 must survive (it logs and checkpoints)",
    )
    num_ranks: Optional[int] = Field(
        None,
        ge=1,
        description="the number of ranks (processes) this run must have; refused when horovodrun started "
        "another number (or none: one rank). null = whatever the launcher started",
    )
    commit_interval: int = Field(
        20,
        ge=1,
        description="elastic mode: updates between commits of the agent's state to host memory; the updates "
        "since the last commit are redone after a lost rank",
    )

    def validate_run(self, agent, env, train) -> None:
        """Refuse ``elastic`` under a non-elastic ``horovodrun``, and agent settings under which ranks
        would take different numbers of gradient steps.

        PPO's ``target_kl`` stops a rollout's epochs once the approximate KL of *this rank's* data
        is too large: ranks would stop at different minibatches and wait forever in the gradient
        allreduce.
        """
        if self.elastic and under_launcher():
            require_elastic_launch()
        size = launched_size()
        if self.num_ranks is not None and self.num_ranks != size and not self.elastic:
            started = f"horovodrun started {size} ranks" if under_launcher() else "it was not started by horovodrun"
            raise ConfigError(
                f"'executor.num_ranks' = {self.num_ranks}, but {started}, so the run would have {size} "
                f"rank{'s' if size != 1 else ''}. Launch it with: horovodrun -np {self.num_ranks} -H "
                f"localhost:{self.num_ranks} --gloo rlgraph train CONFIG --executor horovod (Horovod installed by "
                f"python -m rlgraph_horovod.install), or set executor.num_ranks: null to take any number."
            )
        target_kl = getattr(agent, "target_kl", None)
        if target_kl is not None:
            raise ConfigError(
                f"'agent.target_kl' = {target_kl} cannot be used with the horovod executor: each rank would "
                f"stop its epochs at its own KL, so ranks would do different numbers of gradient steps and wait "
                f"forever in the gradient allreduce. Set agent.target_kl: null (the epochs then run in full on "
                f"every rank)."
            )
