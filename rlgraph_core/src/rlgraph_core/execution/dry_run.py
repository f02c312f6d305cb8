"""``rlgraph train --dry-run``: build everything a run would build, report the plan, train nothing.

:func:`dry_run` makes the vector env and the evaluation env (one reset each), builds the agent
with its replay memory (whose size is estimated and checked against the memory available),
loads the checkpoint of a ``--resume`` and returns the plan as text. It writes nothing: the
output folder is only named, so a config can be checked in about a second.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from rlgraph_core.memories.sizing import available_memory_bytes, format_bytes

__all__ = ["dry_run"]


def _space_text(space) -> str:
    """A short description of a gymnasium space (its repr, shortened for big bounds)."""
    text = repr(space)
    return text if len(text) <= 120 else f"{type(space).__name__}(shape={getattr(space, 'shape', None)})"


def dry_run(assembly, out_dir: str | Path, resume_dir: str | Path | None = None) -> str:
    """Build the run's envs and agent as :meth:`Executor.run` would, and describe the plan.

    Args:
        assembly: the :class:`~rlgraph_core.assemble.Assembly` of the validated config.
        out_dir: the output folder the run would write to (named only, not created).
        resume_dir: a checkpoint to resume from: it is loaded into the agent, so a checkpoint
            that does not fit the config fails here too.

    Returns:
        The plan: agent, env and spaces, backend, executor, memory and its estimated size,
        parameters, build time, output folder.

    Raises:
        RLGraphError: whatever a real run would raise while building (bad env kwargs, a memory
            that cannot fit, an action space the agent does not support, a bad checkpoint ...).
    """
    cfg = assembly.config
    tc = cfg.train
    start = time.perf_counter()
    assembly.check_loggers_out_dir(out_dir)  # e.g. a tensorboard folder that is a file: refused as a run would be
    envs = assembly.make_vector_env(tc.seed)
    try:
        envs.reset(seed=tc.seed)
        obs_space, act_space = envs.single_observation_space, envs.single_action_space
    finally:
        envs.close()
    eval_env = assembly.make_eval_env()
    try:
        eval_env.reset(seed=10_000 + tc.seed)
    finally:
        eval_env.close()
    agent = assembly.make_agent(obs_space, act_space, num_envs=cfg.env.num_envs)  # checks the memory fits
    memory_bytes = assembly.memory_bytes(obs_space, act_space)
    if resume_dir is not None:
        agent.load(resume_dir)
    total = time.perf_counter() - start
    report = agent.build_report
    variables = agent.variables()
    n_all = sum(int(np.prod(np.shape(v))) for v in variables.values())
    n_trainable = sum(int(np.prod(np.shape(v))) for v in variables.values() if assembly.backend.is_trainable(v))

    memory = getattr(cfg.agent, "memory", None)
    if memory is not None:
        available = available_memory_bytes()
        memory_line = (
            f"{memory.type}, capacity {memory.capacity}: about {format_bytes(memory_bytes or 0)} when full"
            + (f" ({format_bytes(available)} available)" if available is not None else "")
        )
    else:
        memory_line = "none (on-policy rollouts)"
    out = Path(out_dir)
    state = "exists" if out.exists() else "would be created"
    params = f"{n_trainable} trainable, {n_all} in all variables (with target networks and statistics)"
    lines = [
        "rlgraph: dry run: the config is valid and everything below was built; nothing was trained or written.",
        f"  agent:       {cfg.agent.type} ({type(agent).__name__})",
        f"  env:         {cfg.env.id} x {cfg.env.num_envs} ({cfg.env.vectorization}), kwargs {cfg.env.kwargs or '{}'}",
        f"  obs space:   {_space_text(obs_space)}",
        f"  action space: {_space_text(act_space)}",
        f"  backend:     {assembly.backend.describe()}",
        f"  executor:    {tc.executor} ({assembly.executor_class.__name__})"
        + (f", settings {settings}" if (settings := _executor_settings(cfg)) else ""),
        f"  memory:      {memory_line}",
        f"  parameters:  {params}",
        f"  build:       agent graph {report.build_seconds * 1000:.0f} ms; envs + agent {total:.2f} s"
        if report is not None
        else f"  build:       envs + agent {total:.2f} s",
        f"  budget:      {tc.total_timesteps} env steps, evaluation every {tc.eval_interval} "
        f"({tc.eval_episodes} episodes), seed {tc.seed}",
        f"  output:      {out} ({state}; not written in a dry run)",
    ]
    if resume_dir is not None:
        lines.append(f"  resume:      {resume_dir} (loaded into the agent)")
    note = getattr(assembly.executor_class, "plan_note", None)
    text = note(cfg) if callable(note) else None
    if text:
        lines.append(f"  processes:   {text}")
    return "\n".join(lines)


def _executor_settings(cfg) -> dict:
    """The executor's settings as a dict (empty for an executor without settings)."""
    settings = getattr(cfg, "executor", None)
    return settings.model_dump(mode="json") if settings is not None else {}
