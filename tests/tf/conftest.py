"""Fixtures of the tf backend tests: a TFBackend per mode."""

import pytest

tf = pytest.importorskip("tensorflow")

from rlgraph_tf import TFBackend  # noqa: E402

MODES = ("eager", "static")


@pytest.fixture(params=MODES)
def backend(request):
    """A TFBackend on the CPU in each mode (static mode also tries XLA for train steps)."""
    return TFBackend(mode=request.param, device="cpu", seed=0)


@pytest.fixture
def run(backend):
    """``run(fn, *numpy_inputs)``: call ``fn`` on tensors (traced in static mode), return numpy."""

    def _run(fn, *inputs):
        wrapped = backend.function(fn)
        out = wrapped(*[backend.to_tensor(x) for x in inputs])
        if isinstance(out, (tuple, list)):
            return [backend.to_numpy(o) for o in out]
        return None if out is None else backend.to_numpy(out)

    return _run
