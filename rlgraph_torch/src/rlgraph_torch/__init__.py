"""The PyTorch backend of rlgraph (registry name ``torch``).

``TorchBackend`` is imported on first access, so loading this package's entry point (which the
plugin manager does to list names) does not import PyTorch.
"""

from rlgraph_core.lazy import lazy_exports

__all__ = ["TorchBackend"]
__version__ = "0.1.0"

__getattr__, __dir__ = lazy_exports(globals(), {"TorchBackend": "rlgraph_torch.backend"}, __all__)
