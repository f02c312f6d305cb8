"""The memory an agent's networks take to train, estimated and checked before anything is built.

A network spec such as ``hidden: [100000000]`` asks for gigabytes of weights; building it
allocates them, and the process is killed by the OS (even under ``--dry-run``, and its
neighbours with it). As replay memories are (:mod:`rlgraph_core.memories.sizing`), the networks
are estimated first and a spec that cannot fit is refused with one paragraph naming the bytes.

Every section of the agent config that has a ``hidden`` list of layer widths counts as a fully
connected stack from the observation (its flat size, for ``type: mlp``; 1 for other encoders and
for the networks behind an ``encoder`` section, which read its features) to one output, float32.
Per parameter it holds the weight, its gradient and the optimizer's slots (``adam`` 2, ``rmsprop``
1, ``sgd`` 1 with momentum), once per copy the agent keeps (SAC's twin critics), plus its
target networks (:data:`NETWORK_COPIES`). On top: building draws the largest layer's initial
weights in float64 and casts them (12 bytes per weight of that layer), and an update holds a
batch's activations and their gradients (``batch_size`` x the layer widths x 8 bytes). Measured
peaks of building alone (``--dry-run``, torch, 4M-unit layers) were 19-41 bytes per parameter, so
this is a floor of what training needs, not a bound that refuses what would fit.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from rlgraph_core.errors import ConfigError
from rlgraph_core.memories.sizing import available_memory_bytes, format_bytes

__all__ = ["check_networks_fit", "estimate_network_bytes"]

#: Copies of every parameter at least present during training: the weights and their gradients.
COPIES = 2

#: Optimizer slots per parameter, by ``optimizer.type`` (sgd: 1 with momentum, else 0).
OPTIMIZER_SLOTS = {"adam": 2, "rmsprop": 1, "sgd": 0}

#: ``{agent type: {config path: (trained copies, target copies)}}`` of networks that are not one
#: trained copy without a target: DQN's Q network has a target; SAC's twin critics have two.
NETWORK_COPIES = {
    "dqn": {"agent.network": (1, 1)},
    "sac": {"agent.critic_network": (2, 2)},
}


def _hidden_sections(value: Any, path: str) -> Iterator[tuple[str, dict]]:
    """``(path, section)`` for every mapping in ``value`` with a ``hidden`` list of integers."""
    if isinstance(value, dict):
        hidden = value.get("hidden")
        if isinstance(hidden, (list, tuple)) and hidden and all(isinstance(h, int) for h in hidden):
            yield path, value
        for key, item in value.items():
            yield from _hidden_sections(item, f"{path}.{key}")


def _flat_size(space) -> int:
    try:
        return max(1, sum(int(np.prod(leaf.shape or (), dtype=np.int64)) for leaf in space.flatten().values()))
    except Exception:  # an exotic space: the lower bound does not need it
        return 1


def estimate_network_bytes(agent_config: Any, observation_space=None) -> list[tuple[str, int]]:
    """``[(config path, bytes)]``: each network's training memory (see the module docs)."""
    raw = agent_config.model_dump() if hasattr(agent_config, "model_dump") else agent_config
    obs = _flat_size(observation_space) if observation_space is not None else 1
    # With an encoder in front (SAC's ``encoder``), the other networks read its features, not the observation.
    encoded = isinstance(raw, dict) and bool(raw.get("encoder"))
    optimizer = raw.get("optimizer") if isinstance(raw, dict) else None
    optimizer = optimizer if isinstance(optimizer, dict) else {}
    slots = OPTIMIZER_SLOTS.get(optimizer.get("type", "adam"), 0) + (
        1 if optimizer.get("type") == "sgd" and optimizer.get("momentum") else 0
    )
    copies = NETWORK_COPIES.get(raw.get("type") if isinstance(raw, dict) else None, {})
    batch = raw.get("batch_size") if isinstance(raw, dict) else None
    batch = batch if isinstance(batch, int) and batch > 0 else 1
    out = []
    for path, section in _hidden_sections(raw, "agent"):
        reads_obs = section.get("type", "mlp") == "mlp" and (not encoded or path.startswith("agent.encoder"))
        widths = [obs if reads_obs else 1, *section["hidden"], 1]
        layers = [a * b for a, b in zip(widths, widths[1:])]
        params = sum(layers) + sum(widths[1:])
        trained, targets = copies.get(path, (1, 0))
        per_copy = params * 4 * (COPIES + slots)
        activations = batch * sum(widths[1:]) * 4 * 2  # values and their gradients, per trained copy
        init = max(layers) * 12  # the largest layer drawn in float64, then cast to float32
        out.append((path, trained * (per_copy + activations) + targets * params * 4 + init))
    return out


def check_networks_fit(agent_config: Any, observation_space=None, available: int | None = None) -> int:
    """Raise a ConfigError if the agent's networks cannot fit in memory; return the estimate in bytes.

    Args:
        agent_config: the validated agent config (or its dict).
        observation_space: the environment's observation space (rlgraph), for the input width.
        available: bytes available (default: what this process can have now; not checked
            when that cannot be told).
    """
    sections = estimate_network_bytes(agent_config, observation_space)
    total = sum(size for _, size in sections)
    available = available_memory_bytes() if available is None else available
    if available is not None and total > available:
        path, size = max(sections, key=lambda item: item[1])
        raise ConfigError(
            f"'{path}.hidden' = {str(_hidden_of(agent_config, path))[:80]}: the agent's networks need at least "
            f"{format_bytes(total)} to train ({format_bytes(size)} for this one: float32 weights, their "
            f"gradients and optimizer slots, target copies, a batch's activations and the initial draw), but only "
            f"{format_bytes(available)} of memory is available; nothing was allocated. Use smaller layers (a few "
            f"hundred units per layer is typical) or a machine with more memory."
        )
    return total


def _hidden_of(agent_config: Any, path: str) -> Any:
    node = agent_config.model_dump() if hasattr(agent_config, "model_dump") else agent_config
    for part in path.split(".")[1:]:
        node = node.get(part, {}) if isinstance(node, dict) else {}
    return node.get("hidden") if isinstance(node, dict) else None
