"""Which built-in agent fits which action space: the hint agents add to a space mismatch error."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlgraph_core.components.distributions import unscale_action
from rlgraph_core.errors import ConfigError
from rlgraph_core.spaces import BoolBox, Discrete, FloatBox, IntBox, MultiBinary, MultiDiscrete, Space

__all__ = [
    "CAPABILITIES",
    "SUPPORTED_ACTIONS",
    "action_space_hint",
    "DiscreteOrBoxActions",
    "acting_starts",
    "agent_capabilities",
    "discrete_or_bounded_box",
    "recurrent_pending_step",
    "sequence_step_spaces",
    "time_major",
]

#: What an agent can declare it supports, in its config model's ``capabilities`` class variable
#: (a frozenset); executors check these instead of looking for config field names.
CAPABILITIES = {
    "rollouts": "collects on-policy rollouts of agent.n_steps steps per env and learns from each (ray_sync)",
    "replay": "learns from a replay memory (agent.memory) filled by any actor (ray_apex)",
    "exploration": "acts with a swappable exploration component (agent.exploration) a worker may set (ray_apex)",
    "vtrace": "corrects the policy lag of fragments collected with older weights by V-trace (ray_impala)",
}


def agent_capabilities(agent_config) -> frozenset[str]:
    """The capabilities (:data:`CAPABILITIES`) an agent config's model declares (none if it declares none)."""
    return frozenset(getattr(type(agent_config), "capabilities", frozenset()))


#: What each built-in agent acts in.
SUPPORTED_ACTIONS = {
    "dqn": "a single Discrete space (n actions)",
    "ppo": "a single Discrete space or a rank-1 Box of floats",
    "a2c": "a single Discrete space or a rank-1 Box of floats",
    "sac": "a rank-1 Box of floats with finite bounds",
}


def action_space_hint(action_space) -> str:
    """One or two sentences naming the built-in agents that take ``action_space`` (an rlgraph space),
    or, when none does, how to make the environment fit one."""
    if isinstance(action_space, Discrete):
        return "For Discrete actions use dqn, ppo or a2c."
    if isinstance(action_space, FloatBox) and len(action_space.shape) == 1:
        bounded = bool(np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high)))
        if bounded:
            return "For continuous (Box) actions use sac, ppo or a2c."
        return "For unbounded continuous (Box) actions use ppo or a2c (sac needs finite bounds)."
    if isinstance(action_space, MultiDiscrete):
        n = int(np.prod(np.asarray(action_space.nvec, dtype=np.int64)))
        how = (
            f"wrap the environment so that its actions are one Discrete({n}) enumerating the "
            f"combinations of {action_space!r}"
        )
    elif isinstance(action_space, MultiBinary):
        how = "wrap the environment so that its actions are one Discrete space enumerating the bit patterns"
    else:
        how = "wrap the environment so that its actions are one Discrete space or a rank-1 float Box"
    supported = "; ".join(f"{name}: {what}" for name, what in SUPPORTED_ACTIONS.items())
    return (
        f"No built-in agent acts in this space ({supported}): {how} (a gymnasium.ActionWrapper), or use "
        f"an agent from a plugin ('rlgraph plugins' lists the agents installed)."
    )


def discrete_or_bounded_box(action_space, who: str) -> tuple[bool, np.ndarray, np.ndarray]:
    """``(discrete, low, high)`` of a single Discrete action space or a rank-1 float Box with finite
    bounds (what the offline agents act in; ``low``/``high`` are float64, NaN for a Discrete).

    Raises:
        ConfigError: for any other space, naming ``who`` (e.g. ``"IQL (agent.type iql)"``) and the wrappers that fit.
    """
    discrete = isinstance(action_space, Discrete)
    low = np.asarray(getattr(action_space, "low", np.nan), np.float64)
    high = np.asarray(getattr(action_space, "high", np.nan), np.float64)
    if not discrete and not (
        isinstance(action_space, FloatBox)
        and len(action_space.shape) == 1
        and np.all(np.isfinite(low))
        and np.all(np.isfinite(high))
    ):
        raise ConfigError(
            f"{who} takes a single Discrete action space or a rank-1 float Box with finite bounds; this "
            f"environment's is {action_space!r}. Wrap the environment so that its actions are one of those "
            f"(a gymnasium.ActionWrapper; RescaleAction or ClipAction give a Box finite bounds)."
        )
    return discrete, low, high


class DiscreteOrBoxActions:
    """The actions of an agent that acts in a single Discrete space or a bounded rank-1 float Box
    (the offline agents BC and IQL): replay stores a discrete action as its index ``0 .. n-1`` and
    a continuous one scaled to ``[-1, 1]``."""

    action_space: Any
    discrete: bool
    action_start: int
    low: np.ndarray
    high: np.ndarray
    _num_stored: int

    def _setup_actions(self, action_space, who: str) -> tuple[int, Space]:
        """Check ``action_space`` (:func:`discrete_or_bounded_box`, naming ``who``) and keep what
        :meth:`_stored_actions` needs; ``(actions n or action dims, batched space of stored actions)``."""
        discrete, low, high = discrete_or_bounded_box(action_space, who)
        self.discrete = discrete
        if discrete:
            self.action_start = int(action_space.start)
            self._num_stored = int(action_space.n)
            return self._num_stored, IntBox(0, self._num_stored - 1, shape=()).with_batch_rank()
        self.low, self.high = low, high
        self._num_stored = int(action_space.shape[0])
        return self._num_stored, FloatBox(-1.0, 1.0, shape=(self._num_stored,)).with_batch_rank()

    def _stored_actions(self, actions):
        """Action indices ``0 .. n-1`` (discrete) or env actions mapped to the unit box (continuous)."""
        if self.discrete:
            return (np.asarray(actions) - self.action_start).astype(self.action_space.dtype, copy=False)
        return np.clip(unscale_action(np.asarray(actions, np.float64), self.low, self.high), -1.0, 1.0).astype(
            np.float32
        )

    def _stored_action_space(self):
        if self.discrete:
            return Discrete(self._num_stored, dtype=self.action_space.dtype)
        return FloatBox(-1.0, 1.0, shape=(self._num_stored,))


def acting_starts(state, episode_start, n: int, who: str) -> np.ndarray:
    """The ``[n]`` bool episode starts a recurrent agent acts with from ``state`` (all True when
    ``episode_start`` is None: every env starts an episode).

    Raises:
        ValueError: without a ``state``, naming ``who`` (e.g. ``"A recurrent DQN ('lstm')"``) and how to call it.
    """
    if state is None:
        raise ValueError(
            f"{who} acts from a state: call act(obs, explore, state=agent.initial_state({n}), "
            f"episode_start=<[{n}] bool>) and pass the state it returns to the next call "
            f"(predict(obs, state, episode_start) does this for you)."
        )
    return np.ones(n, bool) if episode_start is None else np.asarray(episode_start, bool).reshape(n)


def refuse_recurrent_problem(problem: str | None, preprocessor, net) -> None:
    """Raise :class:`ConfigError` for a recurrent network's sequence ``problem`` (a sentence without its
    full stop), or, where there is none, for a ``preprocessor``, which a recurrent network ``net``
    does not take yet."""
    if problem is None and preprocessor is not None:
        problem = (
            f"'agent.preprocessor' = '{preprocessor.type}' is not taken by a recurrent network "
            f"('{net.type}') yet; remove it or normalise observations with an env wrapper"
        )
    if problem is not None:
        raise ConfigError(problem + ".")


def time_major(space: Space) -> Space:
    """``space`` (with its batch rank) with a leading time axis: the layout of a recurrent
    network's sequences ``[T, B, ...]``."""
    return space.with_time_rank(flag=True, time_major=True)


def sequence_step_spaces(obs_b: Space, state: Space) -> dict[str, Space]:
    """The inputs every recurrent policy method takes: time-major observations ``obs`` (from the
    batched ``obs_b``), the ``state`` at the sequences' starts and the episode-start mask ``reset``."""
    return {"obs": time_major(obs_b), "state": state, "reset": time_major(BoolBox().with_batch_rank())}


def recurrent_pending_step(pending: tuple | None, obs, agent: str) -> tuple:
    """What a recurrent agent's ``act(obs, explore=True, ...)`` cached for the step ``observe(obs, ...)``
    stores (its first item is that step's ``obs``), checked to be that same step.

    Raises:
        ValueError: nothing is cached or it is another step's; ``agent`` names the agent in the message.
    """
    if pending is None or not (pending[0] is obs or np.array_equal(pending[0], obs)):
        raise ValueError(
            f"A {agent} observes only the step it just acted on: call act(obs, explore=True, "
            "state=..., episode_start=...) and then observe(obs, actions, ...) with the same obs (the step's "
            "state is known only from that call)."
        )
    return pending
