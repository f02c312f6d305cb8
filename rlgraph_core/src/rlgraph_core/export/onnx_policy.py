"""ONNX export of an agent's greedy policy and its evaluation on onnxruntime alone.

The exported graph has one input, ``observation`` (float32 ``[batch, *obs_shape]``), and the
named outputs of the agent's :meth:`~rlgraph_core.agents.base.Agent.policy_outputs`: ``action``
(what ``act(obs, explore=False)`` returns: int64 for discrete actions, float32 for boxes) plus
``q_values`` (DQN), ``logits`` / ``mean`` and ``value`` (PPO, A2C, IMPALA), ``mean`` (SAC, before
tanh). An agent whose observations hold a legal-action mask (docs/masking.md) takes it as a second
input, ``action_mask`` (float32 ``[batch, n]``, non-zero where legal), and ``observation`` is then the
observation's other key (its name is in the metadata, ``rlgraph.observation_key``); the
policy's ``action`` is legal and its ``logits`` / ``q_values`` are the masked ones. Its metadata holds the env id and kwargs, the agent type and the whole run config
(``rlgraph.*`` keys), so ``rlgraph evaluate policy.onnx`` needs no ``--env``.

A recurrent policy (``network: {type: lstm | gru}``) is exported as one step: its state is extra
inputs ``state.<key>`` (float32 ``[batch, units]``; ``pi_h, pi_c, vf_h, vf_c`` for separate LSTM
cores) and ``episode_start`` (bool ``[batch]``: the state is zeroed there first), and extra outputs
``next_state.<key>``, which the caller feeds back at the next step (:meth:`OnnxPolicy.predict`
does); the keys are listed in the metadata, ``rlgraph.state``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from rlgraph_core.assemble import assemble
from rlgraph_core.checkpoint import read_meta
from rlgraph_core.components.masks import MASK_KEY
from rlgraph_core.config.run import validate_config
from rlgraph_core.config.sections import EnvConfig
from rlgraph_core.errors import RLGraphError
from rlgraph_core.execution.out_dir import check_out_file
from rlgraph_core.export.tracing import ExportBackend, ExportError, OnnxGraph
from rlgraph_core.integrations import missing_extra
from rlgraph_core.multi_agent import is_pettingzoo_id
from rlgraph_core.plugins import hookimpl
from rlgraph_core.plugins.manager import PluginManager


def _need(module: str, what: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing_extra(what, module, "onnx", exc) from None


def export_agent(agent, config_dict: dict, out: str | Path, metadata: dict[str, str] | None = None) -> Path:
    """Trace ``agent`` (built on :class:`~rlgraph_core.export.tracing.ExportBackend`) into ``out``;
    ``metadata``: more ``rlgraph.*`` entries (a multi-agent run's policy name and agents)."""

    onnx = _need("onnx", "ONNX export")
    names = {id(v): k for k, v in agent.variables().items()}
    graph = OnnxGraph(names)
    obs, observation_key = _inputs(graph, agent)
    state = _state_inputs(graph, agent)
    try:
        outputs = agent.policy_outputs(obs) if state is None else agent.policy_outputs(obs, *state)
    except NotImplementedError as exc:
        raise ExportError(str(exc)) from None
    env = config_dict.get("env", {})
    metadata = {
        **(metadata or {}),
        "rlgraph.format": "1",
        "rlgraph.agent": str(config_dict.get("agent", {}).get("type", type(agent).__name__)),
        "rlgraph.env_id": str(env.get("id", "")),
        "rlgraph.env_kwargs": json.dumps(env.get("kwargs") or {}),
        "rlgraph.config": json.dumps(config_dict, default=str),
        "rlgraph.outputs": ",".join(outputs),
    }
    if observation_key is not None:
        metadata["rlgraph.observation_key"] = observation_key
    if state is not None:
        metadata["rlgraph.state"] = ",".join(state[0])
    doc = f"greedy policy of a {metadata['rlgraph.agent']} agent (rlgraph)"
    if "rlgraph.policy" in metadata:
        doc = f"greedy policy '{metadata['rlgraph.policy']}' of a multi-agent {metadata['rlgraph.agent']} run (rlgraph)"
    model = graph.model(outputs, metadata, doc=doc)
    onnx.checker.check_model(model, full_check=True)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        onnx.save(model, str(out))
    except OSError as exc:  # what check_out_file could not foresee (the disk filled up meanwhile)
        raise RLGraphError(
            f"'{out}' could not be written ({exc.strerror or exc}); export to a writable path."
        ) from None
    return out


def _inputs(graph, agent):
    """``(the observation the policy is traced with, the observation key of a masked agent or None)``."""

    layout = getattr(agent, "mask", None)
    if layout is None:
        return graph.input("observation", np.float32, ["batch", *agent.observation_space.shape]), None
    if layout.single_key is None:
        raise ExportError(
            f"This agent's observation holds a legal-action mask beside several other keys "
            f"({', '.join(layout.policy_space.keys())}); ONNX export takes one observation array and the mask. "
            f"Export a policy whose observation is {{'observation': ..., '{MASK_KEY}': ...}}."
        )
    obs = graph.input("observation", np.float32, ["batch", *layout.policy_space.shape])
    mask = graph.input(MASK_KEY, np.float32, ["batch", layout.mask_size])
    return {layout.single_key: obs, MASK_KEY: mask}, layout.single_key


def _state_inputs(graph, agent):
    """``(state {key: input}, episode_start input)`` of a recurrent agent, or None (feed-forward)."""
    space = getattr(agent, "state_space", None)
    if space is None or agent.initial_state(1) is None:
        return None
    state = {key: graph.input(f"state.{key}", np.float32, ["batch", *sub.shape]) for key, sub in space.items()}
    return state, graph.input("episode_start", np.bool_, ["batch"])


class _ExportBackendPlugin:
    """Registers :class:`~rlgraph_core.export.tracing.ExportBackend` as backend ``export`` in a
    private plugin manager (never in the user's: it cannot train)."""

    @staticmethod
    def rlgraph_backends():
        """``{"export": ExportBackend}``."""

        return {"export": ExportBackend}


def policy_file(out: str | Path, policy: str) -> Path:
    """Where :func:`export_checkpoint` writes policy ``policy`` of a multi-agent run exported to ``out``:
    the policy's name before the suffix (``model.onnx`` -> ``model.shared.onnx``)."""
    out = Path(out)
    return out.with_name(f"{out.stem}.{policy}{out.suffix or '.onnx'}")


def export_checkpoint(checkpoint: str | Path, out: str | Path) -> list[Path]:
    """Export the greedy policies of ``checkpoint``: a single-agent run's to ``out``
    (:func:`export_onnx`), a multi-agent run's one file per policy (:func:`policy_file`)."""
    _, stored = read_meta(checkpoint)
    if is_pettingzoo_id((stored.get("env") or {}).get("id")):
        return list(export_policies(checkpoint, out).values())
    return [export_onnx(checkpoint, out)]


def export_onnx(checkpoint: str | Path, out: str | Path) -> Path:
    """Export the greedy policy of the agent in ``checkpoint`` (written by any backend) to ``out``.

    The agent is rebuilt from the checkpoint's agent and env sections on the tracing backend (so
    neither the backend that trained it nor its executor or loggers need be installed), its
    weights loaded, and its ``policy_outputs`` traced (see :mod:`rlgraph_core.export.tracing`).
    A multi-agent run's checkpoint is exported per policy by :func:`export_policies`.
    """

    _, stored = read_meta(checkpoint)
    env_id = (stored.get("env") or {}).get("id")
    if is_pettingzoo_id(env_id):
        raise RLGraphError(
            f"'{checkpoint}' is a checkpoint of a multi-agent run ({env_id}): its policies are exported one file "
            f"each by export_policies(checkpoint, out) ('rlgraph export' does so), not into one file."
        )
    agent, _ = _export_build(checkpoint, stored, out)
    return export_agent(agent, stored, out)


def export_policies(checkpoint: str | Path, out: str | Path) -> dict[str, Path]:
    """Export every policy of a multi-agent run's ``checkpoint``, one ONNX file each (:func:`policy_file`).

    Each file is the policy's own graph, as :func:`export_onnx` writes a single agent's: it takes
    the observation of one of its agents (its own length where its agents observe shorter vectors;
    with ``multi_agent.agent_id``, the one-hot of the agent first) and, for masked games, the
    ``action_mask``. Its metadata names the policy (``rlgraph.policy``) and the env agents mapped to
    it (``rlgraph.policy_agents``, JSON). ``{policy: path}``.
    """
    _, stored = read_meta(checkpoint)
    agent, names = _export_build(checkpoint, stored, out)
    for name in agent.policies:
        check_out_file(policy_file(out, name))
    paths: dict[str, Path] = {}
    for name, policy in agent.policies.items():
        agents = [a for a, p in zip(names, agent.agent_policy) if p == name]
        metadata = {"rlgraph.policy": name, "rlgraph.policy_agents": json.dumps(agents)}
        paths[name] = export_agent(policy, stored, policy_file(out, name), metadata)
    return paths


def _export_build(checkpoint: str | Path, stored: dict, out: str | Path) -> tuple[Any, list[str]]:
    """The checkpoint's agent (a multi-agent run's PolicySet) rebuilt on the tracing backend, its
    weights loaded, and the env's agents in row order (a multi-agent run's; else none)."""
    _need("onnx", "ONNX export")
    check_out_file(out)
    pm = PluginManager()
    plugin = _ExportBackendPlugin()
    plugin.rlgraph_backends = hookimpl(_ExportBackendPlugin.rlgraph_backends)
    pm.register(plugin, "rlgraph-core", name="rlgraph-export")
    train = stored.get("train") or {}
    raw = {
        "agent": stored.get("agent") or {},
        "env": stored.get("env") or {},
        "train": {"backend": "export", "seed": train.get("seed", 0), "loggers": [], "num_threads": None},
    }
    if stored.get("multi_agent") is not None:
        raw["multi_agent"] = stored["multi_agent"]
    # The run's executor where it is installed: an agent may be valid under one executor only (bc
    # learns from a dataset, under the offline executor, whose dataset the export never opens).
    executor = train.get("executor")
    if executor is not None and executor in pm.names("executors"):
        raw["train"]["executor"] = executor
        raw["executor"] = stored.get("executor") or {}
    config = validate_config(raw, pm)
    assembly = assemble(config, pm)
    env = assembly.make_eval_env()
    try:
        # The build runs the graph on zeros in numpy (e.g. log(0) of zero sampling noise): harmless here.
        with np.errstate(all="ignore"):
            # a multi-agent run's evaluation env is a vector env of one copy: its rows' spaces
            spaces = [
                getattr(env, f"single_{k}", None) or getattr(env, k) for k in ("observation_space", "action_space")
            ]
            agent = assembly.make_agent(*spaces, with_memory=False)
        # a multi-agent env's agents in row order (one copy), as the policy set maps them
        names = env.row_agents()[: len(agent.agent_policy)] if hasattr(env, "row_agents") else []
    finally:
        env.close()
    agent.load(checkpoint, for_training=False)
    return agent, names


class OnnxPolicy:
    """An exported policy on onnxruntime: ``policy(obs_batch) -> actions`` (and every output by name).

    A recurrent policy (:attr:`state_keys` not empty) carries its state from call to call of
    ``policy(obs_batch)``, reset by :meth:`start_episode` (what ``evaluate_policy`` calls at each
    episode start); :meth:`predict` takes and returns the state explicitly instead.
    Imports onnxruntime and numpy only.
    """

    def __init__(self, path: str | Path):
        ort = _need("onnxruntime", "Running an exported ONNX policy")
        self.path = Path(path)
        if not self.path.is_file():
            raise RLGraphError(f"'{path}' is not a file; pass an .onnx file written by 'rlgraph export'.")
        try:
            self.session = ort.InferenceSession(str(self.path), providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types for bad files
            raise RLGraphError(
                f"'{path}' could not be loaded as an ONNX model ({type(exc).__name__}: {str(exc)[:200]}); "
                f"pass an .onnx file written by 'rlgraph export'."
            ) from None
        self.metadata = dict(self.session.get_modelmeta().custom_metadata_map)
        self.output_names = [o.name for o in self.session.get_outputs()]
        if "action" not in self.output_names:
            raise RLGraphError(
                f"'{path}' has no output named 'action' (outputs: {', '.join(self.output_names)}); "
                f"pass an .onnx file written by 'rlgraph export'."
            )
        #: a recurrent policy's state keys (inputs ``state.<key>``, outputs ``next_state.<key>``); [] if none
        self.state_keys = [k for k in (self.metadata.get("rlgraph.state") or "").split(",") if k]
        self._widths = {
            i.name[len("state.") :]: i.shape[-1] for i in self.session.get_inputs() if i.name.startswith("state.")
        }
        self._state: dict[str, np.ndarray] | None = None

    def initial_state(self, batch: int) -> dict[str, np.ndarray] | None:
        """Zeros of the state of ``batch`` envs (a recurrent policy's), or None."""
        if not self.state_keys:
            return None
        return {k: np.zeros((batch, int(self._widths[k])), np.float32) for k in self.state_keys}

    def start_episode(self) -> None:
        """The next ``policy(obs_batch)`` starts fresh episodes (a recurrent policy's state is reset)."""
        self._state = None

    def check_env(self, env, env_id: str) -> None:
        """An RLGraphError when ``env``'s observations or actions do not fit the policy (e.g. the
        policy of a CartPole run evaluated with ``--env Pendulum-v1``)."""
        import gymnasium as gym

        trained_on = f"trained on {self.env_id}" if self.env_id else "of another env"
        want = tuple(self.session.get_inputs()[0].shape[1:])
        space = env.observation_space
        key = self.metadata.get("rlgraph.observation_key")  # a masked policy's observation, beside the mask
        if key is not None and isinstance(space, gym.spaces.Dict) and key in space.spaces:
            space = space[key]
        got = tuple(getattr(space, "shape", None) or ())
        if want and all(isinstance(d, int) for d in want) and int(np.prod(got or (1,))) != int(np.prod(want)):
            raise RLGraphError(
                f"--env {env_id}: its observations have shape {got}, but the policy '{self.path}' ({trained_on}) "
                f"takes observations of shape {want}. Evaluate it on an env with that observation space"
                + (f" (its own: --env {self.env_id}, or leave --env out)." if self.env_id else ".")
            )
        integer = self.session.get_outputs()[self.output_names.index("action")].type == "tensor(int64)"
        if integer != isinstance(env.action_space, gym.spaces.Discrete):
            kind = "discrete" if integer else "continuous"
            raise RLGraphError(
                f"--env {env_id}: its action space {env.action_space} does not fit the {kind} actions of the policy "
                f"'{self.path}' ({trained_on}). Evaluate it on an env with {kind} actions"
                + (f" (its own: --env {self.env_id}, or leave --env out)." if self.env_id else ".")
            )

    def _feeds(self, obs) -> dict[str, np.ndarray]:
        """The session's inputs for a batch of observations (a masked policy's: a dict with the
        observation key and ``action_mask``, as the env gives them)."""
        key = self.metadata.get("rlgraph.observation_key")
        if key is None:
            return {"observation": np.asarray(obs, np.float32)}
        if not isinstance(obs, dict) or key not in obs or "action_mask" not in obs:
            raise RLGraphError(
                f"'{self.path}' is a masked policy: pass the observation as a dict with '{key}' and 'action_mask' "
                f"(as the env gives it)."
            )
        return {
            "observation": np.asarray(obs[key], np.float32),
            "action_mask": np.asarray(obs["action_mask"], np.float32),
        }

    def outputs(self, obs, state=None, episode_start=None) -> dict[str, np.ndarray]:
        """Every named output for a batch of observations (a recurrent policy's from ``state``,
        zeroed where ``episode_start``; None: fresh episodes everywhere)."""
        feeds = self._feeds(obs)
        if self.state_keys:
            n = len(feeds["observation"])
            if state is None:
                state, episode_start = self.initial_state(n), np.ones(n, bool)
            elif episode_start is None:
                episode_start = np.zeros(n, bool)
            missing = sorted(set(self.state_keys) - set(state))
            if missing:
                raise RLGraphError(
                    f"'{self.path}' is a recurrent policy whose state has the keys {', '.join(self.state_keys)}; the "
                    f"state passed lacks {', '.join(missing)}. Pass the state the previous step returned (or None)."
                )
            feeds.update({f"state.{k}": np.asarray(state[k], np.float32) for k in self.state_keys})
            feeds["episode_start"] = np.asarray(episode_start, bool).reshape(n)
        values = self.session.run(None, feeds)
        return dict(zip(self.output_names, values))

    def predict(self, obs, state=None, episode_start=None):
        """``(greedy actions, next state)`` for a batch of observations, as ``rl.load(...).predict``
        gives them (the state is None for a feed-forward policy)."""
        out = self.outputs(obs, state, episode_start)
        next_state = {k: out[f"next_state.{k}"] for k in self.state_keys} or None
        return out["action"], next_state

    def __call__(self, obs) -> np.ndarray:
        """Greedy actions for a batch of observations (a recurrent policy's state carried from the
        previous call, since :meth:`start_episode`)."""
        if not self.state_keys:
            return self.session.run(["action"], self._feeds(obs))[0]
        actions, self._state = self.predict(obs, self._state)  # state None: every episode starts
        return actions

    @property
    def env_id(self) -> str | None:
        """The env id the policy was trained on (from the file's metadata), or None."""
        return self.metadata.get("rlgraph.env_id") or None

    @property
    def env_kwargs(self) -> dict:
        """The env kwargs the policy was trained with."""
        return json.loads(self.metadata.get("rlgraph.env_kwargs") or "{}")

    def env_config(self, env_id: str) -> EnvConfig:
        """One copy of the env to evaluate on ``env_id``: for the policy's own env id, the run's env
        section (kwargs, ``env.wrappers``, action mask; the caller applies the wrappers' evaluation
        form), else ``env_id`` alone. A file written before the section was stored gives the kwargs."""
        if env_id != self.env_id:
            return EnvConfig(id=env_id, num_envs=1)
        stored = (json.loads(self.metadata.get("rlgraph.config") or "{}") or {}).get("env") or {}
        section = {**stored, "id": env_id, "num_envs": 1, "vectorization": "sync"}
        section.setdefault("kwargs", self.env_kwargs)
        return EnvConfig.model_validate(section)
