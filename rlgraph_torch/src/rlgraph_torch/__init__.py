"""The PyTorch backend of rlgraph (registry name ``torch``).

``TorchBackend`` is imported on first access, so loading this package's entry point (which the
plugin manager does to list names) does not import PyTorch.
"""

__all__ = ["TorchBackend"]
__version__ = "0.1.0"


def __getattr__(name):
    if name == "TorchBackend":
        from rlgraph_torch.backend import TorchBackend  # deferred: importing the package must not import torch

        return TorchBackend
    raise AttributeError(f"module 'rlgraph_torch' has no attribute {name!r}")
