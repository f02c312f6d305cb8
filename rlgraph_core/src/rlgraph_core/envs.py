"""Environment factories: gymnasium vector envs for training and single envs for evaluation.

``env.id`` may name:

* an id registered with gymnasium (``CartPole-v1``, or one a plugin registered through
  gymnasium's entry points);
* ``module:EnvId``: gymnasium's own form: ``module`` is imported (it registers ``EnvId`` with
  ``gymnasium.register``), then ``EnvId`` is made;
* ``module.path:ClassName``: a :class:`gymnasium.Env` subclass, made directly (no registration
  needed; its constructor takes ``env.kwargs``).

The module must be importable: installed, on ``PYTHONPATH``, or in the current folder (which
is searched last when the module is found nowhere else). :func:`resolve_env_id` checks all of
this when a config is validated; errors name ``env.id`` and what would work.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import os
import sys
from types import ModuleType
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from rlgraph_core.env_checks import CheckedEnv
from rlgraph_core.errors import ConfigError, prefix, shorten

__all__ = ["make_eval_env", "make_vector_env", "resolve_env_id"]

_IMPORTABLE_HINT = (
    "The module must be importable from where rlgraph runs: run rlgraph from the module's folder, "
    "add that folder to PYTHONPATH, or pip install the package that holds it."
)


def _import_env_module(module_name: str, env_id: str) -> ModuleType:
    """Import ``module_name`` (trying the current folder last); ConfigErrors name ``env.id``."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and not (module_name == missing or module_name.startswith(missing + ".")):
            raise ConfigError(
                f"'env.id' = '{env_id}': the module '{module_name}' was found, but importing it failed "
                f"because it needs '{missing}', which is not installed: {exc}."
            ) from exc
        cwd = os.getcwd()
        if cwd not in sys.path and "" not in sys.path:
            sys.path.append(cwd)  # `rlgraph` (a console script) does not search the current folder
            return _import_env_module(module_name, env_id)
        raise ConfigError(
            f"'env.id' = '{env_id}': there is no module named '{module_name}' to import the "
            f"environment from (Python path and current folder searched). {_IMPORTABLE_HINT}"
        ) from None
    except Exception as exc:  # the user's module raised while being imported
        raise ConfigError(
            f"'env.id' = '{env_id}': importing the module '{module_name}' failed with {type(exc).__name__}: {exc}"
        ) from exc


def _registered(env_id: str) -> bool:
    """Whether gymnasium can make ``env_id`` from its registry (latest version if unversioned)."""
    if env_id in gym.registry:
        return True
    try:
        gym.spec(env_id)
    except (gym.error.Error, ValueError, TypeError):
        return False
    return True


def _module_offers(module: ModuleType) -> tuple[list[str], list[str]]:
    """(Env subclasses defined in ``module``, ids registered with an entry point in ``module``)."""
    classes = [
        name
        for name, obj in vars(module).items()
        if isinstance(obj, type) and issubclass(obj, gym.Env) and obj.__module__ == module.__name__
    ]
    ids = []
    for env_id, spec in gym.registry.items():
        entry = spec.entry_point
        where = entry.split(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", None)
        if where == module.__name__:
            ids.append(env_id)
    return sorted(classes), sorted(ids)


def resolve_env_id(env_id: str) -> str | EnvSpec:
    """What ``gymnasium.make`` / ``make_vec`` get for a config's ``env.id``.

    Returns ``env_id`` itself for a registered id and for gymnasium's ``module:EnvId`` form
    (after importing ``module``, so that its registration ran), and an unregistered
    :class:`~gymnasium.envs.registration.EnvSpec` whose entry point is ``module.path:ClassName``
    for a :class:`gymnasium.Env` subclass.

    Raises:
        ConfigError: an unknown id (with close matches), a module that cannot be imported, an
            attribute the module lacks, or an attribute that is not a gymnasium.Env subclass.
    """
    if not isinstance(env_id, str) or not env_id.strip():
        raise ConfigError(f"'env.id' = {env_id!r}: name a gymnasium environment, e.g. CartPole-v1.")
    if ":" not in env_id:
        if _registered(env_id):
            return env_id
        close = difflib.get_close_matches(env_id, list(gym.registry), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(
            f"'env.id' = '{env_id}' is not a registered gymnasium environment.{hint} Your own "
            f"environment can be named as 'module:EnvId' (a module that registers EnvId) or "
            f"'module.path:ClassName' (a gymnasium.Env subclass)."
        )
    module_name, _, attr = env_id.partition(":")
    if not module_name or not attr or ":" in attr:
        raise ConfigError(
            f"'env.id' = '{env_id}': write a custom environment as 'module:EnvId' or "
            f"'module.path:ClassName' (one colon, both parts non-empty)."
        )
    module = _import_env_module(module_name, env_id)
    if _registered(attr):
        return env_id  # gymnasium's own module:EnvId form; make() imports the module itself
    obj = getattr(module, attr, None)
    if obj is None:
        classes, ids = _module_offers(module)
        close = difflib.get_close_matches(attr, classes + ids, n=1)
        offers = "; ".join(
            part
            for part in (
                f"its gymnasium.Env classes: {', '.join(classes)}" if classes else "",
                f"ids it registered: {', '.join(ids)}" if ids else "",
            )
            if part
        )
        raise ConfigError(
            f"'env.id' = '{env_id}': the module '{module_name}' ({getattr(module, '__file__', None)}) "
            f"has no attribute '{attr}' and registered no gymnasium id '{attr}'"
            + (f"; did you mean '{module_name}:{close[0]}'?" if close else "")
            + (f" ({offers})." if offers else "; it defines no gymnasium.Env subclass.")
        )
    if not (isinstance(obj, type) and issubclass(obj, gym.Env)):
        what = f"class {obj.__module__}.{obj.__qualname__}" if isinstance(obj, type) else f"a {type(obj).__name__}"
        raise ConfigError(
            f"'env.id' = '{env_id}': '{attr}' in module '{module_name}' is {what}, not a subclass of "
            f"gymnasium.Env; name a gymnasium.Env subclass ('module:ClassName') or an id the module "
            f"registers ('module:EnvId')."
        )
    return EnvSpec(id=attr, entry_point=env_id)


def _made(env_cfg, make, **extra: Any):
    """Call ``make(resolved id, **env_cfg.kwargs, **extra)``; constructor errors become ConfigErrors."""
    target = resolve_env_id(env_cfg.id)
    kwargs = {**env_cfg.kwargs, **extra}
    try:
        return make(target, kwargs)
    except (TypeError, ValueError, gym.error.Error) as exc:
        if isinstance(exc, ConfigError):
            raise
        given = f"env.kwargs = {shorten(env_cfg.kwargs, 200)}" if env_cfg.kwargs else "no env.kwargs"
        if extra:
            given += " and " + ", ".join(f"{k}={v!r}" for k, v in extra.items())
        raise ConfigError(
            f"'env.id' = '{env_cfg.id}' could not be made with {given}: {type(exc).__name__}: "
            f"{prefix(str(exc))}. "
            f"env.kwargs are passed to the environment's constructor: pass only the arguments it "
            f"takes (and every one it requires)."
        ) from exc


def make_vector_env(env_cfg, seed: int):
    """A gymnasium vector env that returns the final observation of finished episodes at once.

    Same-step autoreset means ``obs`` after a step already holds the reset observation of a
    finished env, and ``info["final_obs"]`` the true last observation, which replay needs. Each
    copy is wrapped in :class:`~rlgraph_core.env_checks.CheckedEnv` (finite, numeric
    observations and rewards, checked before the vector env stores them).
    """
    mode = gym.VectorizeMode.ASYNC if env_cfg.vectorization == "async" else gym.VectorizeMode.SYNC
    envs = _made(
        env_cfg,
        lambda target, kwargs: gym.make_vec(
            target,
            num_envs=env_cfg.num_envs,
            vectorization_mode=mode,
            vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
            wrappers=[_checker(env_cfg)],
            **kwargs,
        ),
    )
    envs.action_space.seed(seed)
    return envs


def make_eval_env(env_cfg, render_mode: str | None = None):
    """A single environment for evaluation (observations and rewards checked as in training)."""
    extra = {"render_mode": render_mode} if render_mode else {}
    return _checker(env_cfg)(_made(env_cfg, lambda target, kwargs: gym.make(target, **kwargs), **extra))


def _checker(env_cfg) -> functools.partial:
    """``env -> CheckedEnv(env, ...)`` for ``env_cfg`` (a picklable callable, for async vector envs)."""
    return functools.partial(
        CheckedEnv, env_id=str(env_cfg.id), allow_nonfinite_obs=bool(getattr(env_cfg, "allow_nonfinite_obs", False))
    )
