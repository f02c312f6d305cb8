"""rlgraph core: compose an RL algorithm once, run it on any backend and any executor.

Importing this package imports no deep-learning framework; backends are plugins.
"""

__version__ = "0.1.0"
