"""The ``dict_encoder`` network component against plain numpy, on every backend and mode.

A Dict observation of a tiny uint8 image, a float vector, a scalar and a Discrete key: the image
goes through a CNN, the vectors through MLPs (the scalar as a 1-vector), the Discrete key is
one-hot encoded; the features are concatenated in key order and passed through a dense layer.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlgraph_core.components.dict_encoder import DictEncoder, DictEncoderSettings, route
from rlgraph_core.errors import BuildError
from rlgraph_core.spaces import Dict, Discrete, FloatBox, IntBox, MultiBinary
from rlgraph_core.testing import ComponentTest, NumpyOps, backend_params

NP = NumpyOps()
SETTINGS = DictEncoderSettings(
    image={"preset": "custom", "conv": [{"filters": 4, "kernel": 3, "stride": 2}], "hidden": [6]},
    vector={"hidden": [5], "activation": "tanh"},
    hidden=[7],
)
SPACE = Dict(
    pixels=IntBox(0, 255, shape=(9, 9, 2), dtype=np.uint8),
    pos=FloatBox(-1.0, 1.0, shape=(3,)),
    speed=FloatBox(shape=()),
    direction=Discrete(4, start=1),
)
rng = np.random.default_rng(9)
OBS = {
    "pixels": rng.integers(0, 256, (3, 9, 9, 2)).astype(np.uint8),
    "pos": rng.uniform(-1, 1, (3, 3)).astype(np.float32),
    "speed": rng.standard_normal(3).astype(np.float32),
    "direction": np.array([1, 4, 2], np.int64),
}


def np_encoder(w: dict, obs: dict) -> np.ndarray:
    """The encoder in numpy from its weights, keys in sorted order."""
    img = obs["pixels"].astype(np.float32) / 255
    img = np.maximum(NP.conv2d(img, w["image_pixels/conv_0/W"], w["image_pixels/conv_0/b"], 2, "valid"), 0)
    img = np.maximum(img.reshape(3, -1) @ w["image_pixels/dense_0/W"] + w["image_pixels/dense_0/b"], 0)
    pos = np.tanh(obs["pos"] @ w["vector_pos/dense_0/W"] + w["vector_pos/dense_0/b"])
    speed = np.tanh(obs["speed"][:, None] @ w["vector_speed/dense_0/W"] + w["vector_speed/dense_0/b"])
    direction = np.eye(4, dtype=np.float32)[obs["direction"] - 1]
    features = np.concatenate([direction, img, pos, speed], -1)  # keys sorted: direction, pixels, pos, speed
    return np.maximum(features @ w["dense_0/W"] + w["dense_0/b"], 0)


@pytest.fixture(params=backend_params())
def pair(request):
    """Every available ``(backend, mode)``."""
    return request.param


def test_dict_encoder_matches_numpy(pair):
    test = ComponentTest(
        DictEncoder(SETTINGS, np.random.default_rng(0)), {"call": {"x": SPACE.with_batch_rank()}}, pair
    )
    out = test.call("call", OBS)
    assert out.shape == (3, 7) and out.dtype == np.float32
    w = test.get_weights()
    assert w["dense_0/W"].shape == (4 + 6 + 5 + 5, 7)
    np.testing.assert_allclose(out, np_encoder(w, OBS), rtol=1e-4, atol=1e-5)


def test_routes_by_space():
    assert route(IntBox(0, 255, shape=(84, 84, 3), dtype=np.uint8)) == "image"
    assert route(FloatBox(shape=(5, 5))) == "image"
    assert route(FloatBox(shape=(4,))) == "vector"
    assert route(MultiBinary(3)) == "vector"
    assert route(Discrete(3)) == "discrete"
    assert route(Dict(a=FloatBox(shape=(1,)))) is None


def test_unsupported_keys_and_spaces_are_named():
    with pytest.raises(BuildError, match="key 'inner' is Dict"):
        ComponentTest(
            DictEncoder(SETTINGS), {"call": {"x": Dict(inner=Dict(a=FloatBox(shape=(1,)))).with_batch_rank()}}, "numpy"
        )
    with pytest.raises(BuildError, match="takes a Dict observation"):
        ComponentTest(DictEncoder(SETTINGS), {"call": {"x": FloatBox(shape=(3,)).with_batch_rank()}}, "numpy")
