"""rlgraph-ray: Ray executors for rlgraph (``ray_sync``, ``ray_apex``).

Importing this package does not import ray; the executors (``rlgraph_ray.sync``,
``rlgraph_ray.apex``) do, and the plugin registers them lazily.
"""
