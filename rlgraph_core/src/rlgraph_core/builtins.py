"""rlgraph-core's own parts, registered through the same hooks as any third-party plugin."""

from rlgraph_core.agents.a2c import A2CAgent, A2CConfig
from rlgraph_core.agents.dqn import DQNAgent, DQNConfig
from rlgraph_core.agents.impala import ImpalaAgent, ImpalaConfig
from rlgraph_core.agents.ppo import PPOAgent, PPOConfig, PPOLoss
from rlgraph_core.agents.sac import SACAgent, SACConfig
from rlgraph_core.agents.slots import BUILTIN_SLOT_COMPONENTS
from rlgraph_core.callbacks import BUILTIN_CALLBACKS
from rlgraph_core.components.actor_critic import ActorCritic, RunningObsNormalizer
from rlgraph_core.components.cnn import CNN, CNNSettings
from rlgraph_core.components.dict_encoder import DictEncoder, DictEncoderSettings
from rlgraph_core.components.dqn_loss import DQNLoss
from rlgraph_core.components.exploration import EpsilonGreedy, EpsilonGreedySettings
from rlgraph_core.components.gae import GAE
from rlgraph_core.components.network import MLP, DenseLayer, NetworkSpec
from rlgraph_core.components.pg_losses import A2CLoss, ImpalaLoss
from rlgraph_core.components.preprocessors import BoxNormalizer
from rlgraph_core.components.q_head import QNetwork, QValueHead
from rlgraph_core.components.recurrent import RecurrentCore, RecurrentSettings
from rlgraph_core.components.sac_loss import SACLoss
from rlgraph_core.components.target_sync import TargetSync
from rlgraph_core.components.twin_q import ContinuousQNetwork, TwinQNetwork
from rlgraph_core.components.vtrace import VTrace
from rlgraph_core.execution.local import LocalExecutor
from rlgraph_core.execution.loggers import ConsoleLogger, JsonlLogger
from rlgraph_core.execution.settings import LocalExecutorSettings
from rlgraph_core.memories import PrioritizedReplay, ReplayMemory
from rlgraph_core.memories.settings import PrioritizedReplaySettings, ReplaySettings
from rlgraph_core.plugins.hookspecs import hookimpl
from rlgraph_core.wrappers import BUILTIN_WRAPPERS


@hookimpl
def rlgraph_agents():
    """The built-in agents with their config models."""
    return {
        "dqn": (DQNAgent, DQNConfig),
        "ppo": (PPOAgent, PPOConfig),
        "a2c": (A2CAgent, A2CConfig),
        "sac": (SACAgent, SACConfig),
        "impala": (ImpalaAgent, ImpalaConfig),
    }


@hookimpl
def rlgraph_components():
    """Built-in components that configs may name by ``type``; slot components with settings
    models (``mlp`` for network slots, ``epsilon_greedy`` for exploration) register them too."""
    return {
        "dense": DenseLayer,
        "q_head": QValueHead,
        "q_network": QNetwork,
        "dqn_loss": DQNLoss,
        "target_sync": TargetSync,
        "box_normalize": BoxNormalizer,
        "actor_critic": ActorCritic,
        "running_obs_normalizer": RunningObsNormalizer,
        **BUILTIN_SLOT_COMPONENTS,  # slot components by the names configs use (box_normalize, running_mean_std)
        "mlp": (MLP, NetworkSpec),
        "cnn": (CNN, CNNSettings),
        "dict_encoder": (DictEncoder, DictEncoderSettings),
        "lstm": (RecurrentCore, RecurrentSettings),
        "gru": (RecurrentCore, RecurrentSettings),
        "epsilon_greedy": (EpsilonGreedy, EpsilonGreedySettings),
        "gae": GAE,
        "ppo_loss": PPOLoss,
        "a2c_loss": A2CLoss,
        "vtrace": VTrace,
        "impala_loss": ImpalaLoss,
        "continuous_q_network": ContinuousQNetwork,
        "twin_q_network": TwinQNetwork,
        "sac_loss": SACLoss,
    }


@hookimpl
def rlgraph_memories():
    """Uniform and prioritized replay, with their settings models."""

    return {
        "replay": (ReplayMemory, ReplaySettings),
        "prioritized_replay": (PrioritizedReplay, PrioritizedReplaySettings),
    }


@hookimpl
def rlgraph_executors():
    """The single-process executor."""
    return {"local": (LocalExecutor, LocalExecutorSettings)}


@hookimpl
def rlgraph_loggers():
    """Console and JSON-lines metric loggers."""

    return {"console": ConsoleLogger, "jsonl": JsonlLogger}


@hookimpl
def rlgraph_callbacks():
    """Early stopping, stop on a reward threshold, and a checkpoint every N env steps."""
    return dict(BUILTIN_CALLBACKS)


@hookimpl
def rlgraph_wrappers():
    """Environment wrappers for ``env.wrappers``: adapters of gymnasium's and MiniGrid's own."""
    return dict(BUILTIN_WRAPPERS)
