"""The backend contract: what a deep-learning framework plugin must provide to rlgraph."""

from rlgraph_core.backend.contract import OPS_CONTRACT, Backend, GradientHook, Ops, TrainStep, ops_contract_problems
from rlgraph_core.backend.resolve import make_backend

__all__ = ["Backend", "GradientHook", "OPS_CONTRACT", "Ops", "TrainStep", "make_backend", "ops_contract_problems"]
