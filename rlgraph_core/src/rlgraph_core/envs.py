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

Environment families behind optional extras of rlgraph-core are registered on first use:
``ALE/...`` ids (``atari``: ale-py, which ships the ROMs; ``gym.register_envs(ale_py)``),
``MiniGrid-...`` / ``BabyAI-...`` ids (``minigrid``), ``popgym-...`` ids (``popgym``: POPGym's
partially observable tasks), gymnasium's MuJoCo envs (``mujoco``) and
Box2D envs such as LunarLander (``box2d``).
A missing extra is reported with its pip command. ``env.wrappers`` (resolved by the assembly,
see :mod:`rlgraph_core.wrappers`) wrap every env made here; an observation space that no
network can read (MiniGrid's text ``mission``) is refused with the wrapper that would fix it.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from rlgraph_core.action_masks import mask_wrapper
from rlgraph_core.env_checks import CheckedEnv, CheckedSyncVectorEnv
from rlgraph_core.envpool_envs import make_envpool_env
from rlgraph_core.errors import ConfigError, prefix, shorten
from rlgraph_core.spaces import SpaceError, from_gym
from rlgraph_core.wrappers import apply_wrappers, missing_extra_message
from rlgraph_core.install_hints import extra_install_command
from rlgraph_core.multi_agent.pettingzoo_env import is_pettingzoo_id, make_pettingzoo_vector_env, game_factory

__all__ = [
    "check_observation_space",
    "check_stored_env_id",
    "make_eval_env",
    "make_vector_env",
    "make_vector_env_from",
    "register_env_family",
    "resolve_env_id",
]

#: Id prefixes of env families behind optional extras -> the package that registers them.
ENV_FAMILIES = {"ALE/": "ale_py", "MiniGrid-": "minigrid", "BabyAI-": "minigrid", "popgym-": "popgym"}

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


def _module_root(module_name: str) -> Path | None:
    """The search-path folder ``module_name``'s top-level package would be imported from, or None.

    Searched as :func:`_import_env_module` imports: ``sys.path`` first, then the current folder.
    Nothing is imported (``importlib.util.find_spec`` of the top-level name only).
    """
    import importlib.util

    top = module_name.split(".")[0]
    if top in sys.modules:
        return None  # imported already: nothing more runs
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:
        sys.path.append(cwd)
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    finally:
        if added:
            sys.path.remove(cwd)
    if spec is None:
        return None
    if spec.submodule_search_locations:  # a package: its folder sits in the search-path folder
        return Path(list(spec.submodule_search_locations)[0]).parent
    return Path(spec.origin).parent if spec.origin else None


def check_stored_env_id(env_id: Any, source: str, consent: str) -> None:
    """Refuse to import a stored ``env.id``'s module from the current folder.

    A checkpoint is data: evaluating, exporting or resuming it must not run code it names. A
    stored ``module:EnvId`` / ``module.path:ClassName`` is imported only when its module comes
    from an installed distribution (or a folder on ``PYTHONPATH``), never when the current
    folder provides it, unless the user consents for this id (``consent`` says how). ``source``
    names the checkpoint. Registered ids (``CartPole-v1``) import nothing of the checkpoint's.

    Raises:
        ConfigError: the module would be imported from the current folder.
    """
    if not isinstance(env_id, str) or ":" not in env_id:
        return
    module_name = env_id.partition(":")[0]
    if not module_name:
        return
    root = _module_root(module_name)
    if root is None or root.resolve() != Path(os.getcwd()).resolve():
        return
    raise ConfigError(
        f"'env.id' = {shorten(env_id)} stored in {source} names the module '{module_name}', which would be "
        f"imported from the current folder ('{root}'), not from an installed distribution. A checkpoint is "
        f"inert: rlgraph never runs code that a checkpoint names unless you say so, since a copied checkpoint "
        f"could bring the module with it. If you trust that module, {consent}; otherwise install the package "
        f"that provides it (pip install), or run rlgraph from another folder."
    )


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


def register_env_family(env_id: str) -> None:
    """Register the optional env family ``env_id`` belongs to (ale-py, minigrid, popgym), if any.

    Raises:
        ConfigError: the family's package is not installed (naming its pip command).
    """
    module = next((m for prefix, m in ENV_FAMILIES.items() if env_id.startswith(prefix)), None)
    if module is None or _registered(env_id):
        return
    try:
        package = importlib.import_module(module)  # minigrid and popgym register their ids on import
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        raise ConfigError(missing_extra_message(module, f"'env.id' = '{env_id}'")) from None
    gym.register_envs(package)


#: gymnasium's env families it registers without their physics package -> that package.
BUNDLED_FAMILIES = {"gymnasium.envs.mujoco": "mujoco", "gymnasium.envs.box2d": "Box2D"}


def _check_bundled_family(env_id: str) -> None:
    """gymnasium registers its MuJoCo and Box2D envs without ``mujoco`` / ``Box2D``; name the extra early."""
    try:
        entry = gym.spec(env_id).entry_point
    except (gym.error.Error, ValueError, TypeError):
        return
    if not isinstance(entry, str):
        return
    module = next((m for prefix, m in BUNDLED_FAMILIES.items() if entry.startswith(prefix)), None)
    if module is not None:
        import importlib.util

        if importlib.util.find_spec(module) is None:
            raise ConfigError(missing_extra_message(module, f"'env.id' = '{env_id}'"))


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
    if is_pettingzoo_id(env_id):  # several agents: made by rlgraph_core.multi_agent, not gymnasium.make
        game_factory(env_id)
        return env_id
    if ":" not in env_id:
        register_env_family(env_id)
        if _registered(env_id):
            _check_bundled_family(env_id)
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
    except gym.error.DependencyNotInstalled as exc:
        raise ConfigError(
            f"'env.id' = '{env_cfg.id}' could not be made: {exc}. Install the package it names "
            f"(the rlgraph-core extras atari, minigrid, mujoco, box2d: e.g. {extra_install_command('atari')})."
        ) from None
    except AttributeError as exc:
        space = next((s for s in ("action", "observation") if f"must specify an {s} space" in str(exc)), None)
        if space is None:  # the environment's own bug: its traceback is what the user needs
            raise
        raise ConfigError(missing_space_message(env_cfg.id, space)) from None
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


def missing_space_message(env_id: str, space: str) -> str:
    """The paragraph for an environment that defines no ``action_space`` / ``observation_space``."""
    example = "gymnasium.spaces.Discrete(2)" if space == "action" else "gymnasium.spaces.Box(-1, 1, (4,))"
    return (
        f"'env.id' = '{env_id}': the environment defines no {space}_space, so rlgraph cannot tell what the agent "
        f"{'does' if space == 'action' else 'sees'}. Set self.{space}_space to a gymnasium space (e.g. {example}) "
        f"in its __init__ or as a class attribute."
    )


def _wrappers(env_cfg, wrappers: Sequence[Callable] | None) -> list[Callable]:
    """The wrappers to apply, as resolved by the assembly (or
    :func:`rlgraph_core.config.wrappers.resolve_wrappers`); None only for a config without wrappers."""
    if wrappers is not None:
        return list(wrappers)
    if getattr(env_cfg, "wrappers", None):
        raise ValueError(
            "env.wrappers are set: pass wrappers=rlgraph_core.config.wrappers.resolve_wrappers(plugin_manager, "
            "env_cfg.wrappers) (the assembly does), so that names are resolved with the run's plugin manager."
        )
    return []


def _wrapper_hint(space) -> str:
    """What would make ``space`` readable, for the error of :func:`check_observation_space`."""
    if isinstance(space, gym.spaces.Dict) and "mission" in space.spaces and "image" in space.spaces:
        return (
            "This is MiniGrid's observation (image, direction and a text 'mission'): add "
            "env.wrappers: [{type: minigrid_image}] to train on the image (MiniGrid's ImgObsWrapper), "
            "or [{type: filter_observation, keys: [image, direction]}] for a Dict of image and direction."
        )
    return (
        "Add a wrapper in env.wrappers that turns it into a Box, Discrete or a Dict of those "
        "(e.g. {type: filter_observation, keys: [...]} to drop the unsupported entries, or {type: flatten})."
    )


def check_observation_space(space, env_id: str = "?") -> None:
    """Refuse an observation space rlgraph cannot convert (e.g. a ``Text`` space) with the wrapper that fixes it.

    Raises:
        ConfigError: one paragraph naming ``env.id``, the space and the wrapper to add.
    """

    try:
        from_gym(space)
    except SpaceError as exc:
        shown = str(space)
        shown = shown if len(shown) <= 120 else shown[:117] + "..."
        raise ConfigError(
            f"'env.id' = '{env_id}' observes {shown}, which rlgraph cannot feed to a network ({exc}). "
            f"{_wrapper_hint(space)}"
        ) from None


def _checked_vector_env(envs, env_id: str, seed: int):
    """``envs`` with its action space seeded, or closed and refused if its observations cannot be fed."""
    try:
        check_observation_space(envs.single_observation_space, env_id)
    except ConfigError:
        envs.close()
        raise
    envs.action_space.seed(seed)
    return envs


def make_vector_env(env_cfg, seed: int, wrappers: Sequence[Callable] | None = None):
    """A gymnasium vector env that returns the final observation of finished episodes at once.

    Same-step autoreset means ``obs`` after a step already holds the reset observation of a
    finished env, and ``info["final_obs"]`` the true last observation, which replay needs.
    ``wrappers`` (``env -> env`` callables, see :func:`rlgraph_core.wrappers.resolve_wrappers`)
    wrap each copy, innermost first; outermost, :class:`~rlgraph_core.env_checks.CheckedEnv` checks
    that observations and rewards are finite numbers as the agent will see them (in a sync vector
    env, :class:`~rlgraph_core.env_checks.CheckedSyncVectorEnv` runs those checks in its own step).
    """
    if is_pettingzoo_id(env_cfg.id):  # rows are (copy, agent) pairs: rlgraph_core.multi_agent
        return make_pettingzoo_vector_env(env_cfg, seed)
    if env_cfg.vectorization == "envpool":  # C++ batch envs: the wrappers are EnvPool's own (translated)
        return _checked_vector_env(make_envpool_env(env_cfg, seed), env_cfg.id, seed)
    wrap = _all_wrappers(env_cfg, wrappers)
    if env_cfg.vectorization == "async":
        envs = _made(
            env_cfg,
            lambda target, kwargs: gym.make_vec(
                target,
                num_envs=env_cfg.num_envs,
                vectorization_mode=gym.VectorizeMode.ASYNC,
                vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
                wrappers=wrap,
                **kwargs,
            ),
        )
    else:  # gym.make_vec's sync vector env, with the checks of each sub-env's CheckedEnv in its step
        envs = _made(env_cfg, lambda target, kwargs: _checked_sync_vector_env(target, kwargs, wrap, env_cfg.num_envs))
    return _checked_vector_env(envs, env_cfg.id, seed)


def _checked_sync_vector_env(target, kwargs: dict, wrap: list[Callable], num_envs: int) -> CheckedSyncVectorEnv:
    """What ``gym.make_vec(target, num_envs, "sync", wrappers=wrap, **kwargs)`` makes (same-step
    autoreset), as a :class:`CheckedSyncVectorEnv` (``wrap`` ends with the CheckedEnv)."""
    make = lambda: apply_wrappers(gym.make(target, **kwargs), wrap)  # noqa: E731
    return CheckedSyncVectorEnv([make] * num_envs, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def make_vector_env_from(factory, env_cfg, seed: int, wrappers: Sequence[Callable] | None = None):
    """Like :func:`make_vector_env`, with ``factory()`` making each env instead of ``env_cfg.id``
    (the facade's gymnasium env or env factory); ``wrappers`` wrap each copy as there."""
    if env_cfg.vectorization == "envpool":
        raise ConfigError(
            "env.vectorization: envpool makes its envs from env.id in C++, so it cannot step an env given as a "
            "gymnasium env or env factory; pass the env id (e.g. env='ALE/Pong-v5') or use sync or async."
        )
    wrap = _all_wrappers(env_cfg, wrappers)
    cls = gym.vector.AsyncVectorEnv if env_cfg.vectorization == "async" else CheckedSyncVectorEnv
    make = lambda: apply_wrappers(factory(), wrap)  # noqa: E731
    envs = cls([make] * env_cfg.num_envs, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    return _checked_vector_env(envs, env_cfg.id, seed)


def make_eval_env(env_cfg, render_mode: str | None = None, wrappers: Sequence[Callable] | None = None):
    """A single environment for evaluation, wrapped with ``wrappers`` and checked like the training envs.

    The assembly passes its evaluation wrappers (``resolve_wrappers(..., evaluation=True)``):
    ``env.wrappers`` without their training-only parts, so that evaluation measures the task.
    """
    if is_pettingzoo_id(env_cfg.id):  # one copy: a vector env of one row per agent
        if render_mode:
            raise ConfigError(f"'env.id' = '{env_cfg.id}': videos of PettingZoo envs are not recorded yet.")
        return make_pettingzoo_vector_env(env_cfg, 0, num_envs=1)
    extra = {"render_mode": render_mode} if render_mode else {}
    if render_mode:
        ensure_runtime_dir()
    wrap = _all_wrappers(env_cfg, wrappers)
    env = _made(env_cfg, lambda target, kwargs: apply_wrappers(gym.make(target, **kwargs), wrap), **extra)
    try:
        check_observation_space(env.observation_space, env_cfg.id)
    except ConfigError:
        env.close()
        raise
    return env


def _all_wrappers(env_cfg, wrappers: Sequence[Callable] | None) -> list[Callable]:
    """``env.wrappers``, then the legal-action mask's (``env.action_mask``, see
    :mod:`rlgraph_core.action_masks`: after the user's, so none of them drops the mask key), then
    the checker, outermost: observations are checked as the agent will see them."""
    return [*_wrappers(env_cfg, wrappers), mask_wrapper(env_cfg), _checker(env_cfg)]


def ensure_runtime_dir() -> None:
    """Give SDL (pygame, which gymnasium's classic-control envs render with) a private
    ``XDG_RUNTIME_DIR`` when the process has none or an unusable one, as on a headless server or
    in a container: SDL otherwise prints "error: XDG_RUNTIME_DIR is invalid or not set" on every
    render. The folder is made once per process, owner-only (0700), as the XDG spec asks."""
    current = os.environ.get("XDG_RUNTIME_DIR")
    if current and os.path.isdir(current) and os.access(current, os.W_OK):
        return
    import atexit
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="rlgraph-xdg-")  # mkdtemp makes it 0700
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    os.environ["XDG_RUNTIME_DIR"] = folder


def _checker(env_cfg) -> functools.partial:
    """``env -> CheckedEnv(env, ...)`` for ``env_cfg`` (a picklable callable, for async vector envs)."""
    return functools.partial(
        CheckedEnv, env_id=str(env_cfg.id), allow_nonfinite_obs=bool(getattr(env_cfg, "allow_nonfinite_obs", False))
    )
