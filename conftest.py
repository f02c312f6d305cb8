"""Repository-wide test setup: the ``heavy`` marker.

A ``heavy`` test takes minutes on CI's two cores (a learning run to a full threshold on a slow
path, a multi-process run of a large budget). CI's warm budget is 20 minutes, so the default run
skips these and the opt-in ``nox -s heavy`` session runs them (``RLGRAPH_HEAVY_TESTS=1``). Every
feature keeps at least one cheaper learning test that CI runs; ``heavy`` holds the full-budget
versions and the duplicates of a path CI already covers.
"""

import os

import pytest

HEAVY_ENV = "RLGRAPH_HEAVY_TESTS"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``heavy`` tests unless ``RLGRAPH_HEAVY_TESTS=1`` asks for them."""
    if os.environ.get(HEAVY_ENV) == "1":
        return
    skip = pytest.mark.skip(reason=f"heavy (minutes on 2 cores): `nox -s heavy` ({HEAVY_ENV}=1) runs it")
    for item in items:
        if item.get_closest_marker("heavy") is not None:
            item.add_marker(skip)
