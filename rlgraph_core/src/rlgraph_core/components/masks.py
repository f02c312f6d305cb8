"""Legal-action masks: where an observation holds one, and how a head applies it.

A mask is part of the observation (see docs/masking.md): a Dict observation whose key
:data:`MASK_KEY` (``"action_mask"``, PettingZoo classic's name) holds one flag per action, true
(non-zero) where the action is legal. An env with sb3-contrib's ``action_masks()`` method instead
is wrapped so that its mask appears under that key (:mod:`rlgraph_core.wrappers`), so replay,
rollouts, vector envs and export carry the mask as they carry any observation.

An agent finds the mask once, from its spaces (:func:`mask_layout`); its policy's network sees the
observation without the mask (the other key alone where one is left, so
``{"observation": Box, "action_mask": ...}`` feeds an ``mlp``), and its heads take the mask:
:func:`masked_logits` gives an illegal action the large *finite* logit :data:`ILLEGAL_LOGIT`, so
softmax, log-softmax, Gumbel-max and argmax never pick it and no ``inf - inf`` can make a NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rlgraph_core.errors import ConfigError
from rlgraph_core.spaces import BoolBox, Dict, Discrete, FloatBox, IntBox, MultiDiscrete, Space

__all__ = [
    "ILLEGAL_LOGIT",
    "MASK_KEY",
    "MaskLayout",
    "check_legal",
    "mask_layout",
    "masked_logits",
    "split_observation",
]

#: The observation key that holds a legal-action mask (PettingZoo classic's name).
MASK_KEY = "action_mask"

#: The logit (and Q-value) of an illegal action: large and finite. ``exp`` of it minus any sane
#: logit is exactly 0 in float32, yet ``0 * ILLEGAL_LOGIT`` is 0, never the NaN of ``0 * -inf``.
ILLEGAL_LOGIT = -1.0e9


@dataclass(frozen=True)
class MaskLayout:
    """Where the mask is in an observation and what the policy's network sees instead.

    Attributes:
        policy_space: the observation space without the mask (the one remaining key's space, when
            one is left).
        mask_size: flags per mask: ``n`` for ``Discrete(n)``, ``sum(nvec)`` for ``MultiDiscrete``.
        single_key: the one key left besides the mask (its value is the policy's observation), or
            None when several keys are left (the policy sees a Dict of them).
    """

    policy_space: Space
    mask_size: int
    single_key: str | None


def _mask_size(action_space: Space) -> int | None:
    if isinstance(action_space, Discrete):
        return int(action_space.n)
    if isinstance(action_space, MultiDiscrete):
        return int(np.sum(np.asarray(action_space.nvec, np.int64)))
    return None


def mask_layout(observation_space: Space, action_space: Space, algorithm: str = "the agent") -> MaskLayout | None:
    """The mask layout of ``observation_space`` (None when it holds no :data:`MASK_KEY`).

    Raises:
        ConfigError: one paragraph when the mask cannot be this action space's: its actions are not
            discrete, or the mask has the wrong shape or kind.
    """
    if not isinstance(observation_space, Dict) or MASK_KEY not in observation_space.keys():
        return None
    mask_space = observation_space[MASK_KEY]
    size = _mask_size(action_space)
    if size is None:
        raise ConfigError(
            f"The observation holds a legal-action mask ('{MASK_KEY}'), but {algorithm}'s action space "
            f"{str(action_space)[:80]} is not Discrete or MultiDiscrete: masks apply to discrete actions only. "
            f"Remove the mask from the observation (env.wrappers: [{{type: filter_observation, keys: [...]}}])."
        )
    if not isinstance(mask_space, (BoolBox, IntBox, FloatBox)) or isinstance(mask_space, Discrete):
        kind = type(mask_space).__name__
        raise ConfigError(
            f"The observation's '{MASK_KEY}' is a {kind} ({str(mask_space)[:80]}); a legal-action mask is a Box "
            f"of {size} flags (bool or 0/1 integers), one per action."
        )
    if tuple(mask_space.shape) != (size,):
        per = "one per action" if isinstance(action_space, Discrete) else "the flags of each sub-action, concatenated"
        raise ConfigError(
            f"The observation's '{MASK_KEY}' has shape {tuple(mask_space.shape)}, but the action space "
            f"{str(action_space)[:80]} needs a mask of shape ({size},) ({per}); make the env's mask match "
            f"its action space (or name another observation key with env.action_mask)."
        )
    rest = {k: v for k, v in observation_space.items() if k != MASK_KEY}
    if not rest:
        raise ConfigError(
            f"The observation holds only the legal-action mask '{MASK_KEY}': the policy has nothing else to "
            f"observe. Put the env's observation beside it (e.g. {{'observation': ..., '{MASK_KEY}': ...}})."
        )
    if len(rest) == 1:
        ((key, space),) = rest.items()
        return MaskLayout(space, size, key)
    return MaskLayout(Dict(rest), size, None)


def split_observation(obs: Any, layout: MaskLayout | None) -> tuple[Any, Any]:
    """``(policy observation, mask)`` of a batch ``obs`` (tensors or arrays); ``(obs, None)`` unmasked."""
    if layout is None:
        return obs, None
    mask = obs[MASK_KEY]
    if layout.single_key is not None:
        return obs[layout.single_key], mask
    return {k: v for k, v in obs.items() if k != MASK_KEY}, mask


def masked_logits(ops, logits: Any, mask: Any) -> Any:
    """``logits`` where ``mask`` is true (non-zero), :data:`ILLEGAL_LOGIT` elsewhere (``mask`` None: as they are)."""
    if mask is None:
        return logits
    return ops.where(ops.cast(mask, "bool"), logits, ILLEGAL_LOGIT)


def check_legal(mask: Any, step: int, nvec: tuple[int, ...] | None = None) -> None:
    """Raise a one-paragraph ValueError naming env step ``step`` where a row of the numpy ``mask``
    allows no action (for a MultiDiscrete ``nvec``: no value of some sub-action)."""
    flags = np.asarray(mask) != 0
    sizes = (flags.shape[-1],) if nvec is None else nvec
    start = 0
    for i, n in enumerate(sizes):
        bad = ~flags[..., start : start + n].any(axis=-1)
        if bad.any():
            what = (
                f"no action (all {n} flags false)"
                if nvec is None
                else f"no value of sub-action {i} (flags {start}..{start + n - 1} all false)"
            )
            raise ValueError(
                f"The legal-action mask of env {int(np.flatnonzero(bad)[0])} at env step {step} allows {what}: an "
                f"agent must act, so every observation it acts on needs a legal action (for every sub-action). "
                f"End the episode (terminated) where nothing is legal; a final observation's mask is never acted "
                f"on and may be all false."
            )
        start += n
