"""What :func:`rlgraph_core.make` turns its arguments into before it validates them: a raw run
config (from an agent name, a shipped config, a file, a dict or a RunConfig, with the env, the
keyword settings and a dataset put in), and the factory of an env given as an object.

The config files and ``--set`` overrides of the CLI resolve through
:func:`rlgraph_core.config.run.resolve_config`; the facade reads the same files with
:func:`~rlgraph_core.config.run.load_raw_config` and validates with the same
:func:`~rlgraph_core.config.run.validate_config`.
"""

from __future__ import annotations

import copy
import difflib
import itertools
from pathlib import Path
from typing import Any, Callable

from rlgraph_core.config.run import deep_merge, load_raw_config, shipped_configs
from rlgraph_core.config.sections import EnvConfig, TrainConfig
from rlgraph_core.datasets import DatasetSource
from rlgraph_core.envs import resolve_env_id
from rlgraph_core.errors import ConfigError

__all__ = ["facade_raw_config"]

_facade_env_ids = itertools.count()


def facade_raw_config(
    algo: Any,
    env: Any,
    train_settings: dict[str, Any],
    executor: str | dict | None,
    dataset: str | Path | None,
    overrides: dict[str, Any],
    plugin_manager,
) -> tuple[dict, Callable[[], Any] | None, DatasetSource | None]:
    """:func:`rlgraph_core.make`'s arguments (see there) as ``(raw run config, env factory or None,
    dataset source or None)``: the config before validation, the factory of an env given as an
    instance or a function, and the opened dataset of ``dataset=``. ``train_settings`` are the
    train fields ``make`` takes by name (``backend``, ``mode``, ``device``, ``seed``; None: the
    config's)."""
    raw = _raw_config(algo, plugin_manager)
    factory = _apply_env(raw, env)
    train = raw.setdefault("train", {})
    train.update({key: value for key, value in train_settings.items() if value is not None})
    if isinstance(executor, dict):
        executor = copy.deepcopy(executor)
        if "type" in executor:
            train["executor"] = executor.pop("type")
        raw["executor"] = executor
    elif executor is not None:
        train["executor"] = executor
    source = _apply_dataset(raw, dataset, env_given=env is not None) if dataset is not None else None
    _apply_overrides(raw, overrides, plugin_manager)
    return raw, factory, source


def _raw_config(algo: Any, plugin_manager) -> dict:
    """A raw config dict from an agent name, a shipped config name, a file path, a dict or a RunConfig."""

    if hasattr(algo, "to_dict") and hasattr(algo, "train"):  # a validated RunConfig
        return algo.to_dict()
    if isinstance(algo, dict):
        return copy.deepcopy(algo)
    if isinstance(algo, Path) or (isinstance(algo, str) and Path(algo).is_file()):
        return load_raw_config(algo)
    if isinstance(algo, str):
        agents = sorted(plugin_manager.names("agents"))
        if algo in agents:
            return {"agent": {"type": algo}}
        if algo in shipped_configs():
            return load_raw_config(algo)
        close = difflib.get_close_matches(algo, agents + shipped_configs(), n=1)
        raise ConfigError(
            f"make({algo!r}): not an agent name, a shipped config or a config file."
            + (f" Did you mean '{close[0]}'?" if close else "")
            + f" Agents: {', '.join(agents)}; shipped configs: {', '.join(shipped_configs())}; or pass a path to a "
            f"YAML/JSON config file or a config dict."
        )
    raise ConfigError(
        f"make() takes an agent name (e.g. 'ppo'), a shipped config name, a config file path or a config dict; "
        f"got a {type(algo).__name__}."
    )


def _env_id_for(env) -> str:
    """A config ``env.id`` for a gymnasium env instance: its registered id, its class path, or a
    process-local id registered with gymnasium (an env class that cannot be imported by name)."""
    import gymnasium as gym

    spec = getattr(env, "spec", None)
    if spec is not None and spec.id in gym.registry:
        return spec.id
    cls = type(env.unwrapped)
    path = f"{cls.__module__}:{cls.__qualname__}"
    try:
        resolve_env_id(path)
        return path
    except ConfigError:
        pass
    env_id = f"rlgraph_facade/{cls.__name__}{next(_facade_env_ids)}-v0"
    gym.register(id=env_id, entry_point=lambda **_: copy.deepcopy(env))
    return env_id


def _env_factory(env) -> tuple[Callable[[], Any], str]:
    """``(factory, env id)`` for a gymnasium env instance or an env factory."""
    import gymnasium as gym

    if isinstance(env, gym.Env):

        def factory(env=env):
            try:
                return copy.deepcopy(env)
            except Exception as exc:  # e.g. an env holding a simulator handle
                raise ConfigError(
                    f"The environment {type(env).__name__} cannot be copied ({type(exc).__name__}: {exc}); rlgraph "
                    f"makes one copy per vector env and one for evaluation. Pass a factory instead: env=lambda: ..."
                ) from None

        return factory, _env_id_for(env)
    probe = env()
    if not isinstance(probe, gym.Env):
        raise ConfigError(
            f"env: the factory {getattr(env, '__name__', env)!r} returned a {type(probe).__name__}, not a "
            f"gymnasium.Env; pass an env id, a gymnasium.Env or a function that makes one."
        )
    try:
        return env, _env_id_for(probe)
    finally:
        probe.close()


def _apply_env(raw: dict, env) -> Callable[[], Any] | None:
    """Put ``env`` (id, section dict, instance or factory) into ``raw``; return the factory, if any."""
    if env is None:
        return None
    section = raw.setdefault("env", {})
    if isinstance(env, str):
        section["id"] = env
        return None
    if isinstance(env, dict):
        section.update(copy.deepcopy(env))
        return None
    if callable(env) or hasattr(env, "step"):
        factory, env_id = _env_factory(env)
        section["id"] = env_id
        section.pop("kwargs", None)
        return factory
    raise ConfigError(
        f"env: got a {type(env).__name__}; pass a gymnasium id ('CartPole-v1'), a gymnasium.Env, a function that "
        f"makes one, or an env section dict ({{'id': ..., 'num_envs': ...}})."
    )


def _apply_overrides(raw: dict, overrides: dict, plugin_manager) -> None:
    """Keyword overrides: a section name (``train={...}``, ``multi_agent={...}``) merges that section; a field of the
    train or env section goes there (``total_timesteps=...``, ``num_envs=8``); anything else is an
    agent field (``learning_rate=...``, ``n_steps=...``)."""

    for key, value in overrides.items():
        if key in ("agent", "train", "executor", "multi_agent") and isinstance(value, dict):
            raw[key] = deep_merge(raw.get(key) or {}, value)
        elif key in TrainConfig.model_fields:
            raw.setdefault("train", {})[key] = value
        elif key in EnvConfig.model_fields and key != "id":
            raw.setdefault("env", {})[key] = value
        else:
            raw.setdefault("agent", {})[key] = value


def _apply_dataset(raw: dict, dataset: str | Path, env_given: bool):
    """``make(dataset=...)``: the offline executor on ``dataset`` (opened and checked now, so a
    bad one fails before anything runs), evaluated on the env it was recorded on unless ``env``
    or the config names one."""

    source = DatasetSource(dataset, field="dataset")
    raw.setdefault("train", {})["executor"] = "offline"
    given_executor, given_env = raw.get("executor"), raw.get("env")
    executor: dict = given_executor if isinstance(given_executor, dict) else {}
    raw["executor"] = {**executor, "dataset": str(dataset)}
    section: dict = given_env if isinstance(given_env, dict) else {}
    if env_given or section.get("id"):
        return source
    recorded = source.env_section()
    if recorded is None:
        raise ConfigError(
            f"dataset='{dataset}' does not say which environment it was recorded on (no env spec in its metadata); "
            f"pass the env to evaluate on: make(..., dataset=..., env='ENV-ID')."
        )
    raw["env"] = {**section, **recorded}
    return source
