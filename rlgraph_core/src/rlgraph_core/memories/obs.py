"""How observations are stored: their dtype kept, Dict observations one array per key.

* :func:`stored_obs`: integer and bool observations (uint8 images) keep their dtype, float ones
  become float32 (what the networks read); a Dict observation is a dict of such arrays.
* :func:`flatten_fields` / :func:`unflatten_fields`: a record field holding a dict (a Dict
  observation) is stored as one field per key, named ``field/key`` (nested dicts:
  ``field/key/subkey``), and given back as the same nested dict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = ["SEP", "batch_len", "concat", "flatten_fields", "map_obs", "obs_equal", "stored_obs", "unflatten_fields"]

#: Separator of a Dict observation's key in a flattened field name (``obs/image``).
SEP = "/"


def _stored_leaf(x: Any) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind == "f" and arr.dtype != np.float32:
        return arr.astype(np.float32)
    return arr


def map_obs(fn: Callable[[Any], Any], obs: Any) -> Any:
    """``fn`` applied to every array of ``obs`` (an array, or a possibly nested dict of arrays)."""
    if type(obs) is not np.ndarray and isinstance(obs, Mapping):  # an array skips the slow ABC check
        return {k: map_obs(fn, v) for k, v in obs.items()}
    return fn(obs)


def stored_obs(obs: Any) -> Any:
    """``obs`` as it is stored and transported: float arrays as float32, every other dtype kept
    (uint8 images stay uint8: 4x less memory, cast to float inside the graph); dicts per key."""
    return map_obs(_stored_leaf, obs)


def flatten_fields(batch: Mapping[str, Any]) -> dict[str, Any]:
    """``{"obs": {"image": a, "vec": b}, "actions": c}`` -> ``{"obs/image": a, "obs/vec": b, "actions": c}``."""
    out: dict[str, Any] = {}
    for name, value in batch.items():
        if type(value) is not np.ndarray and isinstance(value, Mapping):  # arrays skip the slow ABC check
            for key, sub in flatten_fields(value).items():
                out[f"{name}{SEP}{key}"] = sub
        else:
            out[name] = value
    return out


def unflatten_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of :func:`flatten_fields`: names with ``/`` become nested dicts again."""
    out: dict[str, Any] = {}
    for name, value in fields.items():
        if SEP not in name:
            out[name] = value
            continue
        parts = name.split(SEP)
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def concat(values: list, axis: int = 0) -> Any:
    """``np.concatenate(values, axis)``; for dicts (Dict observations) per key, recursively."""
    if isinstance(values[0], Mapping):
        return {k: concat([v[k] for v in values], axis) for k in values[0]}
    return np.concatenate(values, axis=axis)


def batch_len(obs: Any) -> int:
    """The leading (batch) dimension of ``obs`` (of its first array for a dict)."""
    while isinstance(obs, Mapping):
        obs = next(iter(obs.values()))
    return len(obs)


def obs_equal(a: Any, b: Any) -> bool:
    """Whether two observations (arrays or dicts of arrays) have equal keys, shapes and values."""
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        if not (isinstance(a, Mapping) and isinstance(b, Mapping)) or a.keys() != b.keys():
            return False
        return all(obs_equal(a[k], b[k]) for k in a)
    return a.shape == b.shape and bool(np.array_equal(a, b))
