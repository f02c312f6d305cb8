"""The backend contract: what a deep-learning framework plugin must provide to rlgraph.

Backends are resolved by name in the application layer (:func:`rlgraph_core.assemble.make_backend`).
"""

from rlgraph_core.backend.contract import Backend, OPS_CONTRACT, TrainStep

__all__ = ["Backend", "OPS_CONTRACT", "TrainStep"]
