"""The component model and the build: components, API methods, graph functions, build()."""

from rlgraph_core.graph.component import Component, api
from rlgraph_core.graph.build import BuildReport, build

__all__ = ["Component", "api", "build", "BuildReport"]
