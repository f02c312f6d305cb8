"""What a checkpoint must hold: the format's constants, and the checks of its values (dtypes,
weights, non-finite arrays, counters) that saving and loading share.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

import numpy as np


FORMAT_VERSION = 1

#: The files every checkpoint folder has (``state.npz`` too, but older ones may lack it when empty).
REQUIRED_FILES = ("meta.json", "config.json", "weights.npz")

#: Subfolder of a run folder that holds the periodic checkpoints, and the name of its pointer.
PERIODIC_DIR = "checkpoints"
LATEST = "latest"

#: Counters a checkpoint must carry to be resumed from.
TRAINING_COUNTERS = ("timesteps", "updates")


_FAMILIES = {"f": "float", "i": "integer", "u": "integer", "b": "bool"}


def dtype_family(dtype: Any) -> str | None:
    """``"float"``, ``"integer"`` or ``"bool"`` for numeric dtypes; None for any other (strings, objects ...)."""
    return _FAMILIES.get(np.dtype(dtype).kind)


def weight_names_problem(own: Any, given: Any) -> str | None:
    """Why weights named ``given`` are not an agent's of names ``own`` (first five missing and
    unexpected names each), or None when both hold the same names."""
    missing, extra = sorted(set(own) - set(given)), sorted(set(given) - set(own))
    if not (missing or extra):
        return None
    return (
        f"do not match this agent: missing {missing[:5]}{'...' if len(missing) > 5 else ''}, unexpected "
        f"{extra[:5]}{'...' if len(extra) > 5 else ''}. The weights must come from an agent of the same type, "
        f"network spec and spaces."
    )


def weight_problem(
    name: str, shape: tuple[int, ...], dtype: Any, want_shape: tuple[int, ...], want_dtype: Any
) -> str | None:
    """Why an array of ``shape``/``dtype`` cannot be the weight ``name`` of ``want_shape``/``want_dtype``, or None.

    The dtype must be of the variable's family (a float variable takes float16/32/64, never
    integers or strings); the shape must be exactly the variable's.
    """
    family, want_family = dtype_family(dtype), dtype_family(want_dtype)
    if family is None or family != want_family:
        return (
            f"Weight '{name}' is stored as {np.dtype(dtype)}, but this agent's variable is {np.dtype(want_dtype)}: "
            f"a {want_family} weight must be stored with a {want_family} dtype. The weights are corrupt or "
            f"were not written by rlgraph."
        )
    if tuple(shape) != tuple(want_shape):
        return (
            f"Weight '{name}' has shape {tuple(shape)} but this agent expects {tuple(want_shape)}; the weights "
            f"come from a different network spec or environment."
        )
    return None


def nonfinite_arrays(arrays: Mapping[str, Any]) -> list[str]:
    """Names of the float arrays in ``arrays`` that hold a NaN or an infinity (in order)."""
    bad = []
    for name, value in arrays.items():
        array = np.asarray(value)
        if array.dtype.kind in "fc" and not np.isfinite(array).all():
            bad.append(name)
    return bad


#: Replay arrays that hold observations (``env.allow_nonfinite_obs`` may let NaN/inf into them): a
#: ``data/obs`` or ``data/next_obs`` field (or a key of its Dict) under any prefix, as an agent's
#: state (``memory/data/obs``), a memory's own state (``data/obs``) and a Ray replay shard's
#: (``shard_0/data/obs/image``) name them; and the episodes in progress of the local executor's
#: ``env_runner`` attachment (``env_runner.npz: obs``, ``env_runner.npz: rollout/obs``).
_OBS_ARRAY_RE = re.compile(r"(?:^|[/ ])data/(?:obs|next_obs)(?:/|$)|^env_runner\.npz: (?:rollout/)?obs$")


def nonfinite_records_problem(arrays: Mapping[str, Any], allow_nonfinite_obs: bool = False) -> str | None:
    """Which float arrays of ``arrays`` (replay records, priorities, optimizer slots ...) hold NaN or
    infinite values, and where the first one is, in words; None when all are finite.

    With ``allow_nonfinite_obs`` (a run whose env was configured with ``env.allow_nonfinite_obs:
    true``: envs that leave unused dimensions at inf) the replay observations are exempt; rewards
    and discounts are always checked.
    """
    bad = nonfinite_arrays({k: v for k, v in arrays.items() if not (allow_nonfinite_obs and _OBS_ARRAY_RE.search(k))})
    if not bad:
        return None
    first = np.asarray(arrays[bad[0]])
    index = tuple(int(i) for i in np.argwhere(~np.isfinite(first))[0]) if first.ndim else ()
    return (
        f"NaN or infinite values in {', '.join(repr(b) for b in bad[:4])}"
        f"{' ...' if len(bad) > 4 else ''} (first at index {list(index)} of '{bad[0]}')"
    )


def allows_nonfinite_obs(config: Mapping[str, Any]) -> bool:
    """Whether the run config (a dict) sets ``env.allow_nonfinite_obs: true``."""
    env = config.get("env") if isinstance(config, Mapping) else None
    return isinstance(env, Mapping) and env.get("allow_nonfinite_obs") is True


def nonfinite_state_problem(state: Mapping[str, Any], config: Mapping[str, Any]) -> str | None:
    """Why the state arrays of a checkpoint written with run config ``config`` hold non-finite values, or None.

    Every float array (replay records, priorities, optimizer slots ...) must be finite, except
    the replay observations of a run whose env was configured with ``allow_nonfinite_obs: true``
    (see :func:`nonfinite_records_problem`).
    """
    problem = nonfinite_records_problem(state, allows_nonfinite_obs(config))
    if problem is None:
        return None
    return (
        f"its state.npz holds {problem}; rlgraph never saves "
        f"non-finite data (observations and rewards are checked where they enter), so these records are "
        f"corrupt or were not written by rlgraph, and training on them would only produce NaN."
    )


def is_count(value: Any) -> bool:
    """True for a non-negative Python int (not a bool): what a counter must be."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _counters_problem(meta: dict) -> str | None:
    """Why the checkpoint's counters cannot resume training, or None."""
    counters = meta.get("counters")
    if not isinstance(counters, dict):
        return (
            "its meta.json has no 'counters'" if counters is None else f"its 'counters' are {counters!r}, not a mapping"
        )
    missing = [k for k in TRAINING_COUNTERS if k not in counters]
    if missing:
        return f"its counters lack {', '.join(repr(k) for k in missing)}"
    bad = [f"{k}={counters[k]!r}" for k in TRAINING_COUNTERS if not is_count(counters[k])]
    if bad:
        return f"its counters are not non-negative integers ({', '.join(bad)})"
    return None
