"""What every compiled program (:mod:`~rlgraph_jax.compiled.ppo`, :mod:`~rlgraph_jax.compiled.dqn`)
is to the executor: the agent, env and backend cells it runs on, the backend's ``lax.scan`` loop
over the algorithm's own train-step body, and the host's side of a chunk."""

from __future__ import annotations

import abc
from typing import Any, Callable

import numpy as np

from rlgraph_jax.gymnax_envs import PureEnv


class CompiledProgram(abc.ABC):
    """The pure chunk function of one agent on one gymnax env.

    Args:
        agent: a built agent on the jax backend.
        env: the gymnax env's :class:`~rlgraph_jax.gymnax_envs.PureEnv`.
        num_envs: envs stepped at once.
        step: the agent's train-step body that the backend's ``scan_loop`` repeats.
    """

    #: env steps one iteration of :meth:`chunk` takes (all envs)
    steps_per_iteration: int

    def __init__(self, agent, env: PureEnv, num_envs: int, step: Callable):
        self.agent = agent
        self.env = env
        self.num_envs = int(num_envs)
        self.backend = agent.backend
        self.cells = list(self.backend.cells.cells)
        self.loop = self.backend.scan_loop(step)
        self._lr_cell = agent.train_step._lr

    @abc.abstractmethod
    def plan(self, timesteps: int, iterations: int) -> Any:
        """The host's plan of the next ``iterations`` iterations (its ``inputs`` are the program's)."""

    @abc.abstractmethod
    def finish(self, plan: Any, losses: np.ndarray) -> dict:
        """The host's bookkeeping after a chunk ran ``plan``; the metrics to report."""

    @abc.abstractmethod
    def init_carry(self, seed: int) -> Any:
        """The env carry of a fresh run seeded with ``seed``."""

    @abc.abstractmethod
    def resume_carry(self, carry: Any) -> Any:
        """``carry`` as the program continues from it after a checkpoint."""

    @abc.abstractmethod
    def store_memory(self, carry: Any) -> None:
        """Copy what the carry holds for the agent's memory back to the agent (before a checkpoint)."""

    @abc.abstractmethod
    def chunk(self, values: list, carry: Any, inputs: tuple):
        """The pure function of one chunk: ``(cell values, carry, plan inputs) -> outputs``."""
