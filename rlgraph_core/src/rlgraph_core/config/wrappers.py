"""``env.wrappers`` by registry name: validate each entry and resolve it to an ``env -> env`` callable.

Both go through the plugin manager's ``wrappers`` kind (the ``rlgraph_wrappers`` hook), so a
wrapper from a third-party package is validated and applied exactly like the built-in ones
(:mod:`rlgraph_core.wrappers`).
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from rlgraph_core.config.errors import format_validation_error
from rlgraph_core.errors import ConfigError, PluginError
from rlgraph_core.plugins import get_plugin_manager
from rlgraph_core.wrappers import WrapperSettings, missing_extra_message
from rlgraph_core.wrappers import _describe_space

__all__ = ["evaluation_wrappers", "resolve_wrappers", "validate_wrappers"]


def _manager(plugin_manager):
    if plugin_manager is not None:
        return plugin_manager

    return get_plugin_manager()


def validate_wrappers(plugin_manager, raw: Any, field: str = "env.wrappers") -> list[WrapperSettings]:
    """Validate ``env.wrappers`` (a list of ``{type: NAME, ...}``) against the registered settings models.

    Raises:
        ConfigError: one paragraph naming the entry (``env.wrappers.2.type``), the bad value and
            the known wrappers (with a close match), a bad or unknown field, or a missing optional
            package with its pip command.
    """
    pm = _manager(plugin_manager)
    if raw is None:
        return []
    if not isinstance(raw, (list, tuple)):
        raise ConfigError(
            f"'{field}' = {json.dumps(raw, default=str)[:80]}: env.wrappers is an ordered list of wrappers, "
            f"e.g. [{{type: minigrid_image}}] or [{{type: atari_preprocessing}}, {{type: frame_stack, stack_size: 4}}]."
        )
    out = []
    for i, entry in enumerate(raw):
        where = f"{field}.{i}"
        if isinstance(entry, WrapperSettings):
            entry = entry.model_dump()
        if isinstance(entry, str):
            entry = {"type": entry}
        if not isinstance(entry, Mapping) or not isinstance(entry.get("type"), str):
            raise ConfigError(
                f"'{where}' = {json.dumps(entry, default=str)[:80]}: each wrapper is a mapping with a 'type' "
                f"naming a registered wrapper (known wrappers: {', '.join(sorted(pm.names('wrappers')))})."
            )
        try:
            _, model = pm.get("wrappers", entry["type"], field=f"{where}.type")
        except PluginError as exc:
            raise ConfigError(str(exc) + " (Plugins may add wrappers; 'rlgraph plugins' lists them.)") from None
        try:
            settings = model.model_validate(dict(entry))
        except ValidationError as exc:
            raise ConfigError(
                f"Invalid {entry['type']} wrapper settings: {format_validation_error(exc, where, dict(entry), model)}."
            ) from None
        for module in model.requires:
            if importlib.util.find_spec(module) is None:
                raise ConfigError(missing_extra_message(module, f"'{where}' = {entry['type']}"))
        out.append(settings)
    _check_order(out, field)
    return out


def _check_order(wrappers: Sequence[WrapperSettings], field: str) -> None:
    """Refuse an observation wrapper placed before one that reads the emulator's screen itself
    (:attr:`~rlgraph_core.wrappers.WrapperSettings.reads_raw_screen`): its work would be bypassed."""
    for j, reader in enumerate(wrappers):
        if not reader.reads_raw_screen:
            continue
        for i, early in enumerate(wrappers[:j]):
            if early.changes_observation:
                fixed = [w.type for w in wrappers[:i]] + [w.type for w in wrappers[i + 1 : j + 1]]
                fixed += [early.type] + [w.type for w in wrappers[j + 1 :]]
                raise ConfigError(
                    f"'{field}.{i}' = {early.type} comes before '{field}.{j}' = {reader.type}, which reads the "
                    f"screen from the emulator itself, not the observation of the wrappers before it: {early.type} "
                    f"would silently do nothing (with frame_stack, the agent would train on single frames). Put "
                    f"it after {reader.type}: env.wrappers: [{', '.join(fixed)}]."
                )


def _apply(factory: Callable, settings: WrapperSettings, index: int, dict_readers: tuple[str, ...], env):
    """``factory(env, settings)``, after checking the observation it takes; errors name the wrapper.

    ``dict_readers`` names the registered wrappers that take a Dict observation (the hint for one).
    """
    import gymnasium as gym

    space = env.observation_space
    problem = settings.observation_problem(space)
    if problem is None:
        try:
            return factory(env, settings)
        except (TypeError, ValueError, AssertionError, gym.error.Error) as exc:
            if isinstance(exc, ConfigError):
                raise
            problem = f"it cannot wrap {_describe_space(space)} ({type(exc).__name__}: {str(exc)[:200]})"
    inner = "the environment itself" if index == 0 else f"'env.wrappers.{index - 1}'"
    hint = ""
    if isinstance(space, gym.spaces.Dict) and settings.takes != "dict" and dict_readers:
        hint = f" A Dict observation needs a wrapper that takes one first: {', '.join(dict_readers)}."
    raise ConfigError(
        f"'env.wrappers.{index}' = {settings.type} cannot be applied: {problem}, from {inner}. Wrappers "
        f"apply in order, the first innermost: place {settings.type} where the observation is what it takes.{hint}"
    )


def evaluation_wrappers(settings: Sequence[WrapperSettings]) -> list[WrapperSettings]:
    """``settings`` as evaluation envs apply them: training-only wrappers left out, the others as
    each one's :meth:`~rlgraph_core.wrappers.WrapperSettings.for_evaluation` says."""
    return [e for e in (s.for_evaluation() for s in settings) if e is not None]


def resolve_wrappers(
    plugin_manager, settings: Sequence[WrapperSettings], *, evaluation: bool = False
) -> list[Callable]:
    """``env -> wrapped env`` callables of validated ``settings``, in order (picklable, for async envs);
    with ``evaluation``, as :func:`evaluation_wrappers` says (for the envs that measure the task)."""
    pm = _manager(plugin_manager)
    dict_readers = tuple(
        sorted(
            name
            for name in pm.names("wrappers")
            if getattr(pm.get("wrappers", name)[1], "takes", None) == "dict"
            and pm.get("wrappers", name)[1].changes_observation
        )
    )
    out = []
    for i, s in enumerate(settings):
        if evaluation:
            s = s.for_evaluation()
            if s is None:
                continue
        factory, _ = pm.get("wrappers", s.type, field="env.wrappers")
        out.append(functools.partial(_apply, factory, s, i, dict_readers))
    return out
