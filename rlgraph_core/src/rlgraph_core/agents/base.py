"""The agent API shared by every algorithm."""

from __future__ import annotations

import abc
from typing import Any

import numpy as np

from rlgraph_core.errors import CheckpointError
from rlgraph_core.spaces import Space


class Agent(abc.ABC):
    """A root component, its config, and the loop-facing API.

    Subclasses build their root component in ``__init__`` and implement :meth:`act`,
    :meth:`observe` and :meth:`update`. An agent never knows which executor runs it: it takes
    numpy in and gives numpy out.

    Args:
        config: the agent's validated config model.
        observation_space / action_space: rlgraph spaces (without batch rank).
        backend: a built :class:`~rlgraph_core.backend.Backend`.
        seed: seeds weight initialisation and exploration.
    """

    def __init__(self, config, observation_space: Space, action_space: Space, backend, seed: int = 0):
        self.config = config
        self.observation_space = observation_space
        self.action_space = action_space
        self.backend = backend
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.timesteps = 0
        self.updates = 0
        self.build_report = None

    # --- acting and learning ---------------------------------------------------------------
    @abc.abstractmethod
    def act(self, obs: np.ndarray, explore: bool = True) -> np.ndarray:
        """Actions for a batch of observations ``[B, ...]``."""

    @abc.abstractmethod
    def observe(self, obs, actions, rewards, next_obs, terminated, truncated) -> None:
        """Record one vector-env step (every argument has leading dim = number of envs).

        ``next_obs`` is the true next observation (final observation where an episode ended).
        """

    @abc.abstractmethod
    def update(self, batch: dict[str, np.ndarray] | None = None) -> dict[str, float] | None:
        """Learn: from ``batch`` if given, else as the agent's own schedule says.

        Returns metrics of the update(s) done, or None when the schedule did nothing.
        """

    def metrics(self) -> dict[str, float]:
        """Latest training metrics (loss, schedules ...) for the executor's reports."""
        return {"updates": self.updates}

    # --- weights ---------------------------------------------------------------------------
    @abc.abstractmethod
    def variables(self) -> dict[str, Any]:
        """Every variable of the agent (backend objects), keyed by stable scope names."""

    def get_weights(self) -> dict[str, np.ndarray]:
        """All variables as numpy arrays (backend-neutral: dense weights are ``[in, out]``)."""
        return {k: self.backend.to_numpy(v).copy() for k, v in self.variables().items()}

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Load numpy weights; names and shapes must match exactly (nothing is changed otherwise)."""
        own = self.variables()
        missing = sorted(set(own) - set(weights))
        extra = sorted(set(weights) - set(own))
        if missing or extra:
            raise CheckpointError(
                f"Weights do not match this agent: missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
                f"unexpected {extra[:5]}{'...' if len(extra) > 5 else ''}. The weights must come from an "
                f"agent of the same type, network spec and spaces."
            )
        for name, var in own.items():
            want = tuple(np.shape(self.backend.to_numpy(var)))
            got = tuple(np.shape(weights[name]))
            if want != got:
                raise CheckpointError(
                    f"Weight '{name}' has shape {got} but this agent expects {want}; the weights come "
                    f"from a different network spec or environment."
                )
        for name, var in own.items():
            self.backend.assign_numpy(var, np.asarray(weights[name]))

    # --- state beyond weights (optimizer, counters) for checkpoints -------------------------
    def get_state(self) -> tuple[dict[str, np.ndarray], dict]:
        """Extra arrays (optimizer state ...) and JSON-able counters for a checkpoint."""
        return {}, {"timesteps": self.timesteps, "updates": self.updates}

    def set_state(self, arrays: dict[str, np.ndarray], counters: dict) -> None:
        """Restore what :meth:`get_state` returned."""
        self.timesteps = int(counters.get("timesteps", 0))
        self.updates = int(counters.get("updates", 0))

    def save(self, directory: str, extra: dict | None = None) -> str:
        """Write a checkpoint (weights as npz, config and counters as JSON) atomically."""
        from rlgraph_core.checkpoint import save_checkpoint

        return save_checkpoint(self, directory, extra or {})

    def load(self, directory: str) -> dict:
        """Load a checkpoint written by :meth:`save` into this agent; returns its metadata."""
        from rlgraph_core.checkpoint import load_checkpoint_into

        return load_checkpoint_into(self, directory)

    # --- evaluation ------------------------------------------------------------------------
    def evaluate(self, env, episodes: int = 10, seed: int | None = None) -> dict[str, float]:
        """Run ``episodes`` greedy episodes on a gymnasium env; mean and std of the returns."""
        from rlgraph_core.execution.evaluation import evaluate_policy

        return evaluate_policy(lambda o: self.act(o, explore=False), env, episodes, seed)
