"""Moving agent state between ranks: rank 0's state to all at the start, and checksums of
weights to prove the ranks still agree.

Everything moves as raw bytes of numpy arrays plus a JSON header (names, shapes, dtypes,
counters): nothing is pickled, as with checkpoints.
"""

from __future__ import annotations

import json
import zlib
from typing import Any, Mapping

import numpy as np

from rlgraph_horovod.collectives import Collectives

#: Counters that must stay each rank's own: the generators that make ranks explore differently.
RANK_OWN_COUNTERS = ("rng", "shuffle_rng")


class WeightDivergence(RuntimeError):
    """Ranks that should hold identical weights do not."""


def _broadcast_bytes(coll: Collectives, payload: bytes | None, name: str) -> bytes:
    """``payload`` of rank 0 on every rank (other ranks pass None)."""
    length = np.array([len(payload) if payload is not None else 0], np.int64)
    length = coll.broadcast(length, root=0, name=f"{name}.length")
    buf = np.frombuffer(payload, np.uint8).copy() if payload is not None else np.zeros(int(length[0]), np.uint8)
    return coll.broadcast(buf, root=0, name=f"{name}.bytes").tobytes()


def broadcast_arrays(
    coll: Collectives, arrays: Mapping[str, np.ndarray] | None, meta: Any = None, name: str = "rlgraph.state"
) -> tuple[dict[str, np.ndarray], Any]:
    """Rank 0's ``arrays`` (and JSON-able ``meta``) on every rank; other ranks pass None.

    The header goes first, so ranks need not know the names or shapes in advance; each array
    then travels as its bytes.
    """
    header = None
    if coll.rank == 0:
        assert arrays is not None
        specs = {k: [list(np.shape(v)), np.asarray(v).dtype.str] for k, v in arrays.items()}
        header = json.dumps({"arrays": specs, "meta": meta}).encode()
    decoded = json.loads(_broadcast_bytes(coll, header, f"{name}.header"))
    out: dict[str, np.ndarray] = {}
    for i, (key, (shape, dtype)) in enumerate(decoded["arrays"].items()):
        dt = np.dtype(dtype)
        if coll.rank == 0:
            raw = np.ascontiguousarray(arrays[key]).reshape(-1).view(np.uint8)
        else:
            raw = np.zeros(int(np.prod(shape, dtype=np.int64)) * dt.itemsize, np.uint8)
        got = coll.broadcast(raw, root=0, name=f"{name}.{i}") if raw.size else raw
        out[key] = np.array(got, np.uint8).view(dt).reshape(shape)  # a writable copy
    return out, decoded["meta"]


def broadcast_agent(coll: Collectives, agent, seed: int) -> None:
    """Give every rank rank 0's weights, optimizer state, replay and counters.

    Each rank keeps its own random generators (reseeded from ``seed`` and the step count), so
    ranks still explore differently after a resumed run.
    """
    if coll.size == 1:
        return
    if coll.rank == 0:
        state_arrays, counters = agent.get_state()
        weights = agent.get_weights()
        arrays = {**{f"w/{k}": v for k, v in weights.items()}, **{f"s/{k}": v for k, v in state_arrays.items()}}
        counters = {k: v for k, v in counters.items() if k not in RANK_OWN_COUNTERS}
        broadcast_arrays(coll, arrays, {"counters": counters, "version": agent.weights_version})
        return
    arrays, meta = broadcast_arrays(coll, None)
    weights = {k[2:]: v for k, v in arrays.items() if k.startswith("w/")}
    state = {k[2:]: v for k, v in arrays.items() if k.startswith("s/")}
    agent.set_state(state, meta["counters"])
    agent.set_weights(weights, version=meta["version"])
    agent.rng = np.random.default_rng([seed, agent.timesteps])
    if hasattr(agent, "shuffle_rng"):
        agent.shuffle_rng = np.random.default_rng([seed, agent.timesteps, 1])


def weights_checksum(weights: Mapping[str, np.ndarray]) -> int:
    """CRC-32 of every weight's bytes, in name order (identical weights, identical checksum)."""
    crc = 0
    for key in sorted(weights):
        crc = zlib.crc32(np.ascontiguousarray(weights[key]).tobytes(), crc)
    return crc


def check_identical(coll: Collectives, weights: Mapping[str, np.ndarray], updates: int) -> None:
    """Raise :class:`WeightDivergence` on every rank unless all ranks hold the same weights."""
    if coll.size == 1:
        return
    slots = np.zeros(coll.size, np.float64)
    slots[coll.rank] = weights_checksum(weights)  # < 2**32: exact in float64
    sums = coll.allreduce(slots, average=False, name="rlgraph.checksum")
    differ = [r for r in range(coll.size) if sums[r] != sums[0]]
    if differ:
        raise WeightDivergence(
            f"After {updates} updates the weights of rank(s) {differ} differ from rank 0's (weight checksums "
            f"{[int(s) for s in sums]}). Every rank must apply the same averaged update; this happens when "
            f"something changes weights outside the gradient hook on one rank only (e.g. an observation "
            f"normaliser updated from local data, or a rank-dependent learning-rate schedule)."
        )
