"""Entry-point module: registers the ``horovod`` executor through rlgraph's hooks.

The executor class is a :class:`~rlgraph_core.plugins.LazyObject` and its settings model needs
only pydantic, so ``rlgraph plugins`` and config validation never import Horovod or a framework.
"""

from rlgraph_core.plugins import LazyObject, hookimpl


@hookimpl
def rlgraph_executors():
    """``horovod``: data-parallel learners, gradients averaged across ``horovodrun`` ranks."""
    from rlgraph_horovod.settings import HorovodSettings  # deferred: loading the entry point builds no model

    return {"horovod": (LazyObject("rlgraph_horovod.executor:HorovodExecutor"), HorovodSettings)}
