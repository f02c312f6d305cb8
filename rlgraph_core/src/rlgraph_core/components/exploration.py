"""Exploration components of value-based agents (the DQN family's ``exploration`` slot).

An exploration component turns Q-values into the actions an agent takes while it explores. Its
randomness comes in as a noise input drawn by the agent's seeded numpy generator
(:meth:`Exploration.draw_noise`), so the same seed explores identically on every backend, and a
scheduled parameter (epsilon, a temperature ...) comes in as a scalar input evaluated at the
agent's env step (:meth:`Exploration.value`).

Built in: :class:`EpsilonGreedy` (``epsilon_greedy``, the default). A plugin registers its own
as ``{name: (ExplorationClass, SettingsModel)}`` with a model subclassing
:class:`~rlgraph_core.components.settings.ExplorationSettings`.
"""

from __future__ import annotations

import inspect
from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from rlgraph_core.components.schedules import LinearSchedule, ScheduleOrFloat, as_schedule, check_schedule_range
from rlgraph_core.components.settings import ExplorationSettings
from rlgraph_core.errors import ConfigError
from rlgraph_core.graph import Component, api

__all__ = ["EpsilonGreedy", "EpsilonGreedySettings", "Exploration", "check_draws_legal", "random_legal_actions"]


class Exploration(Component):
    """Base of exploration components: ``explore(q_values, noise, value) -> actions``.

    A subclass sets :attr:`parameter` (the name of its scheduled parameter, reported in the
    agent's metrics), :attr:`schedule` (a schedule of that parameter over env steps) and
    :attr:`noise_shape`, and implements :meth:`draw_noise` and the API method :meth:`explore`.

    Args:
        num_actions: the number of discrete actions ``n`` (actions are ``0 .. n-1``).
        schedule: the scheduled parameter as a float or a schedule.
        name: component name.
    """

    #: name of the scheduled parameter (a metric of the agent, e.g. ``epsilon``)
    parameter: str = "value"

    def __init__(self, num_actions: int, schedule: ScheduleOrFloat, name: str = "exploration"):
        super().__init__(name)
        self.num_actions = int(num_actions)
        self.schedule = as_schedule(schedule)

    @property
    def noise_shape(self) -> tuple[int, ...]:
        """Shape of one sample's noise (the agent's noise batch is ``[B, *noise_shape]``)."""
        raise NotImplementedError

    def value(self, timestep: int) -> float:
        """The scheduled parameter at env step ``timestep``."""
        return float(self.schedule(timestep))

    def draw_noise(self, rng: np.random.Generator, batch_size: int) -> np.ndarray:
        """Float32 noise ``[batch_size, *noise_shape]`` from the agent's generator.

        An exploration that can act on masked observations also takes ``legal=`` (``[batch_size,
        num_actions]``, non-zero where an action is legal; passed only for masked observations)
        and draws its random actions among the legal ones; :func:`check_draws_legal` tells.
        The Q-values ``explore`` gets are already masked (illegal ones at a large negative value).
        """
        raise NotImplementedError

    def actions_without_values(self, noise: np.ndarray, value: float) -> np.ndarray | None:
        """The actions when they do not depend on the Q-values (else None): the agent then skips
        the network. Epsilon-greedy answers when every draw explores."""
        return None

    @api
    def explore(self, q_values, noise, value):
        """Actions ``[B]`` (int64, ``0 .. n-1``) from Q-values ``[B, n]``, noise and the parameter."""
        raise NotImplementedError


def random_legal_actions(rng: np.random.Generator, legal: np.ndarray) -> np.ndarray:
    """One action per row of ``legal`` (``[B, n]``, non-zero where legal), uniform among the legal
    ones: the ``k``-th legal index with ``k = floor(u * count)``, ``u ~ U(0, 1)``."""
    flags = np.asarray(legal) != 0
    counts = flags.sum(axis=-1)
    k = np.minimum((rng.random(len(flags)) * counts).astype(np.int64), np.maximum(counts - 1, 0))
    return (np.cumsum(flags, axis=-1) <= k[:, None]).sum(axis=-1)


def check_draws_legal(exploration: Exploration) -> None:
    """Raise a ConfigError unless ``exploration.draw_noise`` takes ``legal=`` (what masked
    observations need: random actions among the legal ones only)."""
    try:
        params = inspect.signature(exploration.draw_noise).parameters
    except (TypeError, ValueError):
        return
    if "legal" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    raise ConfigError(
        f"The observations hold a legal-action mask, but the exploration component '{exploration.name}' "
        f"({type(exploration).__qualname__}) cannot draw legal random actions: its draw_noise(rng, batch_size) "
        f"takes no legal= mask. Use agent.exploration: {{type: epsilon_greedy}} or give draw_noise a "
        f"legal=None keyword (see Exploration.draw_noise)."
    )


class EpsilonGreedySettings(ExplorationSettings):
    """``{type: epsilon_greedy, epsilon: <float or schedule>}``: a random action with probability epsilon.

    In a config a bare float or schedule in ``exploration:`` means epsilon-greedy with that epsilon.
    """

    type: Literal["epsilon_greedy"] = "epsilon_greedy"
    epsilon: ScheduleOrFloat = Field(
        default_factory=lambda: LinearSchedule(start=1.0, end=0.05, steps=10_000),
        description="probability of a random action: a float or a schedule over env steps",
    )

    @field_validator("epsilon")
    @classmethod
    def _epsilon_is_a_probability(cls, v: ScheduleOrFloat) -> ScheduleOrFloat:
        """Epsilon is the probability of a random action: every value in [0, 1]."""
        return check_schedule_range(v, "epsilon (the probability of a random action)", low=0.0, high=1.0)


class EpsilonGreedy(Exploration):
    """Choose a uniformly random action with probability epsilon, else the greedy one.

    Noise per sample: ``[draw, random_action]``, a uniform draw in [0, 1) and a uniform action
    index (as float32, exact below 2**24 actions); the action is ``random_action`` where
    ``draw < epsilon``, else ``argmax(q_values)``.

    Args:
        num_actions: the number of discrete actions.
        epsilon: a float or a schedule of epsilon.
        name: component name.
    """

    parameter = "epsilon"

    def __init__(self, num_actions: int = 2, epsilon: ScheduleOrFloat = 0.1, name: str = "epsilon_greedy"):
        super().__init__(num_actions, epsilon, name)

    @classmethod
    def from_settings(
        cls, settings: EpsilonGreedySettings, *, name: str = "epsilon_greedy", num_actions: int
    ) -> "EpsilonGreedy":
        """The exploration-slot constructor."""
        return cls(num_actions, settings.epsilon, name=name)

    @property
    def noise_shape(self) -> tuple[int, ...]:
        return (2,)

    def draw_noise(self, rng: np.random.Generator, batch_size: int, legal: np.ndarray | None = None) -> np.ndarray:
        """``[draw, random_action]`` per sample: the action first, then the draw (the order
        rlgraph has always drawn them in, so seeded runs explore as before). With ``legal`` (a
        legal-action mask ``[batch_size, n]``) the random action is uniform among the legal ones."""
        if legal is None:
            random_actions = rng.integers(0, self.num_actions, batch_size)
        else:
            random_actions = random_legal_actions(rng, legal)
        noise = np.empty((batch_size, 2), np.float32)  # filled in place: np.stack costs more per step
        noise[:, 0] = rng.random(batch_size, dtype=np.float32)
        noise[:, 1] = random_actions
        return noise

    def actions_without_values(self, noise: np.ndarray, value: float) -> np.ndarray | None:
        """Every sample explores: the random actions, no Q-values needed."""
        if (noise[:, 0] < np.float32(value)).all():
            return noise[:, 1].astype(np.int64)
        return None

    def create_variables(self, input_spaces):
        """No variables: the two column selectors are made once here, as constants (not weights)."""
        self._draw_column = self.backend.to_tensor(np.array([1.0, 0.0], np.float32))
        self._action_column = self.backend.to_tensor(np.array([0.0, 1.0], np.float32))

    @api
    def explore(self, q_values, noise, value):
        """``random_action`` where ``draw < epsilon`` else ``argmax(q_values)``."""
        ops = self.ops
        draws = ops.reduce_sum(noise * self._draw_column, axis=-1)
        random_actions = ops.cast(ops.reduce_sum(noise * self._action_column, axis=-1), "int64")
        return ops.where(draws < value, random_actions, ops.argmax(q_values, axis=-1))
