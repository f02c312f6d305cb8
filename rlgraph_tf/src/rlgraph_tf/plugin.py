"""Entry-point module: registers the ``tf`` backend through rlgraph's hooks."""

import os

from rlgraph_core.plugins import LazyObject, hookimpl

# Quiet TensorFlow's C++ logging and its oneDNN notice unless the user set them: the plugin
# manager loads this module before TensorFlow is ever imported (it is imported lazily), so the
# defaults take effect; the core CLI knows nothing of TensorFlow.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")


@hookimpl
def rlgraph_backends():
    """Register the TensorFlow backend under the name ``tf``.

    TensorFlow is imported only when a ``tf`` backend is made, so listing plugins or
    validating a torch config never pays for it; a broken TensorFlow install then surfaces as
    a PluginError naming ``rlgraph_tf.backend:TFBackend``. Its ``backend:`` settings model
    (:class:`~rlgraph_tf.settings.TFSettings`) imports no TensorFlow.
    """
    from rlgraph_tf.settings import TFSettings  # deferred: loading the entry point builds no model

    return {"tf": (LazyObject("rlgraph_tf.backend:TFBackend"), TFSettings)}
