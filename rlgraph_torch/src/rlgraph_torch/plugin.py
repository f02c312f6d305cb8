"""Entry-point module: registers the ``torch`` backend through rlgraph's hooks."""

from rlgraph_core.plugins import hookimpl


@hookimpl
def rlgraph_backends():
    """Register the PyTorch backend under the name ``torch``."""
    from rlgraph_torch.backend import TorchBackend

    return {"torch": TorchBackend}
