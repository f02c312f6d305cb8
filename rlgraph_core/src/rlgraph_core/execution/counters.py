"""The run's env-step counter: one writer of the learning agent's ``timesteps``.

An executor counts the env steps its workers (or ranks) took into the :class:`StepCounter` of
its run recorder (:meth:`RunRecorder.add_env_steps
<rlgraph_core.execution.recorder.RunRecorder.add_env_steps>`); the counter keeps the agent's
``timesteps`` at that total, because the agent's schedules (exploration, learning rate,
``learning_starts``, ``train_freq``) and its checkpoints read it there. Executors never write
``agent.timesteps`` themselves, and neither does the agent while a counter owns it (the counter
sets the agent's ``step_counter``; an agent without one, an actor or a loop written by hand,
counts the steps it observes itself). A process without a recorder (a Horovod rank other than 0)
keeps its own counter.

Gradient updates are counted by the agent that makes them (``agent.updates``); the counter
reads them from there.
"""

from __future__ import annotations

__all__ = ["StepCounter"]


class StepCounter:
    """Env steps of the whole run (all workers and ranks together), mirrored into ``agent.timesteps``.

    Args:
        agent: the agent that learns; the count starts at its ``timesteps`` (a resumed run's).
    """

    def __init__(self, agent):
        self.agent = agent
        self.timesteps = int(agent.timesteps)
        agent.step_counter = self

    def release(self) -> None:
        """Hand the count back to the agent (the run ended): it counts the steps it observes again."""
        if getattr(self.agent, "step_counter", None) is self:
            self.agent.step_counter = None

    @property
    def updates(self) -> int:
        """Gradient updates the agent made so far."""
        return int(self.agent.updates)

    def add_env_steps(self, n: int) -> int:
        """Count ``n`` more env steps (of every worker or rank); the new total."""
        self.timesteps += int(n)
        self.agent.timesteps = self.timesteps
        return self.timesteps

    def sync_from_agent(self) -> None:
        """Start counting from the agent's ``timesteps`` again, after its state was replaced (a
        checkpoint loaded into it, or a Horovod elastic reset restored a commit)."""
        self.timesteps = int(self.agent.timesteps)
