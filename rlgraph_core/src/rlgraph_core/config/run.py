"""The whole run config (agent + env + train), loading from YAML/JSON, overrides, errors."""

from __future__ import annotations

import difflib
import json
import typing
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, create_model, field_serializer

from rlgraph_core.backend.settings import BackendSettings, backend_entry
from rlgraph_core.callbacks import validate_callbacks
from rlgraph_core.config.errors import format_validation_error
from rlgraph_core.config.limits import MAX_CONFIG_BYTES, MAX_KEY_DEPTH, check_document, parse_json, parse_yaml, shorten
from rlgraph_core.config.memory import validate_memory_settings
from rlgraph_core.config.sections import EnvConfig, MultiAgentConfig, SelfPlayConfig, TrainConfig
from rlgraph_core.config.slots import validate_agent_slots
from rlgraph_core.config.wrappers import validate_wrappers
from rlgraph_core.envs import resolve_env_id
from rlgraph_core.multi_agent import PolicyMapping, is_pettingzoo_id, is_turn_based, pettingzoo_agents
from rlgraph_core.errors import ConfigError, PluginError
from rlgraph_core.execution.loggers import check_logger_available
from rlgraph_core.execution.settings import ExecutorSettings, executor_entry
from rlgraph_core.plugins import get_plugin_manager


class RunConfig(BaseModel):
    """A validated run: ``agent`` (a registered agent's config model), ``env``, ``train``,
    ``executor`` (the settings of the executor ``train.executor`` names) and ``backend`` (the
    settings of the backend ``train.backend`` names).

    :func:`run_config_model` makes the concrete model of a plugin manager, whose ``agent``
    field is the discriminated union (on ``type``) of every registered agent's config model.
    ``executor`` is an instance of the settings model that executor registered
    (:class:`~rlgraph_core.execution.settings.ExecutorSettings` for one without settings);
    ``backend`` likewise (:class:`~rlgraph_core.backend.settings.BackendSettings`).
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    agent: Any
    env: EnvConfig = Field(default_factory=EnvConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    executor: SerializeAsAny[ExecutorSettings] = Field(default_factory=ExecutorSettings)
    backend: SerializeAsAny[BackendSettings] = Field(default_factory=BackendSettings)
    multi_agent: Optional[MultiAgentConfig] = None

    @field_serializer("backend")
    def _backend_changes_only(self, settings: BackendSettings) -> dict:
        """Only the settings that differ from the backend's defaults: a dumped config (a checkpoint's
        config.json, a Ray worker's config) then validates again with ``train.backend`` switched,
        unless it chose a backend-specific option (which the other backend would not know)."""
        return settings.model_dump(mode="json", exclude_defaults=True)

    def to_dict(self) -> dict:
        """Plain JSON-able dict of the whole config (pydantic's ``model_dump``)."""
        return self.model_dump(mode="json")


#: The top-level sections of a run config.
SECTIONS = ("agent", "env", "train", "executor", "backend", "multi_agent")

#: Name of the shipped config ``rlgraph train`` runs without a CONFIG argument.
DEFAULT_CONFIG_NAME = "dqn_cartpole"


def shipped_configs() -> list[str]:
    """Names of the configs shipped with rlgraph-core (``rlgraph train NAME`` runs one)."""
    folder = resources.files("rlgraph_core") / "configs"
    return sorted(p.name.rsplit(".", 1)[0] for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_shipped_config(name: str) -> dict:
    """The shipped config ``name`` (e.g. ``dqn_cartpole``) as a raw dict."""
    if name not in shipped_configs():
        raise ConfigError(
            f"There is no shipped config named '{name}'; shipped configs: "
            f"{', '.join(shipped_configs())} (or pass a path to a YAML/JSON file)."
        )
    text = (resources.files("rlgraph_core") / "configs" / f"{name}.yaml").read_text()
    return yaml.safe_load(text)


def load_named_config(name: str | Path, plugin_manager=None) -> dict:
    """The raw config ``name`` means, one naming scheme for ``rlgraph train NAME``, ``rlgraph config
    NAME`` and ``rl.make(NAME)``: an existing YAML/JSON file, else an agent name (``ppo``: its config
    model's defaults), else a shipped config (``ppo_cartpole``).

    Raises:
        ConfigError: none of these, with the closest agent or shipped config name.
    """
    path = Path(name)
    if path.is_file():
        return load_config_file(path)
    plugin_manager = plugin_manager if plugin_manager is not None else get_plugin_manager()
    text = str(name)
    agents = sorted(plugin_manager.names("agents"))
    if text in agents:
        return {"agent": {"type": text}}
    if text in shipped_configs():
        return load_shipped_config(text)
    if path.suffix in (".yaml", ".yml", ".json") or len(path.parts) > 1:
        return load_config_file(path)  # meant as a file: its error names the file
    close = difflib.get_close_matches(text, agents + shipped_configs(), n=1)
    hint = ""
    if close:
        hint = f" Did you mean the {'agent' if close[0] in agents else 'shipped config'} '{close[0]}'?"
    raise ConfigError(
        f"'{text[:80]}' is not a config file, an agent name or a shipped config.{hint} Agents: "
        f"{', '.join(agents)}; shipped configs: {', '.join(shipped_configs())}; or pass the path of a YAML/JSON "
        f"config file."
    )


#: The default run (DQN on CartPole-v1, torch eager): ``configs/dqn_cartpole.yaml``.
DEFAULT_CONFIG: dict = load_shipped_config(DEFAULT_CONFIG_NAME)


def _discriminated(models: dict[str, type[BaseModel]]):
    """``Annotated[Union[...], discriminator 'type']`` over ``{registry name: model}``.

    A model whose ``type`` field is not ``Literal[name]`` is subclassed with that literal, so
    the registry name is always the discriminator.
    """
    members = []
    for name, model in models.items():
        field = model.model_fields.get("type")
        if field is None or typing.get_args(field.annotation) != (name,):
            model = create_model(model.__name__, __base__=model, type=(Literal[name], name))  # type: ignore[call-overload]
        members.append(model)
    if len(members) == 1:
        return members[0]
    return Annotated[Union[tuple(members)], Field(discriminator="type")]


def run_config_model(plugin_manager) -> type[RunConfig]:
    """The run-config model of ``plugin_manager``'s registry (made once per registry)."""
    cached = getattr(plugin_manager, "_run_config_model", None)
    agents = {name: entry.obj[1] for name, entry in plugin_manager.names("agents").items()}
    key = tuple((n, id(m)) for n, m in sorted(agents.items()))
    if cached is not None and cached[0] == key:
        return cached[1]
    model = create_model("RunConfig", __base__=RunConfig, agent=(_discriminated(agents), ...))  # type: ignore[call-overload]
    plugin_manager._run_config_model = (key, model)
    return model


def validate_config(raw: dict, plugin_manager=None) -> RunConfig:
    """Validate a raw config dict; raise ConfigError naming each bad field, value and remedy.

    Names are checked against ``plugin_manager`` (default: the process's plugin manager).
    """

    pm = plugin_manager or get_plugin_manager()
    if not isinstance(raw, dict):
        raise ConfigError(
            f"A config must be a mapping with keys agent, env, train (and executor, backend); got {type(raw).__name__}."
        )
    check_document(raw)
    unknown = sorted(shorten(k, 40) if isinstance(k, str) and len(k) > 40 else k for k in set(raw) - set(SECTIONS))
    if unknown:
        raise ConfigError(
            f"Unknown top-level config keys {unknown}; a config has agent, env and train (and optionally "
            f"executor, the settings of train.executor, backend, the settings of train.backend, and multi_agent, "
            f"the policies of a PettingZoo env)."
        )
    for section in SECTIONS:
        if raw.get(section) is not None and not isinstance(raw[section], dict):
            raise ConfigError(
                f"'{section}' = {shorten(raw[section])}: the {section} section "
                f"must be a mapping of fields, e.g. {section}: {{...}}."
            )
    non_finite = [
        f"'{path}' = {value}"
        for section in SECTIONS
        for path, value in _non_finite_values(raw.get(section), section)
        if not path.startswith("env.kwargs")  # the environment checks its own arguments
    ]
    if non_finite:
        raise ConfigError(
            f"Invalid config: {', '.join(non_finite)}: config values must be finite numbers; NaN and "
            f"infinity are not allowed (a learning rate, epsilon, gamma ... of NaN or inf would "
            f"silently ruin training)."
        )
    agent_raw = dict(raw.get("agent") or {})
    agent_type = agent_raw.get("type", "dqn")
    if not isinstance(agent_type, str):
        raise ConfigError(
            f"'agent.type' = {shorten(agent_type)}: it must be an agent name; "
            f"known agents: {', '.join(sorted(pm.names('agents')))}."
        )
    try:
        _, model = pm.get("agents", agent_type, field="agent.type")
    except PluginError as exc:
        raise ConfigError(str(exc)) from None
    errors = []
    if "memory" in model.model_fields and agent_raw.get("memory") is not None:
        # The memory's own registered settings model validates its section (plugins add fields).
        agent_raw["memory"] = validate_memory_settings(pm, agent_raw["memory"], field="agent.memory")

    # Each component slot (network, exploration, preprocessor ...) is validated by the settings
    # model its component's plugin registered.
    agent_raw = validate_agent_slots(pm, model, agent_raw)
    try:
        agent = model.model_validate(agent_raw)
    except ValidationError as exc:
        errors.append(format_validation_error(exc, "agent", agent_raw, model))
        agent = None
    env = train = None
    env_raw = dict(raw.get("env") or {})
    if env_raw.get("wrappers") is not None:
        # Each wrapper's own registered settings model validates its entry (plugins add wrappers).
        env_raw["wrappers"] = validate_wrappers(pm, env_raw["wrappers"], field="env.wrappers")
    try:
        env = EnvConfig.model_validate(env_raw)
    except ValidationError as exc:
        errors.append(format_validation_error(exc, "env", env_raw, EnvConfig))
    try:
        train = TrainConfig.model_validate(raw.get("train") or {})
    except ValidationError as exc:
        errors.append(format_validation_error(exc, "train", raw.get("train"), TrainConfig))
    multi_agent = None
    if raw.get("multi_agent") is not None:
        try:
            multi_agent = MultiAgentConfig.model_validate(raw["multi_agent"])
        except ValidationError as exc:
            errors.append(format_validation_error(exc, "multi_agent", raw["multi_agent"], MultiAgentConfig))
    if errors:
        raise ConfigError("Invalid config: " + "; ".join(errors) + ".")
    for kind, name, field in (
        ("backends", train.backend, "train.backend"),
        ("executors", train.executor, "train.executor"),
    ):
        try:
            pm.get(kind, name, field=field)
        except PluginError as exc:
            raise ConfigError(str(exc)) from None
    for name in train.loggers:
        try:
            check_logger_available(pm.get("loggers", name, field="train.loggers"))
        except PluginError as exc:
            raise ConfigError(str(exc)) from None

    validate_callbacks(pm, train.callbacks)
    _check_env_id(env.id)
    if multi_agent is not None and not is_pettingzoo_id(env.id):
        raise ConfigError(
            f"multi_agent maps the agents of a PettingZoo env to policies, but 'env.id' = '{env.id}' is a "
            f"single-agent gymnasium env. Name a PettingZoo env (e.g. env.id: pettingzoo:mpe2.simple_spread_v3) "
            f"or remove the multi_agent section."
        )
    # compared with the defaults, not by fields set: a stored config (save/load, --resume) has them all
    if multi_agent is not None and multi_agent.self_play != SelfPlayConfig() and not is_turn_based(env.id):
        raise ConfigError(
            f"multi_agent.self_play sets who plays the other seats of a turn-based game, but 'env.id' = '{env.id}' "
            f"is a Parallel env whose agents all act every step (each one by its own policy). Remove "
            f"multi_agent.self_play, or name a turn-based game (e.g. pettingzoo:pettingzoo.classic.tictactoe_v3)."
        )
    if multi_agent is not None and multi_agent.agent_id and is_turn_based(env.id):
        raise ConfigError(
            f"multi_agent.agent_id tells a policy which agent a row is, but 'env.id' = '{env.id}' is a turn-based "
            f"game, whose rows are games of one seat each and whose observations already give the seat's view. Set "
            f"multi_agent.agent_id: false, or map the seats to their own policies."
        )
    # Checks that need more than the agent section (e.g. PPO: a minibatch fits in a rollout of
    # n_steps x env.num_envs samples) are the agent config's own, in an optional validate_run;
    # each policy of a PettingZoo env is checked with the rows of its agents.
    if is_pettingzoo_id(env.id):
        agent_policy, configs = multi_agent_layout(pm, agent, env, multi_agent)
        runs = [
            (c, env.model_copy(update={"num_envs": env.num_envs * agent_policy.count(n)})) for n, c in configs.items()
        ]
        policy_names = list(configs)
    else:
        runs = [(agent, env)]
        policy_names = ["agent"]
    for policy_agent, policy_env in runs:
        validate_run = getattr(policy_agent, "validate_run", None)
        if callable(validate_run):
            validate_run(policy_env, train)
    executor = validate_executor_settings(pm, train.executor, raw.get("executor"))
    if is_pettingzoo_id(env.id) and not getattr(type(executor), "runs_several_policies", False):
        raise ConfigError(
            f"'train.executor' = '{train.executor}' does not run the policies of a multi-agent env yet, and "
            f"'env.id' = '{env.id}' is a PettingZoo env (its agents' rows are split among policies by a PolicySet, which this "
            f"executor does not run). Set train.executor to an installed executor that runs several policies: "
            f"{', '.join(_multi_policy_executors(pm))} (docs/multi_agent.md)."
        )
    # The same for the executor's settings (e.g. an executor that runs only some agents).
    # A policy that changes the agent section is checked too, with the rows of its agents (e.g.
    # ray_apex: its own memory must split into shards that hold its own batch).
    validate_executor_run = getattr(executor, "validate_run", None)
    if callable(validate_executor_run):
        validate_executor_run(agent, env, train)
        for name, (policy_agent, policy_env) in zip(policy_names, runs):
            if policy_agent is not agent:
                try:
                    validate_executor_run(policy_agent, policy_env, train)
                except ConfigError as exc:
                    raise ConfigError(
                        f"{exc} (policy '{name}': its agent settings are the agent section with "
                        f"multi_agent.policies.{name} applied)"
                    ) from None
    backend = validate_backend_settings(pm, train.backend, raw.get("backend"), device=train.device)
    return run_config_model(pm)(
        agent=agent, env=env, train=train, executor=executor, backend=backend, multi_agent=multi_agent
    )


def policy_agent_configs(plugin_manager, agent_config, multi_agent: MultiAgentConfig | None) -> dict[str, Any]:
    """``{policy name: agent config}``: ``agent_config`` with each policy's changes (``multi_agent.policies``)
    merged in and validated by the agent's model; ``{"shared": agent_config}`` without a multi_agent section.

    Raises:
        ConfigError: naming ``multi_agent.policies.NAME.field``, the bad value and the constraint.
    """
    multi_agent = multi_agent or MultiAgentConfig()
    model = type(agent_config)
    base = agent_config.model_dump(mode="json")
    out: dict[str, Any] = {}
    for name, changes in multi_agent.policies.items():
        if not changes:
            out[name] = agent_config
            continue
        field = f"multi_agent.policies.{name}"
        raw = deep_merge(base, changes)
        if "memory" in model.model_fields and raw.get("memory") is not None:
            # the memory's own registered model (a prioritized memory's fields), as for agent.memory
            raw["memory"] = validate_memory_settings(plugin_manager, raw["memory"], field=f"{field}.memory")
        raw = validate_agent_slots(plugin_manager, model, raw, prefix=field)
        try:
            out[name] = model.model_validate(raw)
        except ValidationError as exc:
            raise ConfigError("Invalid config: " + format_validation_error(exc, field, changes, model) + ".") from None
    return out


def multi_agent_layout(
    plugin_manager, agent_config, env: EnvConfig, multi_agent: MultiAgentConfig | None
) -> tuple[list[str], dict[str, Any]]:
    """``(policy of each agent of the PettingZoo env, in its possible_agents order; {policy: agent config})``.

    Raises:
        ConfigError: an agent no pattern maps (naming it), a policy no agent uses, or a bad
            policy section (:func:`policy_agent_configs`).
    """
    multi_agent = multi_agent or MultiAgentConfig()
    agents = pettingzoo_agents(env.id, env.kwargs)
    assigned = PolicyMapping(multi_agent.policy_mapping, list(multi_agent.policies)).assign(agents, env.id)
    return [assigned[a] for a in agents], policy_agent_configs(plugin_manager, agent_config, multi_agent)


def validate_backend_settings(
    plugin_manager, name: str, raw: Any, device: str | None = None, field: str = "backend"
) -> BackendSettings:
    """Validate a ``backend:`` section (and the form of ``device``) against backend ``name``'s model.

    ``raw`` may be None (every default) or a mapping; a backend registered without a settings
    model takes only an empty section. Never imports a lazily registered backend.

    Raises:
        ConfigError: ``name`` is unknown, ``device`` is not a device name of that backend, or one
            paragraph naming each bad field as ``backend.<field>`` with its value and the
            constraint (or the known fields).
    """

    try:
        _, model = backend_entry(plugin_manager.get("backends", name, field="train.backend"))
    except PluginError as exc:
        raise ConfigError(str(exc)) from None
    model = model or BackendSettings
    if device is not None:
        problem = model.device_problem(device)
        if problem:
            raise ConfigError(
                f"Invalid config: 'train.device' = {shorten(device)}: {problem} (train.backend '{name}')."
            )
    raw = _section_mapping(raw, BackendSettings, field, "backend", name)
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        known = f" (train.backend '{name}' has no settings)" if not model.model_fields else ""
        raise ConfigError(
            f"Invalid config: {format_validation_error(exc, field, raw, model)}. The '{field}' section holds the "
            f"settings of train.backend '{name}'{known}; after switching train.backend, remove or replace that section."
        ) from None


def _section_mapping(raw: Any, settings_class: type, field: str, kind: str, name: str) -> dict:
    """A plugin's settings section (``backend:`` / ``executor:``) as a mapping to validate:
    a settings object's fields, ``{}`` for None (every default), a mapping as it is.

    Raises:
        ConfigError: ``raw`` is anything else, naming ``field`` and ``train.<kind>``.
    """
    if isinstance(raw, settings_class):
        return raw.model_dump()
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(
            f"'{field}' = {shorten(raw)}: the {kind} section must be a mapping of the settings of "
            f"train.{kind} '{name}'."
        )
    return raw


def _multi_policy_executors(plugin_manager) -> list[str]:
    """The installed executors whose settings model says they run several policies (``local`` among
    them); their settings models are read, their executors are not imported."""
    names = []
    for name in sorted(plugin_manager.names("executors")):
        try:
            _, model = executor_entry(plugin_manager.get("executors", name))
        except PluginError:
            continue
        if getattr(model, "runs_several_policies", False):
            names.append(name)
    return names


def validate_executor_settings(plugin_manager, name: str, raw: Any, field: str = "executor") -> ExecutorSettings:
    """Validate an ``executor:`` section against the settings model the executor ``name`` registered.

    ``raw`` may be None (every default) or a mapping. Never imports a lazily registered executor.

    Raises:
        ConfigError: ``name`` is unknown, or one paragraph naming each bad field as
            ``executor.<field>`` with its value and the constraint (or the known fields).
    """

    try:
        _, model = executor_entry(plugin_manager.get("executors", name, field="train.executor"))
    except PluginError as exc:
        raise ConfigError(str(exc)) from None
    raw = _section_mapping(raw, ExecutorSettings, field, "executor", name)
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(
            f"Invalid config: {format_validation_error(exc, field, raw, model)}. The '{field}' section holds the "
            f"settings of train.executor '{name}'."
        ) from None


def _non_finite_values(value: Any, path: str):
    """Yield ``(path, value)`` for every NaN or infinite float in a raw config section."""
    import math

    if isinstance(value, float) and not math.isfinite(value):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _non_finite_values(v, f"{path}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _non_finite_values(v, f"{path}.{i}")


def _check_env_id(env_id: str) -> None:
    """Check that ``env.id`` names an environment gymnasium can make: a registered id,
    ``module:EnvId`` or ``module.path:ClassName`` (see :func:`rlgraph_core.envs.resolve_env_id`)."""

    resolve_env_id(env_id)


def load_config_file(path: str | Path) -> dict:
    """Read a YAML or JSON config file into a dict (errors name the file and the problem).

    Refused: a file over :data:`~rlgraph_core.config.limits.MAX_CONFIG_BYTES`, an empty file (it
    would silently train the defaults), a mapping with a duplicate key, and a document that
    expands beyond :data:`~rlgraph_core.config.limits.MAX_CONFIG_NODES` values (YAML aliases).
    """
    path = Path(path)
    if not path.is_file():
        import difflib

        close = difflib.get_close_matches(str(path), shipped_configs(), n=1)
        hint = f" Did you mean the shipped config '{close[0]}'?" if close else ""
        raise ConfigError(
            f"Config file '{path}' does not exist; pass a YAML or JSON file (see configs/) or the name of a shipped "
            f"config ({', '.join(shipped_configs())}).{hint}"
        )
    kind = "JSON" if path.suffix == ".json" else "YAML"
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"Config file '{path}' is {size:,} bytes; a config is a few kilobytes (at most {MAX_CONFIG_BYTES:,} "
            f"bytes are read). Keep large data out of the config (e.g. a file the environment reads)."
        )
    try:
        text = path.read_text()
        data = parse_json(text) if path.suffix == ".json" else parse_yaml(text)
    except (json.JSONDecodeError, yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Config file '{path}' is not valid {kind}: {shorten(str(exc), 300)}") from None
    except ConfigError as exc:
        raise ConfigError(f"Config file '{path}' has a {exc}.") from None
    if data is None:
        raise ConfigError(
            f"Config file '{path}' is empty (no settings, only comments or blank lines). An empty config would "
            f"silently train the built-in default (DQN on CartPole-v1); to do that on purpose run 'rlgraph "
            f"train' without a config, or write the sections agent, env and train."
        )
    if not isinstance(data, dict):
        raise ConfigError(
            f"Config file '{path}' holds a {type(data).__name__}, not a mapping with keys agent, env and train."
        )
    check_document(data, f"config file '{path}'")
    return data


def load_raw_config(source: str | Path | None = None, plugin_manager=None) -> dict:
    """The raw config a CLI argument or :func:`rlgraph_core.make` string names, as
    :func:`load_named_config` reads it (a file, an agent name or a shipped config); None means the
    default run (:data:`DEFAULT_CONFIG_NAME`)."""
    return load_named_config(str(source) if source is not None else DEFAULT_CONFIG_NAME, plugin_manager)


def resolve_config(source: str | Path | None = None, overrides: Sequence[str] = (), plugin_manager=None) -> RunConfig:
    """A validated run config: :func:`load_raw_config` of ``source``, then the ``key.path=value``
    ``overrides`` (``--set``), validated against ``plugin_manager``'s registry (default: the process's).

    The one config resolution of ``rlgraph train``/``config``/``graph``, ``rlgraph tune`` and the facade.
    """
    return validate_config(apply_overrides(load_raw_config(source, plugin_manager), list(overrides)), plugin_manager)


def _parse_override_value(item: str, value: str):
    """Parse an override's value as YAML; YAML 1.1 leaves ``1e-3`` a string, so numbers get a second try."""
    try:
        parsed = parse_yaml(value)
    except ConfigError as exc:
        raise ConfigError(f"Override '{shorten(item, 80)}' has a {exc}.") from None
    except yaml.YAMLError as exc:
        problem = str(exc).splitlines()[0]
        raise ConfigError(
            f"Override '{shorten(item, 80)}': the value is not valid YAML ({shorten(problem, 200)}); "
            f"quote strings, write lists as [a, b] and mappings as {{k: v}}."
        ) from None
    if isinstance(parsed, str) and parsed == value.strip():
        try:
            number = float(parsed)
        except ValueError:
            return parsed
        if parsed.strip().lower() in ("nan", "inf", "-inf", "+inf", "infinity"):
            return parsed  # keep words as words; YAML already has .nan/.inf for those
        return int(number) if number.is_integer() and "e" in parsed.lower() and "." not in parsed else number
    return parsed


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """Apply ``key.path=value`` overrides (values parsed as YAML: numbers, lists, null ...)."""
    import copy

    out = copy.deepcopy(raw)
    for item in overrides or []:
        shown = item if len(item) <= 80 else f"{item[:70]}... (cut)"
        if "=" not in item:
            raise ConfigError(f"Override '{shown}' must look like key.path=value, e.g. agent.memory.capacity=50000.")
        key, value = item.split("=", 1)
        parts = key.strip().split(".")
        if len(parts) > MAX_KEY_DEPTH:
            raise ConfigError(
                f"Override '{shown}': the key path has {len(parts)} parts; a config nests at most {MAX_KEY_DEPTH} "
                f"deep (e.g. agent.memory.capacity has 3). Check the key."
            )
        if not all(parts):
            raise ConfigError(f"Override '{shown}': the key path '{key.strip()[:80]}' has an empty part.")
        if parts[0] not in SECTIONS:
            raise ConfigError(
                f"Override '{shown}': the path must start with agent, env, train, executor, backend or multi_agent."
            )
        node = out
        for p in parts[:-1]:
            if not isinstance(node.get(p, {}), dict):
                raise ConfigError(f"Override '{shown}': '{p[:80]}' holds a value, not a section.")
            node = node.setdefault(p, {})
        node[parts[-1]] = _parse_override_value(item, value)
    return out


def deep_merge(base: dict, update: dict) -> dict:
    """Recursively merge ``update`` into a copy of ``base``."""
    import copy

    out = copy.deepcopy(base)
    for k, v in (update or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict) and k not in ("exploration", "learning_rate"):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out
