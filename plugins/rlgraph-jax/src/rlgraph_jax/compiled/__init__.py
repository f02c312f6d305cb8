"""The ``compiled`` executor: env steps, acting and learning as one ``jax.jit`` program.

See :mod:`rlgraph_jax.compiled.executor` (the run), :mod:`rlgraph_jax.compiled.ppo` (PPO's
program, built from the agent's own components) and :mod:`rlgraph_jax.compiled.settings` (the
``executor:`` section, validated without importing JAX).
"""
