"""The backend contract: what a deep-learning framework plugin must provide to rlgraph."""

from rlgraph_core.backend.contract import Backend, OPS_CONTRACT, TrainStep
from rlgraph_core.backend.resolve import make_backend

__all__ = ["Backend", "OPS_CONTRACT", "TrainStep", "make_backend"]
