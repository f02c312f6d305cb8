"""Which network encodes which observation space, and the error that names the right one.

Agents take any observation space their ``network`` slot maps to rank-1 features: ``mlp`` takes
float vectors, ``cnn`` images (boxes of rank 2-3, uint8 pixels or floats), ``dict_encoder``
Dict observations. :func:`check_observation_space` refuses a space the configured built-in
network cannot take with one paragraph naming the network (or env wrapper) that would; a network
from a plugin is not second-guessed here (its own build-time checks speak for it).
:func:`rlgraph_core.spaces.from_gym` does the same for gymnasium spaces rlgraph cannot represent
(MiniGrid's text ``mission``: it names the image wrapper).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlgraph_core.errors import ConfigError
from rlgraph_core.spaces import BoolBox, Dict, FloatBox, IntBox, Space

__all__ = ["check_observation_space", "observation_kind", "to_obs_array"]

#: The built-in network for each kind of observation, and how to name it in a config.
_NETWORK_FOR = {
    "vector": "'mlp' (network: {type: mlp, hidden: [64, 64]})",
    "image": "'cnn' (network: {type: cnn, preset: nature}, or preset: impala)",
    "dict": "'dict_encoder' (network: {type: dict_encoder}: images through a cnn, vectors through an mlp, "
    "Discrete keys one-hot)",
}
#: What each built-in network takes (a recurrent core: what its encoder takes).
_TAKES = {"mlp": "vector", "cnn": "image", "dict_encoder": "dict"}
#: The encoder a recurrent core needs for each kind of observation, as a config names it.
_RECURRENT_ENCODER_FOR = {
    "vector": "encoder: {hidden: [64]} (an mlp)",
    "image": "encoder: {type: cnn, preset: nature} (or preset: impala)",
    "dict": "encoder: {type: dict_encoder}",
}


def observation_kind(space: Space) -> str | None:
    """``vector`` (a float box of rank 1), ``image`` (a non-bool box of rank 2 or 3), ``dict`` or None."""
    if isinstance(space, Dict):
        return "dict"
    if isinstance(space, (FloatBox, IntBox)) and not isinstance(space, BoolBox):
        if len(space.shape) in (2, 3):
            return "image"
        if len(space.shape) == 1 and isinstance(space, FloatBox):
            return "vector"
    return None


def _cut(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_observation_space(space: Space, network: Any, algorithm: str, field: str = "agent.network") -> None:
    """Raise a one-paragraph ConfigError when the built-in network ``network`` (a network slot's
    settings) cannot encode observations of ``space``, naming the network that can.

    Networks from plugins are not checked here.
    """
    kind = observation_kind(space)
    net_type = getattr(network, "type", None)
    recurrent = net_type in ("lstm", "gru")
    encoder_type = getattr(getattr(network, "encoder", None), "type", None) if recurrent else None
    wanted = _TAKES.get(encoder_type if recurrent else net_type)
    if wanted is None:
        return
    if kind == wanted:
        return
    short = _cut(repr(space))
    if kind is None:
        if isinstance(space, (FloatBox, IntBox)) and len(space.shape) <= 1:
            hint = (
                "integer or scalar observations need a float vector: wrap the env so that it gives one "
                "(gymnasium.wrappers.TransformObservation; a Discrete one as one-hot floats: "
                "env.wrappers: [{type: flatten, dtype: float32}])"
            )
        else:
            hint = (
                "no built-in network encodes it: wrap the env so that it gives a float vector, an image "
                "or a Dict of those (gymnasium.wrappers.FlattenObservation flattens nested spaces)"
            )
    elif recurrent:
        hint = f"give the {net_type} core the encoder that reads it: {field}.{_RECURRENT_ENCODER_FOR[kind]}"
    else:
        hint = f"use the network {_NETWORK_FOR[kind]}"
    what = f"'{net_type}' with the encoder '{encoder_type}'" if recurrent else f"'{net_type}'"
    raise ConfigError(
        f"{algorithm}'s '{field}' is {what}, which takes {_NETWORK_FOR[wanted].split(' (')[0]}-shaped "
        f"observations ({wanted}s), but this environment's observation space is {short}: {hint}."
    )


def to_obs_array(obs: Any, space: Space) -> Any:
    """Observations as the arrays the graph takes: the space's dtype (uint8 images stay uint8,
    floats become float32), a dict of such arrays for a Dict space."""
    if isinstance(space, Dict):
        out = {k: to_obs_array(obs[k], child) for k, child in space.items()}
        if type(obs) is dict and len(obs) == len(out) and all(out[k] is obs[k] for k in out):
            # Already the graph's arrays: the same dict back, so observe() knows act()'s
            # observation by identity instead of comparing every array element by element.
            return obs
        return out
    dtype = np.float32 if isinstance(space, FloatBox) else space.dtype
    return np.asarray(obs, dtype)
