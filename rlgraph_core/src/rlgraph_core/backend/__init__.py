"""The backend contract: what a deep-learning framework plugin must provide to rlgraph.

Backends are resolved by name in the application layer (:func:`rlgraph_core.assemble.make_backend`).
"""

from rlgraph_core.backend.contract import (
    Backend,
    FusedLoop,
    GradientHook,
    InputLearningRateStep,
    PythonLoop,
    TrainStep,
    describe_non_finite,
    non_finite_update_error,
    parse_device,
)
from rlgraph_core.backend.ops import (
    OPS_CONTRACT,
    Ops,
    activation_fn,
    binary_op,
    canonical_array,
    ops_contract_problems,
    sequence_op,
    unary_op,
)

__all__ = [
    "Backend",
    "FusedLoop",
    "GradientHook",
    "InputLearningRateStep",
    "PythonLoop",
    "OPS_CONTRACT",
    "Ops",
    "TrainStep",
    "activation_fn",
    "binary_op",
    "canonical_array",
    "describe_non_finite",
    "non_finite_update_error",
    "ops_contract_problems",
    "parse_device",
    "sequence_op",
    "unary_op",
]
