"""The offline executor: an executor whose transitions come from a dataset, not an env runner.

One run, top to bottom::

    source  = DatasetSource(executor.dataset)          # exists, readable, not empty (datasets/source.py)
    source.check_spaces(eval env)                      # the dataset fits env.id (and its wrappers)
    agent   = the configured replay agent (bc, cql, dqn, sac ...)
    memory  = source.fill(agent)                       # every episode, streamed, as the agent stores them
    until train.total_timesteps updates:
        agent.learn_from(memory, executor.updates_per_round)   # a fused program where the agent fuses
        recorder.step()                                # evaluation, checkpoints, metrics, callbacks

No env is stepped for training, so the run's step counter counts gradient updates:
``train.total_timesteps``, ``eval_interval``, ``log_interval`` and ``checkpoint_interval`` are
in updates here, and the metric rows' ``timesteps`` is the number of updates (``updates_per_s``
their rate; ``env_steps_per_s`` is None). Everything a run leaves (evaluations on ``env.id``, ``checkpoint_best``, periodic
and final checkpoints, ``summary.json`` with the dataset's statistics, the plot, resume with
``--resume``) is the :class:`~rlgraph_core.execution.recorder.RunRecorder`'s, as for online
runs. Checkpoints do not hold the dataset: a resumed run reads it again (its sampling seeded by
the updates already made, so it does not repeat the first batches).
"""

from __future__ import annotations

from pydantic import Field

from rlgraph_core.checkpoint import read_meta
from rlgraph_core.datasets import DatasetSource
from rlgraph_core.errors import ConfigError
from rlgraph_core.execution.local import LocalExecutor
from rlgraph_core.execution.recorder import RunRecorder
from rlgraph_core.execution.settings import ExecutorSettings

__all__ = ["OfflineExecutor", "OfflineExecutorSettings"]


class OfflineExecutorSettings(ExecutorSettings):
    """The ``executor:`` section of ``train.executor: offline``."""

    dataset: str = Field(
        description="the Minari dataset to learn from: a folder (as train.record_dataset writes it) or a dataset "
        "id in the local Minari root (MINARI_DATASETS_PATH); never downloaded"
    )
    updates_per_round: int = Field(
        100,
        gt=0,
        description="gradient updates between two rounds of bookkeeping (evaluation, checkpoints and metric rows "
        "fall due at round ends); one fused program per round where the agent fuses rounds",
    )


class OfflineExecutor(LocalExecutor):
    """Learns from ``executor.dataset`` (module docstring); ``env`` is only evaluated on.

    The local executor with a dataset source instead of an env runner: one process, and, like it,
    it can train an agent the caller built (``agent=``, ``run_state=``: the facade's ``learn``).
    """

    def _start_updates(self) -> int:
        """Updates made before this session (the resumed checkpoint's, or the caller's agent's)."""
        if self.agent is not None:
            return int(self.agent.timesteps)
        if self.resume_dir is None:
            return 0

        return int(read_meta(self.resume_dir)[0].get("counters", {}).get("timesteps", 0))

    def run(self) -> dict:

        cfg, parts = self.config, self.assembly
        settings = cfg.executor
        source = DatasetSource(settings.dataset)
        eval_env = parts.make_eval_env()
        try:
            source.check_spaces(eval_env.observation_space, eval_env.action_space, f"the environment '{cfg.env.id}'")
            agent = self.agent or parts.make_agent(
                eval_env.observation_space, eval_env.action_space, num_envs=1, with_memory=False
            )
            if not all(
                callable(getattr(agent, m, None)) for m in ("learn_from", "stored_actions", "stored_observations")
            ):
                raise ConfigError(
                    f"'agent.type' = '{cfg.agent.type}' does not learn from replayed transitions, so it cannot learn "
                    f"from a dataset (train.executor: offline); use bc, cql, or another replay agent (dqn, sac)."
                )
            filled = source.fill(agent, seed=cfg.train.seed + self._start_updates())
        except BaseException:
            eval_env.close()
            raise
        recorder = self._recorder(agent, eval_env)
        recorder.summary_extra = {"dataset": source.ref, **filled.summary()}
        recorder.steps_are_updates = True
        return recorder.run(
            lambda rec, stop: self._updates(agent, filled.memory, rec, stop),
            run_info={"dataset": source.ref, "dataset_transitions": filled.transitions},
        )

    def _updates(self, agent, memory, recorder: RunRecorder, stop) -> None:
        """Rounds of updates until the recorder says the run is done (the budget is in updates)."""
        per_round = self.config.executor.updates_per_round
        total = self.config.train.total_timesteps
        while not recorder.done(stop):
            n = max(1, min(per_round, total - recorder.timesteps))
            recorder.add_env_steps(n)  # the step counter counts updates (module docstring)
            agent.learn_from(memory, n)
            recorder.step()
