"""The PyTorch backend of rlgraph (registry name ``torch``)."""

from rlgraph_torch.backend import TorchBackend

__all__ = ["TorchBackend"]
__version__ = "0.1.0"
