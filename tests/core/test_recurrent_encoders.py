"""A ``cnn`` or ``dict_encoder`` in front of the recurrent core, against plain numpy, on every backend and mode.

Sequences of uint8 images (``[T, B, H, W, C]``) and of Dict observations (an image, a vector, a
scalar and a ``Discrete`` key) go through the encoder with the time axis folded into the batch,
then through the LSTM/GRU cell with episode starts inside the sequence: the outputs and states
equal numpy's (the encoder recomputed step by step from the component's weights, then the
reference cell), and two calls of 2 steps equal one call of 4.
"""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from rlgraph_core.components.cnn import CNNSettings
from rlgraph_core.components.dict_encoder import DictEncoderSettings
from rlgraph_core.components.network import NetworkSpec
from rlgraph_core.components.recurrent import RecurrentCore, RecurrentSettings
from rlgraph_core.errors import BuildError
from rlgraph_core.spaces import BoolBox, Dict, Discrete, FloatBox, IntBox
from rlgraph_core.testing import ComponentTest, NumpyOps, backend_params
from rlgraph_core.testing.recurrent_reference import reference_gru, reference_lstm

NP = NumpyOps()
SEQ = dict(flag=True, time_major=True)
T, B = 4, 3
rng = np.random.default_rng(11)
RESET = np.zeros((T, B), bool)
RESET[0, :] = RESET[2, 1] = True

CNN_ENCODER = {
    "type": "cnn",
    "preset": "custom",
    "conv": [{"filters": 4, "kernel": 3, "stride": 2}],
    "hidden": [6],
}
IMAGES = rng.integers(0, 256, (T, B, 9, 9, 2)).astype(np.uint8)
DICT_SPACE = Dict(
    pixels=IntBox(0, 255, shape=(9, 9, 2), dtype=np.uint8),
    pos=FloatBox(-1.0, 1.0, shape=(3,)),
    speed=FloatBox(shape=()),
    direction=Discrete(4, start=1),
)
DICT_OBS = {
    "pixels": IMAGES,
    "pos": rng.uniform(-1, 1, (T, B, 3)).astype(np.float32),
    "speed": rng.standard_normal((T, B)).astype(np.float32),
    "direction": rng.integers(1, 5, (T, B)).astype(np.int64),
}


def np_image_features(w: dict, prefix: str, images: np.ndarray) -> np.ndarray:
    """The custom CNN of :data:`CNN_ENCODER` on ``[N, 9, 9, 2]`` uint8 images, in numpy."""
    x = images.astype(np.float32) / 255
    x = np.maximum(NP.conv2d(x, w[f"{prefix}conv_0/W"], w[f"{prefix}conv_0/b"], 2, "valid"), 0)
    return np.maximum(x.reshape(len(x), -1) @ w[f"{prefix}dense_0/W"] + w[f"{prefix}dense_0/b"], 0)


def np_dict_features(w: dict, obs: dict) -> np.ndarray:
    """The dict encoder on one step's observations ``{key: [N, ...]}``, keys in sorted order."""
    p = "encoder/"
    img = np_image_features(w, p + "image_pixels/", obs["pixels"])
    pos = np.tanh(obs["pos"] @ w[p + "vector_pos/dense_0/W"] + w[p + "vector_pos/dense_0/b"])
    speed = np.tanh(obs["speed"][:, None] @ w[p + "vector_speed/dense_0/W"] + w[p + "vector_speed/dense_0/b"])
    direction = np.eye(4, dtype=np.float32)[obs["direction"] - 1]
    return np.concatenate([direction, img, pos, speed], -1)


def sequence_spaces(core: RecurrentCore, obs_space) -> dict:
    return {
        "call": {
            "x": obs_space.with_batch_rank().with_time_rank(**SEQ),
            "state": core.state_space,
            "reset": BoolBox().with_batch_rank().with_time_rank(**SEQ),
        }
    }


@pytest.fixture(params=backend_params())
def pair(request):
    """Every available ``(backend, mode)``."""
    return request.param


def check_against_reference(test, cell: str, obs, features: np.ndarray, units: int) -> None:
    """The core's outputs and states for ``obs`` equal the reference cell on the numpy ``features``."""
    w = test.get_weights()
    order = ["h", "c"] if cell == "lstm" else ["h"]
    names = ["w_x", "w_h", "b"] if cell == "lstm" else ["w_x", "w_h", "b_x", "b_h"]
    state = {k: rng.standard_normal((B, units)).astype(np.float32) for k in order}
    ref = reference_lstm if cell == "lstm" else reference_gru
    y_ref, *state_ref = ref(features, *(state[k] for k in order), *(w[n] for n in names), RESET)

    y, out = test.call("call", obs, state, RESET)
    assert y.shape == (T, B, units) and set(out) == set(state)
    np.testing.assert_allclose(y, y_ref, rtol=1e-4, atol=1e-5)
    for key, value in zip(order, state_ref):
        np.testing.assert_allclose(out[key], value, rtol=1e-4, atol=1e-5)

    # the state carries everything: two calls of 2 steps give what one call of 4 gave
    first = {k: v[:2] for k, v in obs.items()} if isinstance(obs, dict) else obs[:2]
    rest = {k: v[2:] for k, v in obs.items()} if isinstance(obs, dict) else obs[2:]
    y1, mid = test.call("call", first, state, RESET[:2])
    y2, end = test.call("call", rest, mid, RESET[2:])
    np.testing.assert_allclose(np.concatenate([y1, y2]), y, rtol=1e-5, atol=1e-6)
    for key in state:
        np.testing.assert_allclose(end[key], out[key], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_cnn_encoder_then_cell_matches_numpy(pair, cell):
    core = RecurrentCore(RecurrentSettings(type=cell, units=5, encoder=CNN_ENCODER), np.random.default_rng(0))
    space = IntBox(0, 255, shape=(9, 9, 2), dtype=np.uint8)
    test = ComponentTest(core, sequence_spaces(core, space), pair)
    w = test.get_weights()
    assert w["w_x"].shape == (6, 4 * 5 if cell == "lstm" else 3 * 5)  # the cell reads the CNN's 6 features
    features = np_image_features(w, "encoder/", IMAGES.reshape(T * B, 9, 9, 2)).reshape(T, B, 6)
    check_against_reference(test, cell, IMAGES, features, 5)


def test_dict_encoder_then_cell_matches_numpy(pair):
    encoder = {
        "type": "dict_encoder",
        "image": {k: v for k, v in CNN_ENCODER.items() if k != "type"},
        "vector": {"hidden": [5], "activation": "tanh"},
    }
    core = RecurrentCore(RecurrentSettings(type="gru", units=4, encoder=encoder), np.random.default_rng(1))
    test = ComponentTest(core, sequence_spaces(core, DICT_SPACE), pair)
    w = test.get_weights()
    # the Discrete key is one-hot (4 wide) as in the feed-forward dict_encoder: its space survives the folding
    assert w["w_x"].shape == (4 + 6 + 5 + 5, 12)
    flat = {k: v.reshape(T * B, *v.shape[2:]) for k, v in DICT_OBS.items()}
    features = np_dict_features(w, flat).reshape(T, B, -1)
    check_against_reference(test, "gru", DICT_OBS, features, 4)


def test_encoder_settings_forms():
    assert isinstance(RecurrentSettings(encoder="cnn").encoder, CNNSettings)
    assert RecurrentSettings(encoder={"type": "cnn", "preset": "impala"}).encoder.residual_stacks == [16, 32, 32]
    assert isinstance(RecurrentSettings(encoder={"type": "dict_encoder"}).encoder, DictEncoderSettings)
    default = RecurrentSettings(encoder={"hidden": [8]}).encoder  # no type: an MLP, as before
    assert isinstance(default, NetworkSpec) and default.hidden == [8]
    with pytest.raises(ValidationError, match="'mlp', 'cnn', 'dict_encoder'"):
        RecurrentSettings(encoder={"type": "lstm"})


def test_mlp_encoder_on_images_names_the_cnn_encoder():
    core = RecurrentCore(RecurrentSettings(units=3))
    space = IntBox(0, 255, shape=(9, 9, 2), dtype=np.uint8)
    with pytest.raises(BuildError, match=r"images take encoder: \{type: cnn\}"):
        ComponentTest(core, sequence_spaces(core, space), ("numpy", "eager"))
