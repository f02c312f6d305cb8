"""torch tests: torch runs on one intra-op thread.

The networks here are tiny; on a small, busy machine torch's intra-op worker threads mostly wait
for each other (a 10-20x slowdown was measured on 2 loaded cores).
"""

import pytest


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    try:
        import torch
    except ImportError:  # the module skips itself without rlgraph-torch
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
