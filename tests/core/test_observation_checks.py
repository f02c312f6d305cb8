"""Agents take any network that maps the observation space to features; a network that cannot
encode the env's observations is refused with one paragraph naming the one that can.

The checks run before anything is built, so the numpy harness (no autodiff) is enough here.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlgraph_core.agents.dqn import DQNAgent, DQNConfig
from rlgraph_core.agents.observations import check_observation_space, observation_kind, to_obs_array
from rlgraph_core.agents.ppo import PPOAgent, PPOConfig
from rlgraph_core.agents.sac import SACAgent, SACConfig
from rlgraph_core.components.cnn import CNNSettings
from rlgraph_core.components.dict_encoder import DictEncoderSettings
from rlgraph_core.components.network import NetworkSpec
from rlgraph_core.errors import ConfigError
from rlgraph_core.spaces import Dict, Discrete, FloatBox, IntBox, SpaceError, from_gym
from rlgraph_core.testing import NumpyBackend

IMAGE = IntBox(0, 255, shape=(84, 84, 4), dtype=np.uint8)
VECTOR = FloatBox(shape=(4,))
DICT = Dict(image=IMAGE, speed=VECTOR)


@pytest.mark.parametrize(
    "make,space,wanted",
    [
        (lambda: DQNAgent(DQNConfig(), IMAGE, Discrete(2), NumpyBackend()), IMAGE, "use the network 'cnn'"),
        (lambda: PPOAgent(PPOConfig(), DICT, Discrete(2), NumpyBackend()), DICT, "use the network 'dict_encoder'"),
        (
            lambda: PPOAgent(PPOConfig(network=CNNSettings()), VECTOR, Discrete(2), NumpyBackend()),
            VECTOR,
            "use the network 'mlp'",
        ),
    ],
)
def test_agents_name_the_network_that_would_encode_the_observations(make, space, wanted):
    with pytest.raises(ConfigError) as info:
        make()
    msg = str(info.value)
    assert wanted in msg and "\n" not in msg


@pytest.mark.parametrize(
    "config,space,wanted",
    [
        (SACConfig(), IMAGE, "set agent.encoder: {type: cnn, preset: nature}"),
        (SACConfig(), DICT, "set agent.encoder: {type: dict_encoder}"),
        (SACConfig(encoder=CNNSettings()), DICT, "use the network 'dict_encoder'"),
        (SACConfig(encoder={"type": "dict_encoder"}), IMAGE, "use the network 'cnn'"),
    ],
)
def test_sac_names_the_encoder_that_would_take_the_observations(config, space, wanted):
    """SAC reads float vectors unless an encoder maps the observations to features first."""
    with pytest.raises(ConfigError) as info:
        SACAgent(config, space, FloatBox(-1.0, 1.0, shape=(2,)), NumpyBackend())
    msg = str(info.value)
    assert wanted in msg and "\n" not in msg and "agent.encoder" in msg


def test_kinds_and_checks():
    assert [observation_kind(s) for s in (IMAGE, VECTOR, DICT, Discrete(3))] == ["image", "vector", "dict", None]
    check_observation_space(IMAGE, CNNSettings(), "DQN")
    check_observation_space(DICT, DictEncoderSettings(), "PPO")  # replay and rollouts store Dicts per key
    check_observation_space(VECTOR, NetworkSpec(), "PPO")
    with pytest.raises(ConfigError, match="integer or scalar observations need a float vector"):
        check_observation_space(Discrete(3), NetworkSpec(), "DQN")
    with pytest.raises(ConfigError, match="takes 'dict_encoder'-shaped"):
        check_observation_space(IMAGE, DictEncoderSettings(), "DQN")
    check_observation_space(IMAGE, type("Plugin", (), {"type": "my_net"})(), "DQN")  # plugins are not second-guessed


def test_observations_keep_their_dtype():
    frames = np.zeros((2, 84, 84, 4), np.uint8)
    assert to_obs_array(frames, IMAGE).dtype == np.uint8
    assert to_obs_array(np.zeros((2, 4)), VECTOR).dtype == np.float32
    out = to_obs_array({"image": frames, "speed": np.zeros((2, 4))}, DICT)
    assert out["image"].dtype == np.uint8 and out["speed"].dtype == np.float32
    assert to_obs_array(out, DICT) is out  # already converted: the same dict (observe() matches act()'s by identity)
    extra = {**out, "other": np.zeros(2)}
    assert to_obs_array(extra, DICT) is not extra and set(to_obs_array(extra, DICT)) == {"image", "speed"}


def test_a_text_space_names_the_image_wrapper():
    space = gym.spaces.Dict(image=gym.spaces.Box(0, 255, (7, 7, 3), np.uint8), mission=gym.spaces.Text(10))
    with pytest.raises(SpaceError, match=r"key\(s\) \['mission'\] hold text.*minigrid_image.*ImgObsWrapper"):
        from_gym(space)


@pytest.mark.parametrize(
    "space, wanted", [(IMAGE, "encoder: {type: cnn, preset: nature}"), (DICT, "encoder: {type: dict_encoder}")]
)
def test_a_recurrent_core_names_the_encoder_that_reads_the_observation(space, wanted):
    from rlgraph_core.components.recurrent import RecurrentSettings

    with pytest.raises(ConfigError) as info:
        check_observation_space(space, RecurrentSettings(type="gru"), "PPO")
    msg = str(info.value)
    assert "\n" not in msg and "'gru' with the encoder 'mlp'" in msg and f"agent.network.{wanted}" in msg
    # with that encoder the same observation is taken, and a vector is refused naming the mlp encoder
    encoder = {"type": wanted.split("type: ")[1].split(",")[0].rstrip("}")}
    check_observation_space(space, RecurrentSettings(type="gru", encoder=encoder), "PPO")
    with pytest.raises(ConfigError, match=r"agent.network.encoder: \{hidden: \[64\]\} \(an mlp\)"):
        check_observation_space(VECTOR, RecurrentSettings(type="gru", encoder=encoder), "PPO")
