"""The ``cnn`` network component against plain numpy, on every backend and mode.

The presets are built as configured (Nature: 32x8x8/4, 64x4x4/2, 64x3x3/1, dense 512; IMPALA:
residual stacks 16/32/32, dense 256) on the smallest images they take (36x36 for Nature's valid
convolutions, 12x12 for IMPALA), with uint8 pixels scaled inside the graph. The numpy reference
recomputes the network from the component's own weights with the numpy harness's ops, which
tests/core/test_conv_ops.py checks against a loop-by-loop reference.
"""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from rlgraph_core.components.cnn import CNN, CNNSettings, image_layout
from rlgraph_core.errors import BuildError
from rlgraph_core.spaces import FloatBox, IntBox
from rlgraph_core.testing import ComponentTest, NumpyOps, backend_params

rng = np.random.default_rng(5)

#: name -> (settings, observation space, batch of observations, features)
CASES = {
    "nature": (CNNSettings(preset="nature"), IntBox(0, 255, shape=(36, 36, 4), dtype=np.uint8), 512),
    "impala-channels-first": (CNNSettings(preset="impala"), IntBox(0, 255, shape=(3, 12, 12), dtype=np.uint8), 256),
    "custom-gray-float": (
        CNNSettings(
            preset="custom",
            conv=[{"filters": 3, "kernel": [3, 2], "stride": [2, 1], "padding": "same"}],
            residual_stacks=[4],
            residual_blocks=1,
            hidden=[5],
            activation="tanh",
        ),
        FloatBox(0.0, 1.0, shape=(9, 10)),
        5,
    ),
}
OBS = {
    name: (
        rng.integers(0, 256, (3, *space.shape)).astype(np.uint8)
        if isinstance(space, IntBox)
        else rng.random((3, *space.shape)).astype(np.float32)
    )
    for name, (_, space, _) in CASES.items()
}

NP = NumpyOps()


def np_cnn(w: dict, settings: CNNSettings, x: np.ndarray, scale: float) -> np.ndarray:
    """The CNN in numpy from its weights ``w`` (names relative to the component)."""
    act = lambda v: NP.activation(settings.activation, v)  # noqa: E731
    x = x.astype(np.float32) * np.float32(scale)
    layout = image_layout(x.shape[1:])
    x = x[..., None] if layout == "gray" else x.transpose(0, 2, 3, 1) if layout == "first" else x
    for i, c in enumerate(settings.conv):
        x = act(NP.conv2d(x, w[f"conv_{i}/W"], w[f"conv_{i}/b"], c.stride, c.padding))
    for i, _ in enumerate(settings.residual_stacks):
        p = f"stack_{i}/"
        x = NP.max_pool2d(NP.conv2d(x, w[p + "conv/W"], w[p + "conv/b"], 1, "same"), 3, 2, "same")
        for j in range(settings.residual_blocks):
            h = act(NP.conv2d(act(x), w[f"{p}res_{j}_conv_0/W"], w[f"{p}res_{j}_conv_0/b"], 1, "same"))
            x = x + NP.conv2d(h, w[f"{p}res_{j}_conv_1/W"], w[f"{p}res_{j}_conv_1/b"], 1, "same")
    if settings.residual_stacks:
        x = act(x)
    x = x.reshape(len(x), -1)
    for i, _ in enumerate(settings.hidden):
        x = act(x @ w[f"dense_{i}/W"] + w[f"dense_{i}/b"])
    return x


@pytest.fixture(params=backend_params())
def pair(request):
    """Every available ``(backend, mode)``."""
    return request.param


@pytest.mark.parametrize("case", list(CASES))
def test_cnn_matches_numpy(pair, case):
    settings, space, features = CASES[case]
    net = CNN.from_settings(settings, name="net", rng=np.random.default_rng(0))
    test = ComponentTest(net, {"call": {"x": space.with_batch_rank()}}, pair)
    out = test.call("call", OBS[case])
    assert out.shape == (3, features) and out.dtype == np.float32
    scale = 1 / 255 if isinstance(space, IntBox) else 1.0
    np.testing.assert_allclose(out, np_cnn(test.get_weights(), settings, OBS[case], scale), rtol=1e-4, atol=1e-5)


def test_preset_shapes_and_kernel_layout():
    """Kernels are HWIO; the same seed gives the same weights; parameter counts are the papers'."""
    test = ComponentTest(
        CNN(CASES["nature"][0], np.random.default_rng(0)),
        {"call": {"x": IntBox(0, 255, shape=(84, 84, 4), dtype=np.uint8).with_batch_rank()}},
        "numpy",
    )
    w = test.get_weights()
    assert [w[f"conv_{i}/W"].shape for i in range(3)] == [(8, 8, 4, 32), (4, 4, 32, 64), (3, 3, 64, 64)]
    assert w["dense_0/W"].shape == (7 * 7 * 64, 512)
    assert test.report.num_parameters == 1_684_128  # the Nature DQN trunk (Mnih et al. 2015) on 84x84x4
    again = ComponentTest(CNN(CASES["nature"][0], np.random.default_rng(0)), test.input_spaces, "numpy")
    for k, v in again.get_weights().items():
        np.testing.assert_array_equal(v, w[k], err_msg=k)
    impala = ComponentTest(
        CNN(CNNSettings(preset="impala"), np.random.default_rng(0)),
        {"call": {"x": IntBox(0, 255, shape=(64, 64, 3), dtype=np.uint8).with_batch_rank()}},
        "numpy",
    )
    names = impala.get_weights()
    assert names["stack_2/res_1_conv_1/W"].shape == (3, 3, 32, 32)
    assert names["dense_0/W"].shape == (8 * 8 * 32, 256)  # 64 -> 32 -> 16 -> 8


def test_image_layouts():
    assert image_layout((4, 84, 84)) == "first"
    assert image_layout((84, 84, 4)) == "last"
    assert image_layout((210, 160, 3)) == "last"
    assert image_layout((7, 7, 3)) == "last"
    assert image_layout((84, 84)) == "gray"
    assert image_layout((4, 84, 84), "last") == "last"


def test_settings_errors_name_the_field():
    with pytest.raises(ValidationError, match="conv.0.kernel"):
        CNNSettings(conv=[{"filters": 8, "kernel": 0}])
    with pytest.raises(ValidationError, match="not a CNN"):
        CNNSettings(preset="custom", hidden=[8])
    with pytest.raises(ValidationError, match="preset"):
        CNNSettings(preset="resnet")
    with pytest.raises(ValidationError, match="unknown activation"):
        CNNSettings(activation="gelu")
    assert CNNSettings(preset="impala", hidden=[64]).residual_stacks == [16, 32, 32]


def test_vector_and_too_small_inputs_are_refused_at_build():
    with pytest.raises(BuildError, match="vector observations take the 'mlp' network"):
        ComponentTest(CNN(CNNSettings()), {"call": {"x": FloatBox(shape=(4,)).with_batch_rank()}}, "numpy")
    with pytest.raises(BuildError, match="8-wide window does not fit an axis of 6"):
        ComponentTest(CNN(CNNSettings()), {"call": {"x": FloatBox(shape=(6, 6, 3)).with_batch_rank()}}, "numpy")
