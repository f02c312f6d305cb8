"""Export of trained policies for serving (``rlgraph export``), and running them (``rlgraph evaluate FILE.onnx``).

* :func:`~rlgraph_core.export.onnx_policy.export_onnx`: a checkpoint of any backend -> an ONNX
  file of the agent's greedy policy (extra ``onnx``), traced by :mod:`rlgraph_core.export.tracing`
  from the checkpoint's numpy weights; no deep-learning framework is imported. A multi-agent run's
  checkpoint: :func:`~rlgraph_core.export.onnx_policy.export_policies`, one file per policy.
* :class:`~rlgraph_core.export.onnx_policy.OnnxPolicy`: the exported file on onnxruntime alone.
"""

#: Export formats ``rlgraph export --format`` accepts.
FORMATS = ("onnx",)
