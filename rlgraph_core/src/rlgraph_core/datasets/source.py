"""Reading a Minari dataset into a replay memory: the offline side of "where transitions come from".

A :class:`DatasetSource` is opened from a folder (Minari's layout: ``PATH/data/metadata.json``,
or the ``data`` folder itself) or from a dataset id found in the local Minari root
(``MINARI_DATASETS_PATH``, default ``~/.minari/datasets``). Nothing is ever downloaded. Opening
checks what can be checked before any work: that the dataset exists, that Minari can read its
metadata and its data file (a truncated HDF5 file fails here), and that it holds transitions.
:meth:`DatasetSource.check_spaces` compares its spaces with the environment's;
:meth:`DatasetSource.fill` streams the episodes, one at a time, into a uniform
:class:`~rlgraph_core.memories.ReplayMemory` of exactly the dataset's size, as the agent stores
transitions (its action encoding, its n-step folding), so only one copy is held (uint8 frames
once, by the memory's frame store).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from rlgraph_core.datasets.minari_format import ENV_KEY, data_folder, import_minari, minari_root
from rlgraph_core.errors import ConfigError
from rlgraph_core.memories import NStepAssembler, ReplayMemory

__all__ = ["DatasetSource", "FilledMemory"]


def _short(value: Any, limit: int = 120) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _rows(value: Any, start: int, stop: int) -> Any:
    """Rows ``start:stop`` of an episode's array, or of each array of a Dict observation."""
    if isinstance(value, dict):
        return {k: _rows(v, start, stop) for k, v in value.items()}
    return np.asarray(value)[start:stop]


def _length(value: Any) -> int:
    if isinstance(value, dict):
        return min(_length(v) for v in value.values())
    return len(value)


def _finite(value: Any) -> bool:
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    arr = np.asarray(value)
    return arr.dtype.kind != "f" or bool(np.isfinite(arr).all())


@dataclass
class FilledMemory:
    """A replay memory holding a whole dataset, and what went into it.

    Attributes:
        memory: the uniform replay memory (capacity = the dataset's steps).
        episodes: episodes read.
        transitions: records inserted (one per step, also with n-step folding).
        returns: the undiscounted return of every episode, in dataset order.
    """

    memory: ReplayMemory
    episodes: int = 0
    transitions: int = 0
    returns: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """Dataset statistics for a run's summary (``dataset_*`` keys)."""
        rets = np.asarray(self.returns, np.float64)
        return {
            "dataset_episodes": self.episodes,
            "dataset_transitions": self.transitions,
            "dataset_return_mean": float(rets.mean()) if rets.size else None,
            "dataset_return_max": float(rets.max()) if rets.size else None,
        }


class DatasetSource:
    """A Minari dataset, checked and ready to stream into a replay memory.

    Args:
        ref: a dataset folder, or a Minari dataset id in the local Minari root.
        field: how error messages name the setting that gave ``ref`` (``executor.dataset``).

    Raises:
        ConfigError: one paragraph: no dataset there, Minari missing, metadata or data file
            unreadable (truncated or corrupted), or no transitions.
    """

    def __init__(self, ref: str | Path, *, field: str = "executor.dataset"):
        self.ref = str(ref)
        self.field = field
        minari = import_minari()
        self.data_path = self._resolve(Path(self.ref).expanduser())
        try:
            self.dataset = minari.MinariDataset(self.data_path)
            self.total_episodes = int(self.dataset.total_episodes)
            self.total_steps = int(self.dataset.total_steps) if self.total_episodes else 0
            if self.total_episodes:
                # Opens the data file and reads the last episode's header: a truncated or
                # half-copied file fails here, before anything runs.
                list(self.dataset.storage.get_episode_metadata([self.total_episodes - 1]))
        except Exception as exc:  # Minari, h5py or pyarrow: whatever the file's damage raises
            raise ConfigError(
                f"'{self.field}' = '{_short(self.ref)}': the Minari dataset in '{self.data_path}' cannot be read "
                f"({type(exc).__name__}: {_short(exc, 200)}). Its files may be truncated or corrupted (an "
                f"interrupted copy or recording); copy or record it again."
            ) from None
        if self.total_episodes == 0 or self.total_steps == 0:
            raise ConfigError(
                f"'{self.field}' = '{_short(self.ref)}': the Minari dataset in '{self.data_path}' holds no "
                f"transitions ({self.total_episodes} episodes, {self.total_steps} steps); there is nothing to "
                f"learn from. Record one with a run's train.record_dataset: PATH (or Minari's DataCollector)."
            )
        #: the dataset's gymnasium spaces
        self.observation_space = self.dataset.observation_space
        self.action_space = self.dataset.action_space
        self.dataset_id = str(self.dataset.id)

    def _resolve(self, path: Path) -> Path:
        # absolute: Minari's size count joins its folder with paths its glob already prefixed
        found = data_folder(path)
        if found is not None:
            return found.resolve()
        root = minari_root()
        if not path.is_absolute() and len(path.parts) <= 3:
            found = data_folder(root / path)
            if found is not None:
                return found.resolve()
        raise ConfigError(
            f"'{self.field}' = '{_short(self.ref)}': no Minari dataset there. Give a dataset folder (one that "
            f"holds data/metadata.json, as train.record_dataset and Minari write them) or the id of a dataset in "
            f"the local Minari root '{root}' (MINARI_DATASETS_PATH). Datasets are never downloaded: record one "
            f"with train.record_dataset: PATH, or fetch it beforehand with 'minari download ID'."
        )

    # ------------------------------------------------------------------ what it was recorded on
    def env_section(self) -> dict[str, Any] | None:
        """The env section to evaluate on: the one an rlgraph recording stored (id, kwargs and
        wrappers), else ``{id, kwargs}`` of the dataset's gymnasium env spec, else None."""
        metadata = self.dataset.storage.metadata
        stored = metadata.get(ENV_KEY)
        if isinstance(stored, str):
            import json

            try:
                stored = json.loads(stored)
            except ValueError:
                stored = None
        if isinstance(stored, dict) and isinstance(stored.get("id"), str):
            return stored
        spec = self.dataset.env_spec
        if spec is not None and getattr(spec, "id", None):
            return {"id": spec.id, "kwargs": dict(spec.kwargs or {})}
        return None

    def check_spaces(self, observation_space, action_space, where: str) -> None:
        """Raise a ConfigError unless the dataset's spaces equal ``observation_space`` and
        ``action_space`` (gymnasium spaces of ``where``, e.g. "the environment 'CartPole-v1'")."""
        problems = []
        for what, ours, theirs in (
            ("observation", self.observation_space, observation_space),
            ("action", self.action_space, action_space),
        ):
            if ours != theirs:
                problems.append(f"its {what} space is {_short(ours)}, {where} has {_short(theirs)}")
        if problems:
            recorded = self.env_section()
            on = f" (it was recorded on env {_short(recorded)})" if recorded else ""
            raise ConfigError(
                f"'{self.field}' = '{_short(self.ref)}' does not fit {where}: {'; '.join(problems)}. Evaluate "
                f"on the environment the dataset was recorded on{on}, with the same env.wrappers, or "
                f"record a dataset on this one."
            )

    # ------------------------------------------------------------------ reading
    def episodes(self) -> Iterator[Any]:
        """The dataset's episodes (Minari ``EpisodeData``), read one at a time."""
        return iter(self.dataset.iterate_episodes())

    def fill(self, agent, *, seed: int | None = None, frames: str = "auto") -> FilledMemory:
        """Stream every episode into a new uniform replay memory, as ``agent`` stores transitions.

        ``agent`` is a replay agent (:class:`~rlgraph_core.agents.off_policy.OffPolicyAgent`):
        its ``stored_observations`` and ``stored_actions`` encode observations and actions and
        its ``n_step``/``gamma`` fold the steps (an episode's last step ends it: terminated as
        recorded, else truncated, which bootstraps). ``seed`` seeds the memory's sampling.

        Raises:
            ConfigError: an episode whose arrays disagree in length, or non-finite data.
        """
        n_step, gamma = int(agent.config.n_step), float(agent.config.gamma)
        out = FilledMemory(ReplayMemory(self.total_steps, seed=seed, frames=frames))
        assembler = NStepAssembler(1, n_step, gamma) if n_step > 1 else None
        try:
            for episode in self.episodes():
                self._insert(episode, agent, gamma, assembler, out)
        except ConfigError:
            raise
        except Exception as exc:
            raise ConfigError(
                f"'{self.field}' = '{_short(self.ref)}': reading episode {out.episodes} of the Minari dataset in "
                f"'{self.data_path}' failed ({type(exc).__name__}: {_short(exc, 200)}). Its data file may be "
                f"truncated or corrupted; copy or record it again."
            ) from None
        return out

    def _insert(self, episode, agent, gamma: float, assembler, out: FilledMemory) -> None:
        rewards = np.asarray(episode.rewards, np.float64)
        steps = len(rewards)
        terminated = np.asarray(episode.terminations, bool)
        if steps == 0:
            return
        if _length(episode.observations) != steps + 1 or len(episode.actions) != steps or len(terminated) != steps:
            raise ConfigError(
                f"'{self.field}' = '{_short(self.ref)}': episode {episode.id} has {steps} rewards, "
                f"{len(episode.actions)} actions and {_length(episode.observations)} observations; a Minari episode "
                f"of T steps has T actions and rewards and T + 1 observations. The dataset is damaged."
            )
        if not (np.isfinite(rewards).all() and _finite(episode.observations)):
            raise ConfigError(
                f"'{self.field}' = '{_short(self.ref)}': episode {episode.id} holds NaN or infinite rewards or "
                f"observations; they would poison every weight they reach. Clean or re-record the dataset."
            )
        obs = agent.stored_observations(_rows(episode.observations, 0, steps))
        next_obs = agent.stored_observations(_rows(episode.observations, 1, steps + 1))
        actions = agent.stored_actions(np.asarray(episode.actions))
        if assembler is None:
            record = {
                "obs": obs,
                "actions": actions,
                "rewards": rewards.astype(np.float32),
                "next_obs": next_obs,
                "terminals": terminated,
                "discounts": np.full(steps, gamma, np.float32),
            }
            out.memory.insert(record)
            out.transitions += steps
        else:
            ends = np.zeros(steps, bool)
            ends[-1] = not terminated[-1]  # the episode ends with the dataset's last step
            for t in range(steps):
                done = assembler.add(
                    _rows(obs, t, t + 1),
                    actions[t : t + 1],
                    rewards[t : t + 1],
                    _rows(next_obs, t, t + 1),
                    terminated[t : t + 1],
                    ends[t : t + 1],
                )
                if done is not None:
                    out.memory.insert(done)
                    out.transitions += len(done["rewards"])
        out.episodes += 1
        out.returns.append(float(rewards.sum()))
