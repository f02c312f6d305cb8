"""Test harness for components: run any component without a framework, or on every backend.

``rlgraph_core.testing`` is what the project's own component tests use, and what a third-party
component package can use for its tests:

* :class:`NumpyBackend` -- the whole backend ops contract in plain numpy (eager; no autodiff).
  It is only reachable from here, never through the plugin registry, so users never see it in
  ``rlgraph plugins`` or configs.
* :func:`available_backends` -- ``{"numpy": NumpyBackend, **every installed backend plugin}``.
* :func:`backend_params` -- pytest parameters for every available ``(backend, mode)`` pair:
  numpy-eager always; each plugin backend in ``eager`` and ``static``. The environment variable
  ``RLGRAPH_TEST_BACKENDS`` (e.g. ``numpy``, ``numpy,torch-eager``, ``torch``) narrows the pairs
  for a quick run; static mode compiles every tested function, which takes seconds each.
* :class:`ComponentTest` -- build a component from spaces on a backend, then ``call`` its API
  methods with numpy, ``get_weights``/``set_weights``, take ``gradients`` and make a
  ``train_step`` (framework backends only).
* :mod:`rlgraph_core.testing.conformance` -- the backend conformance suite: a backend plugin
  subclasses ``BackendConformance`` in its tests (setting ``backend_name``) and runs every
  contract test on itself in both modes. Not imported here (it imports pytest). Its op cases
  (inputs and numpy references per op) are :mod:`rlgraph_core.testing.op_cases`, its optimizer
  references (torch.optim's formulas in numpy) :mod:`rlgraph_core.testing.optimizer_reference`.

Like the rest of rlgraph-core, importing this package imports no deep-learning framework;
pytest is imported only by :func:`backend_params`.

Example (a pytest fixture running a test on every backend and mode)::

    @pytest.fixture(params=backend_params())
    def backend(request):
        return request.param            # ("numpy", "eager"), ("torch", "static") ...

    def test_dense(backend):
        t = ComponentTest(DenseLayer(3), {"call": {"x": FloatBox(shape=(4,)).with_batch_rank()}}, backend)
        ...
"""

from rlgraph_core.testing.harness import (
    INPUT_PREFIX,
    SELECT_ENV,
    ComponentTest,
    HarnessTrainStep,
    available_backends,
    backend_pairs,
    backend_params,
    make_test_backend,
)
from rlgraph_core.testing.numpy_backend import NumpyBackend, NumpyOps

__all__ = [
    "INPUT_PREFIX",
    "SELECT_ENV",
    "ComponentTest",
    "HarnessTrainStep",
    "NumpyBackend",
    "NumpyOps",
    "available_backends",
    "backend_pairs",
    "backend_params",
    "make_test_backend",
]
