"""The local executor: one process, gymnasium vector envs, periodic evaluation, checkpoints."""

from __future__ import annotations

from rlgraph_core.checkpoint import read_attachment
from rlgraph_core.datasets import DatasetWriter
from rlgraph_core.execution import env_resume
from rlgraph_core.execution.base import Executor
from rlgraph_core.execution.env_runner import EnvRunner, true_next_obs
from rlgraph_core.execution.recorder import RunRecorder
from rlgraph_core.execution.run_state import RunState
from rlgraph_core.execution.stopping import StopRequest

__all__ = ["LocalExecutor", "RunState", "true_next_obs"]


class LocalExecutor(Executor):
    """Single-process training loop that never loses more than one checkpoint interval of work.

    Each vector step (:class:`~rlgraph_core.execution.env_runner.EnvRunner`, the env loop every
    executor shares): ``agent.act`` → ``envs.step`` → ``agent.observe`` (with the true final
    observation at episode ends, and ``terminated`` kept apart from ``truncated``) →
    ``agent.update`` (the agent's own schedule decides whether to learn). Every
    ``train.eval_interval`` env steps the greedy policy is evaluated on a separate env with
    fixed seeds (a new best is saved to ``checkpoint_best``); every ``train.checkpoint_interval``
    env steps a periodic checkpoint is written (the newest ``train.keep_checkpoints`` are kept).

    The run ends at ``train.total_timesteps``, once the mean evaluation return reaches
    ``train.target_return``, on Ctrl-C or SIGTERM (at the end of the current step), or when the
    environment, the agent or a plugin raises. Whatever ended it, the final checkpoint,
    ``summary.json`` (with ``ended_by``) and the plot are written; an error is then re-raised as
    :class:`~rlgraph_core.execution.stopping.RunFailed`. A resumed run carries on the counters,
    the replay memory and the best evaluation of its checkpoint. All of that recording is the
    :class:`~rlgraph_core.execution.recorder.RunRecorder`'s, which distributed executors share.
    """

    accepts_agent = True

    def __init__(self, config, out_dir, *, assembly, resume_dir=None, agent=None, run_state: RunState | None = None):
        super().__init__(config, out_dir, assembly=assembly, resume_dir=resume_dir)
        #: an agent built by the caller to train on (the facade's), or None to build one
        self.agent = agent
        #: the run state to carry on with ``agent`` (best evaluation, wall time), or None
        self.run_state = run_state

    def _recorder(self, agent, eval_env) -> RunRecorder:
        """The run's recorder over this executor's config, folder, assembly and resume state."""
        return RunRecorder(
            self.config,
            self.out_dir,
            assembly=self.assembly,
            agent=agent,
            resume_dir=self.resume_dir,
            eval_env=eval_env,
            state=self.run_state,
        )

    def run(self) -> dict:
        cfg = self.config
        parts = self.assembly
        envs = parts.make_vector_env(cfg.train.seed)
        try:
            eval_env = parts.make_eval_env()
            agent = self.agent or parts.make_agent(
                envs.single_observation_space, envs.single_action_space, num_envs=cfg.env.num_envs
            )
            carried = self._carried_episodes(envs, agent)  # checked before the recorder loads anything
            writer = self._dataset_writer(envs, agent)
            recorder = self._recorder(agent, eval_env)
            try:
                return recorder.run(lambda rec, stop: self._steps(agent, envs, rec, stop, writer, carried))
            finally:
                if writer is not None:
                    writer.close()
        finally:
            envs.close()

    def _dataset_writer(self, envs, agent):
        """``train.record_dataset``'s writer (None when the run records nothing); checked before the run."""
        path = self.config.train.record_dataset
        if path is None:
            return None

        return DatasetWriter(
            path,
            envs.single_observation_space,
            envs.single_action_space,
            env_section=self.config.env.model_dump(mode="json", include={"id", "kwargs", "wrappers"}),
            algorithm=self.config.agent.type,
            append=self.resume_dir is not None or agent.timesteps > 0,
        )

    def _carried_episodes(self, envs, agent) -> tuple | None:
        """The episodes in progress where the run this one continues stopped (the facade's previous
        ``learn``, or the resumed checkpoint's ``env_runner`` attachment), checked against ``envs``;
        None without one. A refused attachment raises :class:`CheckpointError` before anything loads."""
        carried = self.run_state.env_runner if self.run_state is not None else None
        shown = "the previous learn()"
        if carried is None and self.resume_dir is not None:
            found = read_attachment(self.resume_dir, env_resume.ATTACHMENT)
            carried = None if found is None else (found[1], found[0])
            shown = str(self.resume_dir)
        if carried is None:
            return None
        arrays, info = carried
        return env_resume.check_snapshot(
            info, arrays, envs.single_observation_space, envs.single_action_space, int(envs.num_envs), shown, agent
        )

    def _steps(self, agent, envs, recorder: RunRecorder, stop: StopRequest, writer=None, carried=None) -> None:
        """Step the vector envs (the shared :class:`EnvRunner`) until the recorder says the run is done;
        ``writer`` (a :class:`~rlgraph_core.datasets.DatasetWriter`) records every step. ``carried``
        (checked ``(arrays, info)``) are the episodes in progress where the continued run stopped:
        replayed, so the run goes on as if it had not stopped (see :mod:`~rlgraph_core.execution.env_resume`)."""
        seed = self.config.train.seed + recorder.timesteps
        runner = EnvRunner(agent, envs, seed=seed)
        if carried is not None:
            env_resume.replay(runner, *carried, timesteps=recorder.timesteps, seed=seed)

        def episodes_in_progress():
            taken = env_resume.snapshot(runner, recorder.timesteps)
            return {} if taken is None else {env_resume.ATTACHMENT: taken}

        recorder.checkpoint_attachments = episodes_in_progress
        try:
            while not recorder.done(stop):
                step = runner.step()
                if writer is not None:
                    writer.add(step)
                recorder.add_env_steps(runner.num_envs)
                agent.update()
                if runner.has_episodes:  # most steps end no episode: nothing to hand over or allocate
                    recorder.add_episodes(runner.take_episodes())
                recorder.step()
        except BaseException:
            recorder.state.env_runner = None  # a step that raised may have left the envs half-stepped
            raise
        recorder.state.env_runner = env_resume.snapshot(runner, recorder.timesteps)
