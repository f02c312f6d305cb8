"""The Python facade: ``make`` an algorithm, ``learn``, ``predict``, ``evaluate``, ``save``, ``load``.

::

    import rlgraph_core as rl

    algo = rl.make("ppo", env="CartPole-v1", backend="torch", mode="static")
    algo.learn(total_timesteps=50_000)
    action = algo.predict(obs)              # one observation or a batch
    algo.save("ppo_cartpole")
    algo = rl.load("ppo_cartpole")

An :class:`Algorithm` holds a validated run config (:attr:`Algorithm.config`) and the agent built
from it. :meth:`Algorithm.learn` runs the config's executor in this process through
:func:`rlgraph_core.training.run_training`, the function ``rlgraph train`` uses, so a notebook and
a terminal get the same evaluation, checkpoints, output-folder lock and resume. It writes nothing
unless an output folder is given (``out=``); repeated calls train on, counters carried over (as
in Stable-Baselines3 with ``reset_num_timesteps=False``). What :func:`make`'s arguments become before
validation (the raw config, an env object's factory) is made in ``rlgraph_core.facade_config``.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from rlgraph_core.assemble import assemble
from rlgraph_core.callbacks import make_callbacks
from rlgraph_core.checkpoint import read_attachment, read_meta, save_checkpoint
from rlgraph_core.config.run import validate_config
from rlgraph_core.errors import ConfigError
from rlgraph_core.evaluation import agent_policy, evaluate_policy
from rlgraph_core.execution import env_resume
from rlgraph_core.execution.out_dir import check_out_dir
from rlgraph_core.facade_config import facade_raw_config
from rlgraph_core.execution.run_state import RunState
from rlgraph_core.execution.run_dir import PYTHON_TERMS
from rlgraph_core.plugins import get_plugin_manager
from rlgraph_core.spaces import from_gym
from rlgraph_core.training import run_training
from rlgraph_core.envs import check_stored_env_id

__all__ = ["Algorithm", "load", "make"]


def make(
    algo: Any,
    env: Any = None,
    *,
    backend: str | None = None,
    mode: str | None = None,
    executor: str | dict | None = None,
    device: str | None = None,
    seed: int | None = None,
    dataset: str | Path | None = None,
    out: str | Path | None = None,
    verbose: int = 0,
    plugin_manager=None,
    **overrides: Any,
) -> "Algorithm":
    """Make an algorithm ready to ``learn``.

    Args:
        algo: an agent name (``"ppo"``: its config model's defaults), a shipped config name
            (``"ppo_cartpole"``), a YAML/JSON config file, a config dict or a validated RunConfig.
        env: a gymnasium id (``"CartPole-v1"``), a ``gymnasium.Env`` (copied: one copy per vector
            env and one for evaluation), a function that makes one, or an env section dict.
            Default: the config's.
        backend, mode, device, seed: ``train.backend``, ``train.mode`` (``eager``/``static``),
            ``train.device``, ``train.seed``.
        executor: ``train.executor`` by name, or the ``executor:`` section as a dict (with
            ``type``: the executor's name too, e.g. ``{"type": "ray_sync", "num_workers": 4}``).
        dataset: learn from this Minari dataset instead of env steps (a dataset folder, e.g. one
            ``train.record_dataset`` wrote, or a dataset id in the local Minari root): the
            ``offline`` executor with ``executor.dataset``; ``env`` (default: the env the dataset
            was recorded on) is then only evaluated on, and :meth:`Algorithm.learn` counts updates.
        out: the default output folder of :meth:`Algorithm.learn` (None: nothing is written).
        verbose: 0 prints nothing; 1 prints the console logger's metric lines.
        plugin_manager: the plugin manager to resolve names with (default: the process's).
        **overrides: a section (``train={"eval_interval": 1000}``, ``multi_agent={...}``), a train or env field
            (``total_timesteps=...``, ``num_envs=8``), or else an agent field (``learning_rate=3e-4``).

    Raises:
        ConfigError: a name, field or value that is not valid (one paragraph naming it).
    """

    pm = plugin_manager or get_plugin_manager()
    named = {"backend": backend, "mode": mode, "device": device, "seed": seed}
    raw, factory, source = facade_raw_config(algo, env, named, executor, dataset, overrides, pm)
    algo = Algorithm(validate_config(raw, pm), env_factory=factory, out=out, verbose=verbose, plugin_manager=pm)
    if source is not None:
        source.check_spaces(algo.observation_space, algo.action_space, f"the environment '{algo.config.env.id}'")
    return algo


def _short(value, limit: int = 100) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + " ..."


def _predict_state(state: Any, episode_start: Any, initial: dict, n: int) -> tuple[dict, np.ndarray]:
    """``predict``'s ``(state, episode_start)`` checked against the policy's ``initial`` state of
    ``n`` envs; a missing state is the initial one (every episode starts), a missing
    ``episode_start`` is all False."""
    if state is None:
        return initial, np.ones(n, bool)
    shapes = {k: v.shape for k, v in initial.items()}
    try:
        given = {k: np.asarray(state[k], np.float32) for k in initial}
    except (KeyError, TypeError, IndexError, ValueError):
        given = None
    if given is None or set(state) != set(initial) or any(given[k].shape != shapes[k] for k in initial):
        raise ConfigError(
            f"predict(obs, state): the state must be what the previous predict returned for the same number "
            f"of observations, a dict of float arrays with the shapes {shapes}; got {_short(state)[:80]}. "
            f"Pass state=None to start new episodes."
        )
    starts = np.zeros(n, bool) if episode_start is None else np.asarray(episode_start, bool).reshape(-1)
    if starts.shape != (n,):
        raise ConfigError(
            f"predict(obs, state, episode_start): episode_start must hold one bool per observation ({n}); got "
            f"{starts.shape[0]} values."
        )
    return given, starts


def _check_predict_obs(flat: dict, leaves: dict, gym_space) -> bool:
    """Whether ``flat`` (one array per leaf of the observation space) is one observation (else a
    batch); a ConfigError naming the leaf for strings, a wrong shape, or NaN/infinite values."""
    single = None
    for name, leaf in leaves.items():
        what = f"observation[{name!r}]" if name else "the observation"
        value = flat[name] if isinstance(flat[name], np.ndarray) else np.asarray(flat[name])
        shape = tuple(leaf.shape or ())
        if value.dtype.kind not in "biuf":
            raise ConfigError(
                f"predict(obs): {what} holds {value.dtype} values ({_short(value.tolist() if value.size < 8 else value, 60)}),"
                f" not numbers; the env's observation space is {_short(gym_space)}."
            )
        if value.shape == shape:
            one = True
        elif value.ndim == len(shape) + 1 and value.shape[1:] == shape:
            one = False
        else:
            raise ConfigError(
                f"predict(obs): {what} has shape {value.shape}, but the policy takes {shape} (one observation) or "
                f"(batch, {', '.join(map(str, shape))}{',' if len(shape) == 1 else ''}) (a batch); the env's "
                f"observation space is {_short(gym_space)}."
            )
        if single is not None and one != single:
            raise ConfigError(f"predict(obs): {what} is batched differently from the other parts of the observation.")
        single = one
        if value.dtype.kind == "f" and not np.isfinite(value).all():
            raise ConfigError(
                f"predict(obs): {what} holds NaN or infinite values; the policy's action for them would be "
                f"meaningless. Pass finite observations (check the env or the preprocessing that produced them)."
            )
    return bool(single)


def _map_leaves(fn, value):
    if isinstance(value, dict):
        return {k: _map_leaves(fn, v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_map_leaves(fn, v) for v in value)
    return fn(value)


class Algorithm:
    """A configured agent with a Stable-Baselines3-like API; made by :func:`make` or :func:`load`.

    Attributes:
        config: the validated run config (what ``rlgraph config`` would print for it).
        agent: the built :class:`~rlgraph_core.agents.base.Agent` (its actor and learner roles).
        last_summary: the summary of the last :meth:`learn` (``ended_by``, ``timesteps`` ...).
    """

    def __init__(
        self, config, *, env_factory=None, out: str | Path | None = None, verbose: int = 0, plugin_manager=None
    ):

        self._pm = plugin_manager or get_plugin_manager()
        self._assembly = dataclasses.replace(assemble(config, self._pm), env_factory=env_factory)
        self.config = self._assembly.config
        self._env_factory = env_factory
        self.out = None if out is None else Path(out)
        #: 0: quiet (the console logger is left out of learn's loggers); 1: metric lines
        self.verbose = verbose
        self._run_dir: Path | None = None  # the folder this object's runs write (a later learn continues it)
        self._state = RunState()
        self.last_summary: dict | None = None
        obs_space, act_space = self._assembly.agent_spaces()
        self.observation_space = obs_space
        self.action_space = act_space

        #: the observation space as rlgraph's space, converted once (predict is called per step)
        self._obs_space = from_gym(obs_space)
        self.agent = self._assembly.make_agent(obs_space, act_space, num_envs=self.config.env.num_envs)

    # ------------------------------------------------------------------ counters
    @property
    def timesteps(self) -> int:
        """Env steps trained so far (carried over by every :meth:`learn` and by :func:`load`)."""
        return self.agent.timesteps

    @property
    def updates(self) -> int:
        """Gradient updates made so far."""
        return self.agent.updates

    def __repr__(self) -> str:
        tc = self.config.train
        return (
            f"<Algorithm {self.config.agent.type} on {self.config.env.id}, {tc.backend} {tc.mode}, executor "
            f"{tc.executor}, {self.timesteps} steps trained>"
        )

    # ------------------------------------------------------------------ training
    def learn(
        self,
        total_timesteps: int | None = None,
        callbacks: Iterable[Any] | Any = None,
        progress_bar: bool = False,
        *,
        out: str | Path | None = None,
        overwrite: bool = False,
        updates: int | None = None,
    ) -> "Algorithm":
        """Train ``total_timesteps`` more env steps; return ``self``.

        Args:
            total_timesteps: env steps to train in this call (counted on from :attr:`timesteps`).
                An offline run (``make(..., dataset=...)``) steps no env: its step counter
                counts gradient updates, so this is the number of updates (``updates=`` says so).
            updates: for offline runs, another name of ``total_timesteps`` (give one of them).
            callbacks: a :class:`~rlgraph_core.callbacks.Callback` or a list of them (after those
                the config's ``train.callbacks`` names); one returning False stops the run.
            progress_bar: show a progress bar.
            out: the output folder (default: ``make``'s ``out``; None writes nothing): metrics,
                plot, checkpoints, summary, as ``rlgraph train --out``. A folder that holds another
                run is refused, as by the CLI, unless ``overwrite``; a later ``learn`` of this
                object into the same folder continues its run.
            overwrite: replace a previous run in ``out``.

        The run ends at the budget, at ``train.target_return`` (once; a later ``learn`` trains on),
        when a callback stops it or on Ctrl-C; :attr:`last_summary` says which (``ended_by``).

        Raises:
            RunDirError: ``out`` is in use or holds another run.
            RunFailed: the environment, the agent or a plugin raised (after a final checkpoint
                where ``out`` is given); ``__cause__`` is the original error.
        """

        if updates is not None:
            if total_timesteps is not None:
                raise ConfigError(
                    f"learn(total_timesteps={total_timesteps!r}, updates={updates!r}): give one of them (an offline "
                    f"run counts updates as its steps)."
                )
            total_timesteps = updates
        if (
            isinstance(total_timesteps, bool)
            or not isinstance(total_timesteps, (int, np.integer))
            or total_timesteps < 1
        ):
            raise ConfigError(f"learn(total_timesteps={total_timesteps!r}): pass a whole number of env steps >= 1.")
        if callbacks is None:
            callbacks = []
        elif not isinstance(callbacks, (list, tuple)):
            callbacks = [callbacks]
        out = Path(out) if out is not None else self.out
        loggers = [n for n in self.config.train.loggers if self.verbose or n != "console"]
        train = self.config.train.model_copy(
            update={
                "total_timesteps": self.agent.timesteps + int(total_timesteps),
                "progress_bar": bool(progress_bar),
                "loggers": loggers,
            }
        )
        config = self.config.model_copy(update={"train": train})
        assembly = dataclasses.replace(
            self._assembly,
            config=config,
            logger_classes=[self._pm.get("loggers", n, field="train.loggers") for n in loggers],
            callbacks=[*make_callbacks(self._pm, train.callbacks), *callbacks],
        )
        continuing = out is not None and self._run_dir is not None and self._run_dir.resolve() == out.resolve()
        if getattr(assembly.executor_class, "accepts_agent", False):
            summary = run_training(
                config,
                out,
                overwrite=overwrite,
                continuing=continuing,
                assembly=assembly,
                executor_kwargs={"agent": self.agent, "run_state": self._state},
                terms=PYTHON_TERMS,
            )
        else:
            summary = self._learn_through_checkpoint(config, assembly, out, overwrite, continuing)
        if out is not None:
            self._run_dir = out
        if summary.get("ended_by") == "target_return":
            self._state.target_passed = True  # asking for more steps means: train on
        self.last_summary = summary
        return self

    def _learn_through_checkpoint(self, config, assembly, out, overwrite, continuing) -> dict:
        """Run an executor that builds its own learner (a distributed one): hand it this agent
        as a checkpoint to resume from, and load the weights and counters it ends with."""

        with tempfile.TemporaryDirectory(prefix="rlgraph-facade-") as tmp:
            resume = None
            if self.agent.timesteps > 0:
                resume = Path(tmp) / "start"
                self.agent.save(str(resume), {"config": config.to_dict(), "run_state": self._state.to_json()})
            summary = run_training(
                config,
                out if out is not None else Path(tmp) / "run",
                resume=resume,
                overwrite=overwrite,
                continuing=continuing,
                assembly=assembly,
                terms=PYTHON_TERMS,
            )
            meta = self.agent.load(summary["checkpoint"], for_training=False)
            counters = meta.get("counters", {})
            self.agent.timesteps = int(counters.get("timesteps", summary["timesteps"]))
            self.agent.updates = int(counters.get("updates", summary["updates"]))
            if out is None:
                summary = {**summary, "checkpoint": None}
        self._state.best_eval_return = summary.get("best_eval_return")
        self._state.last_eval_return = summary.get("eval_return_mean")
        self._state.wall_time = float(summary.get("wall_time") or 0.0)
        return summary

    # ------------------------------------------------------------------ using the policy
    def predict(self, obs: Any, state: Any = None, episode_start: Any = None, deterministic: bool = True) -> Any:
        """The action for one observation, or actions for a batch (leading batch dimension).

        ``obs`` is what the env returns (a Dict observation as a dict of arrays). With
        ``deterministic`` the greedy action (the mode or mean of the policy), else a sampled one
        with the agent's exploration.

        A recurrent policy (``network: {type: lstm | gru}``) returns ``(action, state)``, in the
        shape of sb3-contrib's ``RecurrentPPO.predict``: pass the returned ``state`` back with the
        next observation, and ``episode_start`` (bool, one per observation) True where an episode
        starts (there the state is reset). ``state=None`` starts every episode afresh. The state is
        always batched (``{key: [B, ...]}``, ``B = 1`` for one observation). A feed-forward policy
        carries no state and returns the action alone, as it always has.
        """
        space = self._obs_space
        leaves = space.flatten()
        key = next(iter(leaves))
        try:
            flat = space.flatten_value(obs) if len(leaves) > 1 or key else {"": np.asarray(obs)}
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ConfigError(
                f"predict(obs): the observation does not have the structure of the env's observation space "
                f"{_short(self.observation_space)} ({type(exc).__name__}: {str(exc)[:80]}); pass what the env returns."
            ) from None
        single = _check_predict_obs(flat, leaves, self.observation_space)
        if single:
            obs = _map_leaves(lambda v: np.asarray(v)[None], obs)
        n = 1 if single else len(next(iter(flat.values())))
        initial = self.agent.initial_state(n)
        if initial is None:
            actions = self.agent.act(obs, explore=not deterministic)
            return _map_leaves(lambda a: np.asarray(a)[0], actions) if single else actions
        state, starts = _predict_state(state, episode_start, initial, n)
        stateful: Any = self.agent  # Agent.act's stateful form, documented there, is not in its signature
        actions, state = stateful.act(obs, not deterministic, state=state, episode_start=starts)
        return (_map_leaves(lambda a: np.asarray(a)[0], actions) if single else actions), state

    def make_eval_env(self, render_mode: str | None = None):
        """A single environment for evaluation, made and wrapped like the training envs."""
        return self._assembly.make_eval_env(render_mode=render_mode)

    def evaluate(self, episodes: int = 10, seed: int | None = None, render_frames=None) -> dict:
        """Play ``episodes`` greedy episodes on a fresh env; ``eval_return_mean``, ``_std``, ``eval_length_mean``.

        Episode ``i`` is reset with seed ``seed + i`` (default ``seed``: 10000 + ``train.seed``, as
        in training's evaluations). ``render_frames``: a list that gets an rgb frame per step, or
        a function called with each frame (e.g. a video writer's ``add``).
        """

        if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 1:
            raise ConfigError(f"evaluate(episodes={episodes!r}): pass a whole number of episodes >= 1.")
        seed = 10_000 + self.config.train.seed if seed is None else seed
        env = self._assembly.make_eval_env(render_mode="rgb_array" if render_frames is not None else None)
        try:
            if render_frames is None:  # the agent's own evaluation (a multi-agent run's: per policy, outcomes)
                result = self.agent.evaluate(env, int(episodes), seed)
            else:
                result = evaluate_policy(agent_policy(self.agent), env, int(episodes), seed, render_frames)
        finally:
            env.close()
        if result is None:  # evaluate_policy returns None only when its stop() says so; none was given
            raise RuntimeError("evaluate_policy stopped an evaluation that had no stop condition")
        return result

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> Path:
        """Write a checkpoint (weights, optimizer state, replay, counters, config) to ``path``.

        ``rlgraph evaluate PATH``, ``rlgraph train --resume PATH`` and :func:`load` read it.
        """

        path = check_out_dir(path, "save(path)")  # read-only, virtual (/proc) or invalid: one paragraph
        try:
            extra = {"config": self.config.to_dict(), "run_state": self._state.to_json()}
            carried = self._state.env_runner  # the episodes in progress, so a loaded run continues them
            if carried is None:
                self.agent.save(str(path), extra)
            else:
                save_checkpoint(self.agent, str(path), extra, {env_resume.ATTACHMENT: carried})
        except OSError as exc:  # what the probe could not foresee (e.g. a file system that refuses links)
            raise ConfigError(
                f"save(path) '{path}': the checkpoint could not be written ({exc.strerror or exc}); nothing of an "
                f"earlier checkpoint there was replaced. Save to a writable folder."
            ) from None
        return path

    @classmethod
    def load(cls, path: str | Path, env: Any = None, **kwargs: Any) -> "Algorithm":
        """See :func:`load`."""
        return load(path, env, **kwargs)


def load(
    path: str | Path,
    env: Any = None,
    *,
    backend: str | None = None,
    mode: str | None = None,
    device: str | None = None,
    out: str | Path | None = None,
    verbose: int = 0,
    plugin_manager=None,
    **overrides: Any,
) -> Algorithm:
    """An :class:`Algorithm` from a checkpoint (:meth:`Algorithm.save`, or any ``rlgraph train`` checkpoint).

    Weights, optimizer state, replay memory, counters and the best evaluation are loaded, so
    :meth:`Algorithm.learn` trains on. ``env`` as in :func:`make` (default: the stored config's
    ``env.id``; pass the env again for one made from an instance or factory). ``backend``/``mode``
    load the weights into another backend or mode; ``overrides`` as in :func:`make`.
    ``executor="local"`` (or another executor) runs the checkpoint under that executor, without the
    stored ``executor:`` section: an offline run's checkpoint fine-tuned online on its env.
    """

    meta, stored = read_meta(path)
    if env is None:  # the checkpoint names its env: its module never comes from the current folder
        stored_env = stored.get("env")
        consent = "pass it yourself: rlgraph_core.load(path, env='module:EnvId')"
        stored_id = stored_env.get("id") if isinstance(stored_env, dict) else None
        check_stored_env_id(stored_id, f"the checkpoint '{path}'", consent)
    executor = overrides.get("executor")
    executor = (overrides.get("train") or {}).get("executor") if not isinstance(executor, str) else executor
    stored_train = stored.get("train")
    stored_executor = stored_train.get("executor", "local") if isinstance(stored_train, dict) else "local"
    if isinstance(executor, str) and executor != stored_executor:
        # Another executor (e.g. an offline run's checkpoint fine-tuned online: executor="local"):
        # the stored executor section held the old executor's settings, so it does not carry over.
        stored = {key: value for key, value in stored.items() if key != "executor"}
    algo = make(
        stored,
        env,
        backend=backend,
        mode=mode,
        device=device,
        out=out,
        verbose=verbose,
        plugin_manager=plugin_manager,
        **overrides,
    )
    found = read_attachment(path, env_resume.ATTACHMENT)
    carried = None
    if found is not None:  # checked before the agent loads: a refused one leaves nothing half-loaded
        info, arrays = found
        carried = env_resume.check_snapshot(
            info, arrays, algo.observation_space, algo.action_space, algo.config.env.num_envs, str(path), algo.agent
        )
    algo._state = RunState.from_meta(algo.agent.load(str(path)))
    algo._state.env_runner = carried
    return algo
