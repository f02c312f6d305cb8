"""The ``horovod`` executor: data-parallel learners, one per ``horovodrun`` process (rank).

Every rank runs its own vector envs and its own copy of the agent. At the start rank 0's
weights, optimizer state, replay and counters are broadcast (after rank 0 loaded ``--resume``).
Each rank acts and explores with its own seed (``train.seed + rank``; its envs reset from
``train.seed + rank * env.num_envs``), so the ranks gather
different experience; every update's gradients pass through the backend's gradient hook, where
an allreduce averages them over the ranks before the optimizer step, so all ranks apply the
same update and keep identical weights (checked every ``executor.check_interval`` updates).
A recurrent policy's state never leaves its rank: each rank's env runner carries its envs' state
and its rollouts or sequence replay store it, as the local executor's do (docs/recurrent.md).

Only rank 0 evaluates, logs, plots and checkpoints, through the same
:class:`~rlgraph_core.execution.recorder.RunRecorder` as the local and Ray executors. Whether
to stop (budget, target return, Ctrl-C/SIGTERM on any rank) is agreed by all ranks with a small
allreduce every ``executor.sync_interval`` vector steps, so no rank is left waiting in a
collective the others never reach. A rank whose environment or agent raises ends its process;
the others then fail in their next collective (Gloo reports the lost peer) and rank 0 still
writes its final checkpoint, unless the launcher ends it first.

With ``executor.elastic: true`` (launched by an elastic ``horovodrun``) the loop runs under
Horovod's ``elastic.run`` instead: the agent's state is committed every
``executor.commit_interval`` updates, and when a rank dies the survivors restore the last commit,
meet again with fewer ranks and train on (see :mod:`rlgraph_horovod.elastic`). The summary then
counts ``elastic_resets`` and ``ranks_lost``. Rank 0 must be among the survivors.

``train.total_timesteps`` counts the env steps of all ranks together, and so does
``agent.timesteps`` on every rank: schedules (learning rate, exploration, ``learning_starts``)
run on the global step count, as they do for the Ray executors' learners. Each rank steps its
envs with the shared :class:`~rlgraph_core.execution.env_runner.EnvRunner`; rank 0's run recorder
counts the steps of all ranks (the others keep a
:class:`~rlgraph_core.execution.counters.StepCounter` of their own).
"""

from __future__ import annotations

import time
import traceback

import numpy as np

from rlgraph_core.execution.base import Executor
from rlgraph_core.execution.counters import StepCounter
from rlgraph_core.execution.env_runner import EnvRunner
from rlgraph_core.execution.recorder import RunRecorder
from rlgraph_core.execution.stopping import EXIT_CODES, RunFailed, StopRequest
from rlgraph_horovod.collectives import Collectives, TimedAllreduce, collectives_for
from rlgraph_horovod.ranks import launched_rank, launched_size, require_elastic_launch, under_launcher
from rlgraph_horovod.state_sync import WeightDivergence, broadcast_agent, check_identical

# Slots of the control vector allreduced (summed) at every stop agreement.
_SIGINT, _SIGTERM, _DONE, _RATES = 0, 1, 2, 3


class HorovodExecutor(Executor):
    """Data-parallel training over the ranks ``horovodrun`` started (one rank without it).

    Launch: ``horovodrun -np 2 -H localhost:2 --gloo rlgraph train CONFIG --executor horovod``
    (or a Python script using ``rlgraph_core.make(..., executor="horovod").learn(...)``: each
    rank's facade trains its own agent in place, rank 0's state broadcast to the others first).
    """

    accepts_agent = True

    def __init__(self, config, out_dir, *, assembly, resume_dir=None, agent=None, run_state=None):
        super().__init__(config, out_dir, assembly=assembly, resume_dir=resume_dir)
        #: an agent built by the caller to train on (the facade's), or None to build one
        self.agent = agent
        #: the run state to carry on with ``agent`` on rank 0 (best evaluation, wall time), or None
        self.run_state = run_state

    @classmethod
    def owns_out_dir(cls) -> bool:
        """Only rank 0 locks and writes the output folder."""
        return launched_rank() == 0

    @classmethod
    def plan_note(cls, config) -> str:
        """How many ranks the run has: those ``horovodrun`` started, or one without it."""
        if under_launcher():
            return f"{launched_size()} Horovod ranks (started by horovodrun); rank 0 logs and checkpoints"
        return (
            "1 rank: not started by horovodrun, so this trains as one process, exactly as --executor local "
            "would (launch with horovodrun -np N ... --executor horovod for N data-parallel ranks)"
        )

    def run(self) -> dict:
        cfg, parts = self.config, self.assembly
        if launched_rank() == 0:
            print(f"rlgraph-horovod: {self.plan_note(cfg)}", flush=True)
        elastic = cfg.executor.elastic and under_launcher()
        if elastic:
            require_elastic_launch()  # also checked when the config is validated
        coll = collectives_for(parts.backend)
        seed = cfg.train.seed + coll.rank
        # env i of rank r resets from env_seed + i: a stride of num_envs keeps every rank's envs on
        # seeds of their own (with seed + rank, rank 0's env 1 and rank 1's env 0 played the same
        # first episode); rank 0 keeps train.seed, as the local executor's envs do
        env_seed = cfg.train.seed + coll.rank * cfg.env.num_envs
        envs = parts.make_vector_env(env_seed)
        try:
            agent = self.agent or parts.make_agent(
                envs.single_observation_space, envs.single_action_space, num_envs=cfg.env.num_envs, seed=seed
            )
            hook = TimedAllreduce(coll)
            if coll.size > 1 or elastic:  # elastic: ranks may join a job that started with one
                agent.set_gradient_hook(hook)
            loop = _RankLoop(cfg, agent, envs, coll, hook, seed, elastic=elastic, env_seed=env_seed)
            loop.writer = self._dataset_writer(envs, agent, coll)
            try:
                if coll.rank == 0:
                    return self._run_rank0(loop)
                return self._run_other_rank(loop)
            finally:
                loop.close_writer()  # (done already, before the last collective, unless that failed to start)
        finally:
            envs.close()

    def _dataset_writer(self, envs, agent, coll: Collectives):
        """This rank's ``train.record_dataset`` writer (None when the run records nothing).

        Each rank records the episodes its own envs play into a dataset of its own: rank 0 into
        ``PATH`` (a one-rank run records as the local executor does), rank ``r`` into
        ``PATH_rank{r}``. Every rank checks every rank's path, so a path that is refused stops all
        ranks alike, before the first collective.
        """
        path = self.config.train.record_dataset
        if path is None:
            return None
        from rlgraph_core.datasets import DatasetWriter

        writers = [
            DatasetWriter(
                rank_dataset_path(path, r),
                envs.single_observation_space,
                envs.single_action_space,
                env_section=self.config.env.model_dump(mode="json", include={"id", "kwargs", "wrappers"}),
                algorithm=self.config.agent.type,
                append=self.resume_dir is not None or agent.timesteps > 0,
            )
            for r in range(coll.size)
        ]
        return writers[coll.rank]

    def _run_rank0(self, loop: "_RankLoop") -> dict:
        recorder = RunRecorder(
            self.config,
            self.out_dir,
            assembly=self.assembly,
            agent=loop.agent,
            resume_dir=self.resume_dir,
            state=self.run_state,
        )
        recorder.summary_extra = loop.summary_metrics
        info = {"horovod": {"ranks": loop.coll.size, "collectives": loop.coll.framework}}
        try:
            return recorder.run(lambda rec, stop: loop.train(stop, rec), run_info=info)
        finally:
            loop.close_writer()
            loop.finished()

    def _run_other_rank(self, loop: "_RankLoop") -> dict:
        start = time.perf_counter()
        error = None
        with StopRequest() as stop:
            try:
                loop.train(stop, None)
            except Exception as exc:  # this rank's traceback goes to its output; rank 0 keeps the checkpoint
                error = f"{type(exc).__name__}: {exc}"
                traceback.print_exc()
        loop.close_writer()
        loop.finished()  # after rank 0's final checkpoint: the launcher may end rank 0 once we exit
        ended_by = "error" if error else (stop.reason or loop.ended_by or "total_timesteps")
        elapsed = time.perf_counter() - start
        agent = loop.agent
        summary = {
            "rank": loop.coll.rank,
            "ended_by": ended_by,
            "exit_code": EXIT_CODES.get(ended_by, 1),
            "timesteps": agent.timesteps,
            "updates": agent.updates,
            "wall_time": elapsed,
            "env_steps_per_s": loop.local_steps / max(elapsed, 1e-9),
            "updates_per_s": agent.updates / max(elapsed, 1e-9),
            "eval_return_mean": None,
            "checkpoint": None if self.out_dir is None else str(self.out_dir / "checkpoint"),
            "build_seconds": agent.build_report.build_seconds if agent.build_report else 0.0,
            **loop.summary_metrics(),
        }
        if error:
            summary["error"] = error
            raise RunFailed(summary)
        return summary


def rank_dataset_path(path: str, rank: int) -> str:
    """Where rank ``rank`` records ``train.record_dataset`` = ``path``: rank 0 ``path``, rank r ``path_rank{r}``."""
    return path if rank == 0 else f"{str(path).rstrip('/')}_rank{rank}"


class _RankLoop:
    """One rank's training loop: step envs, agree on stopping, update, check weights."""

    #: this rank's ``train.record_dataset`` writer (None: the run records nothing)
    writer = None

    def __init__(
        self,
        cfg,
        agent,
        envs,
        coll: Collectives,
        hook: TimedAllreduce,
        seed: int,
        elastic: bool = False,
        env_seed: int | None = None,
    ):
        self.cfg, self.agent, self.envs, self.coll, self.hook, self.seed = cfg, agent, envs, coll, hook, seed
        self.env_seed = seed if env_seed is None else env_seed
        self.settings = cfg.executor
        self.elastic_state = None
        if elastic:
            from rlgraph_horovod.elastic import AgentState  # deferred: elastic mode only (Horovod elastic API)

            self.elastic_state = AgentState(coll, agent, seed)
        self.local_steps = 0
        self.ended_by: str | None = None
        #: the loop ended where every rank ends it (an agreed stop, a weight divergence all see)
        self.ended_together = False
        self.rank_rates = np.zeros(coll.size)
        self._start = time.perf_counter()
        self._window = (0.0, 0, 0)  # (allreduce seconds, updates, calls) at the last log row

    # ------------------------------------------------------------------ metrics
    def _allreduce_ms_per_update(self, seconds: float, updates: int) -> float:
        return 1000.0 * seconds / updates if updates else 0.0

    def row_metrics(self) -> dict:
        """Extra fields of rank 0's metric rows (since the previous row)."""
        secs, ups, calls = self._window
        d_secs, d_ups, d_calls = self.hook.seconds - secs, self.agent.updates - ups, self.hook.calls - calls
        self._window = (self.hook.seconds, self.agent.updates, self.hook.calls)
        row = {
            "ranks": self.coll.size,
            "allreduce_ms_per_update": self._allreduce_ms_per_update(d_secs, d_ups),
            "allreduce_ms_per_call": 1000.0 * d_secs / d_calls if d_calls else 0.0,
        }
        row.update({f"rank{r}_env_steps_per_s": float(v) for r, v in enumerate(self.rank_rates)})
        if self.elastic_state is not None:
            row.update(elastic_resets=self.elastic_state.resets, ranks_lost=self.elastic_state.ranks_lost)
        return row

    def summary_metrics(self) -> dict:
        """Totals for ``summary.json``: ranks, per-rank env steps/s, allreduce time per update."""
        out = {
            "ranks": self.coll.size,
            "allreduce_calls": self.hook.calls,
            "allreduce_ms_per_update": self._allreduce_ms_per_update(self.hook.seconds, self.agent.updates),
            "rank_env_steps_per_s": [float(v) for v in self.rank_rates],
        }
        if self.elastic_state is not None:
            out.update(self.elastic_state.metrics())
        return out

    def close_writer(self) -> None:
        """Write this rank's recorded episodes (before :meth:`finished`: the launcher may end the
        ranks once the last collective is over); a second call writes nothing."""
        if self.writer is not None:
            self.writer.close()

    def finished(self) -> None:
        """Last collective of the run, reached by rank 0 after its final checkpoint and summary.

        Other ranks wait here before their process exits: a launcher that sees one rank exit
        with a non-zero code (e.g. 143 after SIGTERM) ends the others, which must not cut rank
        0's final checkpoint short. A peer that is already gone (it crashed) is not waited for.
        """
        if self.coll.size == 1 or not self.ended_together:
            return  # a rank that failed alone: the others are in another collective, never this one
        try:
            self.coll.allreduce(np.zeros(1), average=False, name="rlgraph.finished")
        except Exception:  # noqa: BLE001 - a lost peer: nothing left to wait for
            pass

    # ------------------------------------------------------------------ the loop
    def _agree(self, stop: StopRequest, recorder: RunRecorder | None) -> np.ndarray:
        """Sum over ranks of each rank's stop flags and env-step rate (every rank calls this)."""
        flags = np.zeros(_RATES + self.coll.size, np.float64)
        flags[_SIGINT] = stop.reason == "sigint"
        flags[_SIGTERM] = stop.reason == "sigterm"
        if recorder is not None:
            flags[_DONE] = recorder.done(None)
        else:
            flags[_DONE] = self.agent.timesteps >= self.cfg.train.total_timesteps
        flags[_RATES + self.coll.rank] = self.local_steps / max(time.perf_counter() - self._start, 1e-9)
        return self.coll.allreduce(flags, average=False, name="rlgraph.stop")

    def train(self, stop: StopRequest, recorder: RunRecorder | None) -> None:
        """Train until the ranks agree to stop; rank 0 passes its recorder, the others None.

        In elastic mode :meth:`run` is re-run after each reset, from the last commit synced from
        rank 0; otherwise it runs once after rank 0's state was broadcast.
        """
        state = self.elastic_state
        if state is None:
            broadcast_agent(self.coll, self.agent, self.seed)
            self.run(stop, recorder)
            return
        from rlgraph_horovod.elastic import run_elastic  # deferred: elastic mode only

        run_elastic(self.coll, state, lambda: self.run(stop, recorder))

    def run(self, stop: StopRequest, recorder: RunRecorder | None) -> None:
        """The loop proper, from the agent's current (already synced) state."""
        cfg, agent, envs, coll = self.cfg, self.agent, self.envs, self.coll
        state = self.elastic_state
        if state is not None and (recorder is not None) != (coll.rank == 0):
            raise RuntimeError(
                f"Elastic reset made this process rank {coll.rank}, but rank 0 must stay the process that logs "
                f"and checkpoints: the original rank 0 was lost. Elastic mode survives losing other ranks only; "
                f"continue from rank 0's last checkpoint with `rlgraph train --resume OUT_DIR`."
            )
        size = coll.size
        interval, check = self.settings.sync_interval, self.settings.check_interval
        next_check = (agent.updates // check + 1) * check if check else None
        commit = self.settings.commit_interval
        next_commit = (agent.updates // commit + 1) * commit if state is not None else None
        counter = recorder if recorder is not None else StepCounter(agent)
        if recorder is not None:
            recorder.counter.sync_from_agent()  # an elastic reset may have restored an older commit
        runner = EnvRunner(agent, envs, seed=self.env_seed + agent.timesteps)
        n = runner.num_envs
        writer = self.writer
        if writer is not None:  # an elastic reset restarts the envs: episodes in progress end where they were
            writer.cut(range(n))
        step = 0
        self._start = time.perf_counter()
        while True:
            # Agree where every rank is at the same point: before this step, with the same counters.
            if step % interval == 0 or agent.timesteps >= cfg.train.total_timesteps:
                flags = self._agree(stop, recorder)
                self.rank_rates = flags[_RATES:]
                if flags[_SIGINT] or flags[_SIGTERM]:
                    stop.request("sigint" if flags[_SIGINT] else "sigterm")
                if flags[_SIGINT] or flags[_SIGTERM] or flags[_DONE]:
                    self.ended_by = stop.reason or "total_timesteps"
                    self.ended_together = True
                    return
            taken = runner.step()
            if writer is not None:
                writer.add(taken)
            step += 1
            self.local_steps += n
            counter.add_env_steps(n * size)  # every rank took as many steps: count them all
            agent.update()
            if next_check is not None and agent.updates >= next_check:
                next_check = (agent.updates // check + 1) * check
                try:
                    check_identical(coll, agent.get_weights(), agent.updates)
                except WeightDivergence:
                    self.ended_together = True  # every rank saw the same checksums
                    raise
            if next_commit is not None and agent.updates >= next_commit:
                next_commit = (agent.updates // commit + 1) * commit
                state.commit()  # every rank: same update count here (it also checks for host changes)
            episodes = runner.take_episodes()
            if recorder is not None:
                recorder.add_episodes(episodes)
                recorder.step(0, self.row_metrics)
