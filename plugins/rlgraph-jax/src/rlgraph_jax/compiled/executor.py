"""The ``compiled`` executor: gymnax env + PPO or DQN acting and learning as one ``jax.jit`` program.

The run is any run (:class:`~rlgraph_core.execution.recorder.RunRecorder`: metric rows, greedy
evaluation on the gymnasium face of the same gymnax env, checkpoints in the neutral npz, resume,
stop conditions, summary); only the way experience is gathered differs. Between two recorder
steps one compiled call (a *chunk*, ``executor.chunk_timesteps`` env steps) runs rollouts and
updates without leaving the program; the agent's cells then hold the chunk's final weights and
optimizer state, so evaluation, checkpoints and ``rlgraph evaluate`` on torch see a normal agent.

A resumed run continues from the checkpoint's weights, optimizer state and counters with fresh
episodes (as the local executor does; DQN's replay ring is copied into the agent's memory between
chunks, so its checkpoint holds the replay and a resumed run samples it again). ``executor.num_seeds = K`` vmaps the program over K
agents with seeds ``train.seed + k``; each one computes what a run with that seed alone computes.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
import jax
import jax.numpy as jnp
import numpy as np

from rlgraph_core.errors import ConfigError
from rlgraph_core.execution.base import Executor
from rlgraph_core.execution.recorder import RunRecorder
from rlgraph_jax.compiled.dqn import CompiledDQN
from rlgraph_jax.compiled.ppo import CompiledPPO
from rlgraph_jax.compiled.program import CompiledProgram
from rlgraph_jax.gymnax_envs import pure_env_of
from rlgraph_jax.optim import raise_non_finite


def _stack(trees: list):
    """Stack equal pytrees leaf by leaf along a new axis 0."""
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *trees)


def _index(tree, k: int):
    """Leaf ``[k]`` of every leaf."""
    return jax.tree_util.tree_map(lambda x: x[k], tree)


def use_compilation_cache(directory: str | None) -> None:
    """Point JAX's persistent compilation cache at ``directory`` (None: leave JAX's setting alone).

    Process-wide, as JAX's cache is: every program compiled afterwards, also the agent's own small
    ones (hence no minimum compile time), is stored there and loaded by a later run with the same
    shapes instead of compiled again.
    """
    if directory is None:
        return
    from jax.experimental.compilation_cache import compilation_cache

    path = Path(directory).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    if jax.config.jax_compilation_cache_dir != str(path):
        jax.config.update("jax_compilation_cache_dir", str(path))
        # JAX decides once per process whether it uses the cache (at its first compile): ask again
        compilation_cache.reset_cache()
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 1)


#: the compiled program of each algorithm (``agent.type``)
PROGRAMS = {"ppo": CompiledPPO, "dqn": CompiledDQN}


class CompiledExecutor(Executor):
    """Trains PPO or DQN on a gymnax env with env steps, acting and updates compiled into one program.

    See the module docstring; the settings are :class:`~rlgraph_jax.compiled.settings.CompiledSettings`.
    """

    def run(self) -> dict:
        cfg, parts = self.config, self.assembly
        settings = cfg.executor
        use_compilation_cache(settings.compilation_cache_dir)
        eval_env = parts.make_eval_env()
        try:
            env = pure_env_of(eval_env)
            if env is None:
                raise ConfigError(
                    f"'train.executor' = 'compiled' needs a gymnax env; env.id '{cfg.env.id}' made "
                    f"{type(eval_env.unwrapped).__name__}. Use env.id 'rlgraph_jax.gymnax_envs:GymnaxEnv'."
                )
            if settings.num_seeds > 1 and self.resume_dir is not None:
                raise ConfigError(
                    "'executor.num_seeds' > 1 cannot resume: a checkpoint holds one agent. Resume each seed's "
                    "checkpoint (seeds/seed_<seed>) as a run of its own with num_seeds 1."
                )
            agent = parts.make_agent(eval_env.observation_space, eval_env.action_space, num_envs=cfg.env.num_envs)
            program = PROGRAMS[cfg.agent.type](agent, env, cfg.env.num_envs)
        except BaseException:
            eval_env.close()
            raise
        recorder = RunRecorder(
            cfg, self.out_dir, assembly=parts, agent=agent, resume_dir=self.resume_dir, eval_env=eval_env
        )
        loop = _ChunkLoop(program, parts, settings, cfg, eval_env)
        recorder.summary_extra = loop.summary
        return recorder.run(loop, run_info={"compiled": True, "num_seeds": settings.num_seeds})


class _ChunkLoop:
    """Calls the compiled chunk until the recorder says the run is done (the recorder's ``loop``)."""

    def __init__(self, program: CompiledProgram, parts, settings, cfg, eval_env):
        self.program = program
        self.parts = parts
        self.cfg = cfg
        self.eval_env = eval_env
        self.num_seeds = settings.num_seeds
        tc = cfg.train
        chunk = settings.chunk_timesteps or min(tc.eval_interval, tc.checkpoint_interval or tc.eval_interval)
        self.chunk_iterations = max(1, math.ceil(chunk / program.steps_per_iteration))
        self._compiled: dict[int, object] = {}
        self.compile_seconds = 0.0
        self.run_seconds = 0.0
        self.env_steps = 0
        self.seed_returns: list[list[float]] = [[] for _ in range(self.num_seeds)]
        self.values = None

    # ------------------------------------------------------------------ setup
    def _seed_values(self) -> list:
        """The cell values of every seed's fresh agent, stacked (K > 1), else the agent's own."""
        agent = self.program.agent
        cells = self.program.cells
        if self.num_seeds == 1:
            return [c.value for c in cells]
        own = agent.get_weights()
        per_seed = []
        for k in range(self.num_seeds):
            if k == 0:
                weights = own
            else:
                other = self.parts.make_agent(
                    self.eval_env.observation_space,
                    self.eval_env.action_space,
                    num_envs=self.cfg.env.num_envs,
                    backend=self.parts.backend_factory(),
                    seed=self.cfg.train.seed + k,
                )
                weights = other.get_weights()
            agent.set_weights(weights)
            per_seed.append([c.value for c in cells])
        agent.set_weights(own)
        return _stack(per_seed)

    def _function(self, iterations: int, inputs: tuple):
        """The jitted chunk of ``iterations`` iterations, compiled ahead (its compile time counted)."""
        fn = self._compiled.get(iterations)
        if fn is None:
            chunk = self.program.chunk
            if self.num_seeds > 1:
                chunk = jax.vmap(chunk, in_axes=(0, 0, None))
            start = time.perf_counter()
            fn = jax.jit(chunk).lower(self.values, self.carry, inputs).compile()
            self.compile_seconds += time.perf_counter() - start
            self._compiled[iterations] = fn
        return fn

    # ------------------------------------------------------------------ the run
    def __call__(self, recorder: RunRecorder, stop) -> None:
        program = self.program
        seed0 = self.cfg.train.seed + recorder.timesteps
        self.values = self._seed_values()
        if self.num_seeds > 1:
            self.carry = jax.vmap(program.init_carry)(jnp.arange(self.num_seeds) + seed0)
        else:
            self.carry = program.resume_carry(program.init_carry(seed0))
        total = self.cfg.train.total_timesteps
        while not recorder.done(stop):
            left = math.ceil((total - recorder.timesteps) / program.steps_per_iteration)
            iterations = min(self.chunk_iterations, max(1, left))
            self._chunk(recorder, iterations)
            recorder.step()
        if self.num_seeds > 1 and recorder.out_dir is not None:
            self.save_seeds(recorder)

    def _chunk(self, recorder: RunRecorder, iterations: int) -> None:
        program = self.program
        plan = program.plan(recorder.timesteps, iterations)
        inputs = tuple(jnp.asarray(x) for x in plan.inputs)
        fn = self._function(iterations, inputs)
        program.backend.reset_loop_guard()
        if self.num_seeds > 1:  # the guard is one cell of every seed's values
            guard_at = program.cells.index(program.backend.loop_guard)
            self.values[guard_at] = jnp.broadcast_to(program.backend.loop_guard.value, self.values[guard_at].shape)
        else:
            self.values = [c.value for c in program.cells]
        start = time.perf_counter()
        self.values, self.carry, out = fn(self.values, self.carry, inputs)
        done, rets, lens = (np.asarray(x) for x in (out.done, out.returns, out.lengths))
        losses = np.asarray(out.losses)
        self.run_seconds += time.perf_counter() - start
        first = self.values if self.num_seeds == 1 else _index(self.values, 0)
        for cell, value in zip(program.cells, first):
            cell.value = value
        guard = np.asarray(program.backend.loop_guard.value if self.num_seeds == 1 else self.values[guard_at])
        guard = guard.reshape(-1, 3)
        if (guard[:, 0] < 0.5).any():
            raise_non_finite(guard[int((guard[:, 0] < 0.5).argmax()), 1:])
        if self.num_seeds == 1:
            done, rets, lens, losses = done[None], rets[None], lens[None], losses[None]
        for k in range(self.num_seeds):
            self.seed_returns[k] = (self.seed_returns[k] + rets[k][done[k]].tolist())[-100:]
        steps = iterations * program.steps_per_iteration
        self.env_steps += steps * self.num_seeds
        recorder.add_env_steps(steps)
        program.finish(plan, losses[0])
        program.store_memory(self.carry if self.num_seeds == 1 else _index(self.carry, 0))
        # a boolean mask over [..., N] keeps row-major order: the episodes as they ended
        recorder.add_episodes(rets[0][done[0]], lens[0][done[0]])

    def save_seeds(self, recorder: RunRecorder) -> None:
        """Write every seed's agent to ``<run folder>/seeds/seed_<seed>`` (the agent holds seed 0 again after)."""
        program = self.program
        for k in range(self.num_seeds):
            for cell, value in zip(program.cells, _index(self.values, k)):
                cell.value = value
            program.store_memory(_index(self.carry, k))
            program.agent.save(
                recorder.out_dir / "seeds" / f"seed_{self.cfg.train.seed + k}", recorder.checkpoint_extra()
            )
        for cell, value in zip(program.cells, _index(self.values, 0)):
            cell.value = value
        program.store_memory(_index(self.carry, 0))

    def summary(self) -> dict:
        """What ``summary.json`` adds: compile and run seconds, env steps/s inside the program, per-seed returns."""
        steps_per_s = self.env_steps / self.run_seconds if self.run_seconds else None
        return {
            "compile_seconds": round(self.compile_seconds, 3),
            "compiled_run_seconds": round(self.run_seconds, 3),
            "compiled_env_steps_per_s": None if steps_per_s is None else round(steps_per_s, 1),
            "num_seeds": self.num_seeds,
            "seed_episode_return_mean": [float(np.mean(r)) if r else None for r in self.seed_returns],
        }
