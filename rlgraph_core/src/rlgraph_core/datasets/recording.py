"""Recording what a run collects as a Minari dataset (``train.record_dataset: PATH``).

:class:`DatasetWriter` takes the env runner's vector steps (:class:`~rlgraph_core.execution.env_runner.Step`:
observation, action, reward, true next observation, terminated, truncated for every env), cuts
them into episodes per env, and appends finished episodes to a Minari dataset in ``PATH`` (HDF5,
frames stored losslessly) every few thousand steps, so a long run never holds its whole dataset in
memory and a run that ends early leaves the episodes written so far. Episodes still running when
the run ends are written as truncated at their last step.

The dataset records the observations and actions as the agent saw and chose them (after
``env.wrappers``) with those spaces, the env section (``rlgraph_env`` in its metadata, so an
offline run evaluates on the same wrapped env) and, for an env without wrappers, the gymnasium env
spec Minari's ``recover_environment`` uses. ``PATH`` must not hold a dataset already, unless the run
continues the one that recorded it (a resumed run, or the facade's repeated ``learn``): then the
episodes are appended, the spaces being the same. Nothing is written before the first episode ends.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from rlgraph_core.datasets.minari_format import DATA_FORMAT, ENV_KEY, data_folder, import_minari
from rlgraph_core.errors import ConfigError

__all__ = ["DatasetWriter"]

#: Steps of finished episodes buffered before they are appended to the file.
FLUSH_STEPS = 10_000


def _row(value: Any, i: int) -> Any:
    """Env ``i``'s entry of a batched value (a copy; per key for a Dict observation)."""
    if isinstance(value, dict):
        return {k: _row(v, i) for k, v in value.items()}
    return np.array(value[i], copy=True)


def _stack(rows: list) -> Any:
    if rows and isinstance(rows[0], dict):
        return {k: _stack([r[k] for r in rows]) for k in rows[0]}
    return np.stack(rows)


def dataset_id_for(path: Path) -> str:
    """A Minari dataset id from a folder name: ``name-vN`` as it is, else ``name-v0`` (Minari
    ids carry a version); characters Minari does not allow become ``_``."""
    name = re.sub(r"[^-_\w]", "_", path.resolve().name) or "rlgraph"
    return name if re.fullmatch(r".+-v\d+", name) else f"{name}-v0"


class _Episode:
    """One env's running episode: T + 1 observations, T actions, rewards and flags."""

    def __init__(self, first_obs: Any):
        self.obs = [first_obs]
        self.actions: list = []
        self.rewards: list[float] = []
        self.terminated: list[bool] = []
        self.truncated: list[bool] = []

    def add(self, action, reward, next_obs, terminated: bool, truncated: bool) -> None:
        self.actions.append(action)
        self.rewards.append(float(reward))
        self.obs.append(next_obs)
        self.terminated.append(bool(terminated))
        self.truncated.append(bool(truncated))

    def buffer(self, episode_buffer_class, cut: bool = False):
        """The Minari ``EpisodeBuffer``; ``cut``: the run ended inside it (truncated at its last step)."""
        truncated = np.asarray(self.truncated, bool)
        if cut and not self.terminated[-1]:
            truncated[-1] = True
        return episode_buffer_class(
            observations=_stack(self.obs),
            actions=_stack(self.actions),
            rewards=np.asarray(self.rewards, np.float64),
            terminations=np.asarray(self.terminated, bool),
            truncations=truncated,
        )


class DatasetWriter:
    """Appends the episodes of a vector env's steps to a Minari dataset at ``path``.

    Args:
        path: the dataset folder (created; Minari's layout ``path/data``).
        observation_space / action_space: the gymnasium spaces of one env (as the agent sees it).
        env_section: the run's env section (stored so an offline run can rebuild the env).
        algorithm: what collected the data (the agent type), stored as Minari's ``algorithm_name``.
        append: the run continues the one that recorded ``path``: append to its dataset.
        field: how error messages name the setting (``train.record_dataset``).

    Raises:
        ConfigError: Minari is missing; ``path`` holds a dataset (and the run does not continue
            it) or other files; an appended dataset has other spaces. Checked here, before the
            run starts; nothing is written until the first episode ends.
    """

    def __init__(
        self,
        path: str | Path,
        observation_space,
        action_space,
        *,
        env_section: dict | None = None,
        algorithm: str | None = None,
        append: bool = False,
        field: str = "train.record_dataset",
    ):
        self._minari = import_minari()
        from minari.data_collector import EpisodeBuffer

        self._episode_buffer = EpisodeBuffer
        self.path = Path(path).expanduser()
        self.field = field
        self.observation_space = observation_space
        self.action_space = action_space
        self.env_section = dict(env_section or {})
        self.algorithm = algorithm
        self._storage = None
        existing = data_folder(self.path)
        if existing is not None:
            if not append:
                raise ConfigError(
                    f"'{field}' = '{self.path}' already holds a Minari dataset; a run never overwrites or mixes into "
                    f"one it did not record. Choose another path, or remove that dataset first (a resumed run "
                    f"appends to the dataset it recorded)."
                )
            from minari.dataset.minari_storage import MinariStorage

            try:
                storage = MinariStorage.read(existing.resolve())
            except Exception as exc:
                raise ConfigError(
                    f"'{field}' = '{self.path}': the dataset there cannot be read to append to it "
                    f"({type(exc).__name__}: {exc}); choose another path."
                ) from None
            if storage.observation_space != observation_space or storage.action_space != action_space:
                raise ConfigError(
                    f"'{field}' = '{self.path}' holds a dataset of other spaces (observations "
                    f"{storage.observation_space}, actions {storage.action_space}) than this run's "
                    f"({observation_space}, {action_space}); record into another path."
                )
            self._storage = storage
        elif self.path.exists() and (not self.path.is_dir() or any(self.path.iterdir())):
            raise ConfigError(
                f"'{field}' = '{self.path}' exists and is not an empty folder; a dataset is recorded into a new or "
                f"empty folder. Choose another path."
            )
        self._running: list[_Episode | None] = []
        self._finished: list = []
        self._finished_steps = 0
        #: episodes and steps written to the file by this writer
        self.episodes_written = 0
        self.steps_written = 0

    # ------------------------------------------------------------------ recording
    def add(self, step, first_column: int = 0) -> None:
        """Record one vector step (an :class:`~rlgraph_core.execution.env_runner.Step`).

        ``first_column``: the writer's column of the step's first env, where several vector envs
        (a distributed run's workers) feed one writer, each its own columns; an episode is
        continued only by steps of its column."""
        rewards = np.asarray(step.rewards)
        n = len(rewards)
        if len(self._running) < first_column + n:
            self._running += [None] * (first_column + n - len(self._running))
        done = np.logical_or(step.terminated, step.truncated)
        for i in range(n):
            column = first_column + i
            episode = self._running[column]
            if episode is None:
                episode = self._running[column] = _Episode(_row(step.obs, i))
            episode.add(
                _row(step.actions, i), rewards[i], _row(step.next_obs, i), step.terminated[i], step.truncated[i]
            )
            if done[i]:
                self._finished.append(episode.buffer(self._episode_buffer))
                self._finished_steps += len(episode.rewards)
                self._running[column] = None
        if self._finished_steps >= FLUSH_STEPS:
            self.flush()

    def cut(self, columns) -> None:
        """End the running episodes of ``columns`` as truncated at their last recorded step (their
        envs stopped mid-episode: a distributed run's worker was restarted with new envs)."""
        for column in columns:
            episode = self._running[column] if column < len(self._running) else None
            if episode is not None and episode.rewards:
                self._finished.append(episode.buffer(self._episode_buffer, cut=True))
                self._finished_steps += len(episode.rewards)
            if column < len(self._running):
                self._running[column] = None

    def flush(self) -> None:
        """Append the finished episodes to the dataset (creating it with the first)."""
        if not self._finished:
            return
        storage = self._storage or self._create()
        storage.update_episodes(self._finished)
        self.episodes_written += len(self._finished)
        self.steps_written += self._finished_steps
        self._finished, self._finished_steps = [], 0

    def close(self) -> None:
        """Write what is left: finished episodes, and running ones as truncated at their last step."""
        self.cut(range(len(self._running)))
        self._running = []
        self.flush()

    # ------------------------------------------------------------------ the dataset
    def _env_spec(self):
        """The gymnasium spec of the env (with its kwargs), where it alone reproduces the spaces."""
        import gymnasium as gym

        env_id = self.env_section.get("id")
        if not env_id or self.env_section.get("wrappers"):
            return None
        try:
            spec = gym.spec(env_id)
            kwargs = {**(spec.kwargs or {}), **(self.env_section.get("kwargs") or {})}
            spec = dataclasses.replace(spec, kwargs=kwargs) if kwargs != spec.kwargs else spec
            spec.to_json()  # refuses kwargs that are not JSON
            return spec
        except Exception:  # a class path or a process-local id: the rlgraph env section still names it
            return None

    def _create(self):
        from minari.dataset.minari_storage import MinariStorage

        self.path.mkdir(parents=True, exist_ok=True)
        storage = MinariStorage.new(
            # absolute: Minari's size count joins its folder with paths its glob already prefixed
            self.path.resolve() / "data",
            observation_space=self.observation_space,
            action_space=self.action_space,
            env_spec=self._env_spec(),
            data_format=DATA_FORMAT,
            jpeg_encoding=False,  # lossless frames: the data an agent learns from is what it saw
        )
        metadata = {
            "dataset_id": dataset_id_for(self.path),
            "minari_version": self._minari.__version__,
            "description": "recorded by rlgraph (train.record_dataset)",
            ENV_KEY: json.dumps(self.env_section),
        }
        if self.algorithm:
            metadata["algorithm_name"] = f"rlgraph {self.algorithm}"
        storage.update_metadata(metadata)
        self._storage = storage
        return storage
