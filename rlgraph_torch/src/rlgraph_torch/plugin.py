"""Entry-point module: registers the ``torch`` backend through rlgraph's hooks."""

from rlgraph_core.plugins import LazyObject, hookimpl


@hookimpl
def rlgraph_backends():
    """Register the PyTorch backend under the name ``torch`` (torch is imported on first use), with
    its ``backend:`` settings model."""
    from rlgraph_torch.settings import TorchSettings  # deferred: loading the entry point builds no model

    return {"torch": (LazyObject("rlgraph_torch.backend:TorchBackend"), TorchSettings)}
