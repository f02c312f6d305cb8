"""rlgraph-ray: Ray executors for rlgraph (``ray_sync``, ``ray_apex``, ``ray_impala``).

Importing this package does not import ray; the executors (``rlgraph_ray.sync``,
``rlgraph_ray.apex``, ``rlgraph_ray.impala``) do, and the plugin registers them lazily.
"""
