"""Entry-point module: registers the ``tf`` backend through rlgraph's hooks."""

from rlgraph_core.plugins import LazyObject, hookimpl


@hookimpl
def rlgraph_backends():
    """Register the TensorFlow backend under the name ``tf``.

    TensorFlow is imported only when a ``tf`` backend is made, so listing plugins or
    validating a torch config never pays for it; a broken TensorFlow install then surfaces as
    a PluginError naming ``rlgraph_tf.backend:TFBackend``.
    """
    return {"tf": LazyObject("rlgraph_tf.backend:TFBackend")}
