"""The run's own config sections: ``env`` (which environment, how many, which wrappers),
``train`` (backend, mode, executor, budget, evaluation, logging) and ``multi_agent`` (which
policies act for which agents of a PettingZoo env).

They sit beside :mod:`rlgraph_core.config.run` rather than in :mod:`rlgraph_core.config.common`
(the agents' vocabulary) because ``env.wrappers`` is validated through the plugin registry.
"""

from __future__ import annotations

import re
from typing import Literal, Optional

from pydantic import Field, SerializeAsAny, field_validator, model_validator

from rlgraph_core.config.common import StrictModel
from rlgraph_core.config.wrappers import validate_wrappers
from rlgraph_core.wrappers import WrapperSettings

__all__ = ["EnvConfig", "MultiAgentConfig", "SelfPlayConfig", "TrainConfig"]


class EnvConfig(StrictModel):
    """A gymnasium environment id, how many copies to step at once and how, and its wrappers."""

    id: str = "CartPole-v1"
    num_envs: int = Field(4, gt=0)
    vectorization: Literal["sync", "async", "envpool"] = Field(
        "sync",
        description="sync or async (gymnasium's vector envs), or envpool (C++ batch envs for Atari and MuJoCo; "
        'pip install "rlgraph-core[envpool]")',
    )
    kwargs: dict = Field(default_factory=dict, description="passed to gymnasium.make")
    allow_nonfinite_obs: bool = Field(
        False,
        description="accept NaN/inf in observations (for envs that leave unused dimensions at inf); "
        "rewards are always checked",
    )
    action_mask: Optional[str] = Field(
        None,
        description="where the env's legal-action mask is: a Dict observation key (PettingZoo classic: "
        "action_mask) or an env method written with () (sb3-contrib: action_masks()); null detects either "
        "(docs/masking.md)",
    )
    wrappers: list[SerializeAsAny[WrapperSettings]] = Field(
        default_factory=list,
        description="ordered list of {type: NAME, ...settings} applied to every env, innermost first "
        "(registry kind 'wrappers', e.g. minigrid_image, atari_preprocessing, frame_stack)",
    )

    @field_validator("wrappers", mode="before")
    @classmethod
    def _registered_wrappers(cls, v):
        """Raw entries are validated by the settings model registered for their ``type``."""
        if isinstance(v, (list, tuple)) and all(isinstance(e, WrapperSettings) for e in v):
            return list(v)
        return validate_wrappers(None, v)


#: The executors that record ``train.record_dataset`` (their driver sees every step the envs take).
RECORDING_EXECUTORS = ("local", "ray_sync", "ray_impala", "horovod")


class TrainConfig(StrictModel):
    """How a run is executed: backend, mode, executor, budget, evaluation and logging."""

    backend: str = "torch"
    mode: Literal["eager", "static", "auto"] = Field(
        "eager",
        description="eager (define-by-run), static (compiled), or auto: static for a run of at least "
        "train.static_from_timesteps env steps, eager for a shorter try (resolved when the config is validated)",
    )
    static_from_timesteps: int = Field(
        200_000,
        gt=0,
        description="with mode auto, the budget (total_timesteps) from which a run is compiled: static mode's "
        "first update compiles (ppo_atari: 162 s with an empty compile cache, 16 s from it), which a short try "
        "never wins back",
    )
    device: str = Field(
        "auto",
        description="auto (an accelerator when present, else the CPU), cpu, or a device of the backend "
        "(e.g. cuda:N); the backend's settings model checks the form, the backend that it exists",
    )
    num_threads: Optional[int] = Field(
        1, gt=0, description="CPU threads of the backend; 1 suits small networks, null keeps the framework default"
    )
    executor: str = "local"
    seed: int = 0
    total_timesteps: int = Field(100_000, gt=0)
    target_return: Optional[float] = Field(None, description="stop once mean eval return reaches it")
    eval_interval: int = Field(5_000, gt=0, description="env steps between evaluations")
    eval_episodes: int = Field(
        10,
        ge=0,
        description="greedy episodes per evaluation (every eval_interval, and once when the run ends); "
        "0 switches evaluation off",
    )
    log_interval: int = Field(2_000, gt=0, description="env steps between metric lines")
    checkpoint_interval: Optional[int] = Field(
        None, gt=0, description="env steps between periodic checkpoints; null = every eval_interval"
    )
    keep_checkpoints: int = Field(3, ge=1, description="periodic checkpoints kept (the newest)")
    loggers: list[str] = Field(
        default_factory=lambda: ["console", "jsonl"],
        description="metric loggers: console, jsonl, and with their extras tensorboard, wandb ('rlgraph plugins' lists them)",
    )
    histogram_interval: int = Field(
        10,
        ge=0,
        description="metric rows between weight histograms of loggers that draw them (tensorboard, wandb); 0 = never",
    )
    video_interval: Optional[int] = Field(
        None,
        gt=0,
        description="env steps between evaluation videos: one greedy episode streamed to videos/step_N.mp4 "
        "in the run folder (the render extra); null = none",
    )
    video_format: Literal["mp4", "gif"] = Field("mp4", description="the format of train.video_interval's videos")
    progress_bar: bool = True
    callbacks: list[dict] = Field(
        default_factory=list,
        description="callbacks by registry name with their settings, e.g. [{type: early_stopping, patience: 5}]",
    )

    record_dataset: Optional[str] = Field(
        None,
        description="record the episodes the run collects as a Minari dataset in this folder (a new or empty "
        'one; the offline extra: pip install "rlgraph-core[offline]"); the local, ray_sync, '
        "ray_impala and horovod executors record (horovod: rank r > 0 into PATH_rank{r}); null = none",
    )

    @model_validator(mode="after")
    def _recording_executor(self) -> "TrainConfig":
        """The executors that record datasets: those whose driver sees every step the envs take."""
        if self.record_dataset is not None and self.executor not in RECORDING_EXECUTORS:
            raise ValueError(
                f"'train.record_dataset' is recorded by the {', '.join(RECORDING_EXECUTORS)} executors only; "
                f"train.executor is '{self.executor}' (the offline executor steps no env; ray_apex's workers send "
                f"their transitions to replay shards, not whole episodes through the driver). Record with train.executor: "
                f"{' / '.join(RECORDING_EXECUTORS)}, or remove train.record_dataset"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _resolve_auto_mode(cls, data):
        """``mode: auto`` becomes eager or static here, from the budget, so everything after validation
        (backends, the stored run config, a resume) sees the mode the run really has."""
        if isinstance(data, dict) and data.get("mode") == "auto":
            budget = data.get("total_timesteps", cls.model_fields["total_timesteps"].default)
            threshold = data.get("static_from_timesteps", cls.model_fields["static_from_timesteps"].default)
            if isinstance(budget, int) and isinstance(threshold, int):
                data = {**data, "mode": "static" if budget >= threshold else "eager"}
        return data

    @model_validator(mode="after")
    def _target_needs_evaluation(self) -> "TrainConfig":
        """``target_return`` is judged by evaluations: it cannot be set with evaluation off."""
        if self.target_return is not None and self.eval_episodes == 0:
            raise ValueError(
                f"target_return = {self.target_return} is judged by evaluations, but eval_episodes = 0 switches "
                f"them off; set eval_episodes to 1 or more, or remove target_return"
            )
        return self

    @field_validator("device")
    @classmethod
    def _device_named(cls, v: str) -> str:
        """A device name is a non-empty word; its form is the backend's (see validate_config)."""
        if not v.strip():
            raise ValueError("the device name is empty; use auto, cpu or a device of the backend (e.g. cuda:0)")
        return v


#: A policy name: it names checkpoint entries (``NAME/...``) and metrics (``NAME/loss``).
_POLICY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")


#: Opponents by name (else ``module:callable``): see :class:`SelfPlayConfig`.
OPPONENT_NAMES = ("latest", "pool", "random")


class SelfPlayConfig(StrictModel):
    """Who plays the other seats of a turn-based game's rows (``multi_agent.self_play``; docs/multi_agent.md).

    ``opponent``: ``latest`` (the policy of that seat as it is now: self-play), ``pool`` (with
    ``latest_prob`` the latest, else a member of the pool: a frozen earlier copy of it or, with
    ``pool_random``, the random player), ``random`` (a uniformly random legal move) or
    ``module:callable`` (a scripted player ``(seat, obs, rows) -> actions``).
    ``eval_opponent`` is who evaluation plays against: ``random`` or ``module:callable``.
    """

    opponent: str = Field("latest", description="latest, pool, random, or module:callable")
    pool_size: int = Field(8, ge=1, description="pool: frozen copies kept per policy (the oldest leaves first)")
    snapshot_every: int = Field(10, ge=1, description="pool: a policy's updates between two of its frozen copies")
    latest_prob: float = Field(0.5, ge=0.0, le=1.0, description="pool: chance a game's opponent is the latest policy")
    pool_random: bool = Field(True, description="pool: the uniformly random legal player is a member of the pool")
    opponent_explore: bool = Field(True, description="policy opponents sample their moves (false: greedy)")
    eval_opponent: str = Field("random", description="evaluation's opponent: random or module:callable")

    @field_validator("opponent", "eval_opponent")
    @classmethod
    def _known_opponent(cls, v: str, info) -> str:
        """A known name or a ``module:callable`` (evaluation: no policy opponent, it measures against a fixed one)."""
        names = OPPONENT_NAMES if info.field_name == "opponent" else ("random",)
        if v in names or (":" in v and all(part.strip() for part in v.split(":", 1))):
            return v
        raise ValueError(f"'{v[:40]}' is not one of {list(names)} nor a 'module:callable' scripted player")


class MultiAgentConfig(StrictModel):
    """Several policies in one run: each an ordinary agent, acting for the agents mapped to it.

    ``policies`` holds each policy's changes to the ``agent`` section (``{}``: the ``agent``
    section as it is); every policy is of ``agent.type``. ``policy_mapping`` maps agent-name
    patterns (``fnmatch``: ``*``, ``agent_*``, ``adversary_?``) to policy names, first match wins:
    ``{"*": shared}`` is one shared policy, one exact name per policy independent policies.
    A PettingZoo env without this section trains one shared policy (``{shared: {}}``, ``{"*": shared}``).
    ``self_play`` (turn-based games only) says who plays the other seats of each row's game.
    """

    policies: dict[str, dict] = Field(
        default_factory=lambda: {"shared": {}},
        description="policy name -> changes to the agent section for that policy ({} keeps it as it is)",
    )
    policy_mapping: dict[str, str] = Field(
        default_factory=lambda: {"*": "shared"},
        description="agent-name pattern (fnmatch) -> policy name; the first matching pattern wins",
    )
    agent_id: bool = Field(
        default=False,
        description="Parallel envs: each row's observation starts with a one-hot of its agent's index "
        "(SuperSuit's agent_indicator), so a shared policy knows which agent it acts for",
    )
    self_play: SelfPlayConfig = Field(
        default_factory=SelfPlayConfig,
        description="turn-based games only: who plays the other seats (opponent pool) and evaluation's opponent",
    )

    @field_validator("policies")
    @classmethod
    def _named_policies(cls, v: dict) -> dict:
        """At least one policy; names usable in checkpoints and metrics; no policy changes the agent type."""
        if not v:
            raise ValueError("define at least one policy, e.g. {shared: {}}")
        for name, changes in v.items():
            if not _POLICY_NAME.match(name):
                raise ValueError(
                    f"the policy name '{name[:40]}' is not a word of letters, digits, '_' or '-' (starting with a "
                    f"letter or '_'); it names checkpoint entries and metrics"
                )
            if "type" in (changes or {}):
                raise ValueError(
                    f"policy '{name}' sets type; every policy is of agent.type (set it there), a policy changes "
                    f"only that agent's settings"
                )
        return v

    @model_validator(mode="after")
    def _mapped_to_known(self) -> "MultiAgentConfig":
        """Every pattern names a defined policy."""
        for pattern, name in self.policy_mapping.items():
            if name not in self.policies:
                raise ValueError(
                    f"policy_mapping maps '{pattern}' to '{name}', which policies does not define (it defines "
                    f"{list(self.policies)}); map it to one of those or add '{name}' to policies"
                )
        return self
