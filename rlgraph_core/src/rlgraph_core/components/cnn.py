"""Convolutional networks for image observations: the network-slot component ``cnn``.

``{type: cnn, preset: nature}`` is the network of Mnih et al. (2015, "Human-level control through
deep reinforcement learning"): three convolutions 32x8x8 stride 4, 64x4x4 stride 2, 64x3x3
stride 1 (``valid`` padding, ReLU), then a dense layer of 512. ``{type: cnn, preset: impala}``
is the deep network of Espeholt et al. (2018, "IMPALA", figure 3): three stacks of 16, 32, 32
channels, each a 3x3 convolution, a 3x3 max-pool of stride 2 and two residual blocks
(ReLU, 3x3 conv, ReLU, 3x3 conv, plus the input), then ReLU and a dense layer of 256.

Any field set in the config overrides the preset's value (``{type: cnn, preset: nature,
hidden: [256]}``); ``preset: custom`` starts from nothing. Images are NHWC inside the graph and
kernels HWIO (:mod:`rlgraph_core.backend.contract`), so weights move between backends as they are.
Integer images (uint8 pixels) stay integers until the network: its first op casts them to
float32 and scales them (``scale``, 1/255 by default for integer images).
"""

from __future__ import annotations

from typing import Literal, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rlgraph_core.backend.conv import output_size, pair
from rlgraph_core.components.initializers import initialize
from rlgraph_core.components.network import ACTIVATIONS, ActivatedLayer, DenseLayer, SlotNetwork, check_activation
from rlgraph_core.components.settings import NetworkSettings
from rlgraph_core.graph import Component, api
from rlgraph_core.spaces import BoolBox, FloatBox, IntBox, SpaceError

__all__ = ["CNN", "CNNSettings", "ConvLayerSettings", "Conv2DLayer", "ResidualStack", "image_layout"]


class ConvLayerSettings(BaseModel):
    """One convolution of a ``cnn``: ``{filters: 32, kernel: 8, stride: 4, padding: valid}``."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    filters: int = Field(gt=0, description="output channels")
    kernel: int | tuple[int, int] = Field(description="kernel size: an int or [height, width]")
    stride: int | tuple[int, int] = Field(1, description="stride: an int or [height, width]")
    padding: Literal["same", "valid"] = Field("valid", description="'valid' (none) or 'same' (TensorFlow's)")

    @field_validator("kernel", "stride")
    @classmethod
    def _positive(cls, v, info):
        pair(v, info.field_name)  # raises a ValueError naming the field
        return v


#: The presets' values of the settings they fill: ``conv``, ``residual_stacks``, ``hidden``.
PRESETS: dict[str, dict] = {
    "nature": {
        "conv": [
            {"filters": 32, "kernel": 8, "stride": 4},
            {"filters": 64, "kernel": 4, "stride": 2},
            {"filters": 64, "kernel": 3, "stride": 1},
        ],
        "residual_stacks": [],
        "hidden": [512],
    },
    "impala": {"conv": [], "residual_stacks": [16, 32, 32], "hidden": [256]},
    "custom": {"conv": [], "residual_stacks": [], "hidden": []},
}


class CNNSettings(NetworkSettings):
    """Settings of the network-slot component ``cnn`` (see the module docstring for the presets).

    The preset gives ``conv``, ``residual_stacks`` and ``hidden`` unless the config sets them.
    The layers run in this order: ``conv`` (each followed by ``activation``), the IMPALA residual
    stacks (then ``activation``), flatten, the ``hidden`` dense layers (each with ``activation``).
    """

    type: Literal["cnn"] = "cnn"
    preset: Literal["nature", "impala", "custom"] = Field("nature", description="nature, impala or custom")
    conv: Optional[list[ConvLayerSettings]] = Field(None, description="plain convolutions (default: the preset's)")
    residual_stacks: Optional[list[int]] = Field(
        None, description="channels of IMPALA residual stacks (conv3x3, maxpool3x3/2, residual blocks)"
    )
    residual_blocks: int = Field(2, ge=0, description="residual blocks per stack")
    hidden: Optional[list[int]] = Field(None, description="dense layer sizes after the convolutions")
    activation: str = Field("relu", description=f"one of {', '.join(ACTIVATIONS)}")
    scale: Optional[float] = Field(
        None, gt=0, description="input scale inside the graph (default: 1/255 for integer images, 1 for floats)"
    )
    channels: Literal["auto", "last", "first"] = Field(
        "auto",
        description="where an image's channel axis is: last (HWC), first (CHW, e.g. gymnasium's frame stack), "
        "or auto (first when the first axis is at most 4 and smaller than the last)",
    )

    @field_validator("activation")
    @classmethod
    def _activation(cls, v):
        return check_activation(v)

    @field_validator("hidden", "residual_stacks")
    @classmethod
    def _positive(cls, v):
        if v is not None and any(h <= 0 for h in v):
            raise ValueError(f"sizes must be positive integers, got {v}")
        return v

    @model_validator(mode="after")
    def _fill_from_preset(self) -> "CNNSettings":
        preset = PRESETS[self.preset]
        for name in ("conv", "residual_stacks", "hidden"):
            if getattr(self, name) is None:
                value = preset[name]
                object.__setattr__(self, name, [ConvLayerSettings(**c) for c in value] if name == "conv" else value)
        if not self.conv and not self.residual_stacks:
            raise ValueError(
                f"preset '{self.preset}' with no 'conv' layers and no 'residual_stacks' is not a CNN; "
                f"set one of them or use preset nature or impala"
            )
        return self


def image_layout(shape: tuple[int, ...], channels: str = "auto") -> str:
    """``"last"`` (HWC), ``"first"`` (CHW) or ``"gray"`` (HW: one channel) for an image shape.

    ``auto`` reads a rank-3 shape as channels-first when its first axis is at most 4 and smaller
    than its last (a gymnasium frame stack ``(4, 84, 84)``), else channels-last (``(84, 84, 4)``,
    ``(210, 160, 3)``, MiniGrid's ``(7, 7, 3)``).
    """
    if len(shape) == 2:
        return "gray"
    if channels != "auto":
        return channels
    return "first" if shape[0] <= 4 and shape[0] < shape[-1] else "last"


def _conv_kernel(initializer: str, rng: np.random.Generator, kh: int, kw: int, cin: int, cout: int) -> np.ndarray:
    """An HWIO kernel: the initializer's ``[kh * kw * cin, cout]`` matrix (fan-in of a window)."""
    return initialize(initializer, rng, kh * kw * cin, cout).reshape(kh, kw, cin, cout)


class Conv2DLayer(ActivatedLayer):
    """``activation(conv2d(x, W, strides, padding) + b)`` on NHWC float images, ``W`` in HWIO.

    Args:
        filters: output channels.
        kernel: kernel size (int or ``(kh, kw)``).
        stride: stride (int or ``(sh, sw)``).
        padding: ``valid`` or ``same``.
        activation: activation name (see :data:`~rlgraph_core.components.network.ACTIVATIONS`).
        initializer: weight initializer name (fan-in ``kh * kw * in``); biases start at zero.
        rng: numpy generator of the initial weights.
    """

    def __init__(
        self,
        filters: int,
        kernel: int | tuple[int, int],
        stride: int | tuple[int, int] = 1,
        padding: str = "valid",
        activation: str = "linear",
        initializer: str = "lecun_uniform",
        rng: np.random.Generator | None = None,
        name: str = "conv",
    ):
        super().__init__(activation, initializer, rng, name)
        self.filters = int(filters)
        self.kernel = pair(kernel, "kernel")
        self.stride = pair(stride, "stride")
        self.padding = padding

    def check_input_spaces(self, method, spaces):
        x = spaces["x"]
        if not isinstance(x, FloatBox) or len(x.shape) != 3:
            raise SpaceError(f"expected float images [H, W, C], e.g. FloatBox(shape=(84, 84, 4)), got {x!r}.")
        for axis, k, s in zip(x.shape[:2], self.kernel, self.stride):
            output_size(axis, k, s, self.padding)  # a ValueError when the kernel does not fit
        if self.w is not None and x.shape[2] != self.channels_in:
            raise SpaceError(f"expected {self.channels_in} input channels as built, got {x!r}.")

    def create_variables(self, input_spaces):
        self.channels_in = int(input_spaces["x"].shape[2])
        w = _conv_kernel(self.initializer, self.rng, *self.kernel, self.channels_in, self.filters)
        self.w = self.make_variable("W", w)
        self.b = self.make_variable("b", np.zeros(self.filters, np.float32))

    @api
    def call(self, x):
        """Convolve a batch of images ``[B, H, W, C]`` -> ``[B, H', W', filters]``."""
        return self._activate(self.ops.conv2d(x, self.w, self.b, self.stride, self.padding))


class ResidualStack(Component):
    """One stack of the IMPALA network: conv 3x3, max-pool 3x3 stride 2 (``same``), then
    ``blocks`` residual blocks ``x + conv(act(conv(act(x))))`` (Espeholt et al. 2018, figure 3)."""

    def __init__(
        self,
        filters: int,
        blocks: int = 2,
        activation: str = "relu",
        initializer: str = "lecun_uniform",
        rng: np.random.Generator | None = None,
        name: str = "stack",
    ):
        super().__init__(name)
        rng = np.random.default_rng(rng)
        self.activation = activation
        self.conv = Conv2DLayer(filters, 3, 1, "same", "linear", initializer, rng, name="conv")
        self.blocks = [
            (
                Conv2DLayer(filters, 3, 1, "same", activation, initializer, rng, name=f"res_{i}_conv_0"),
                Conv2DLayer(filters, 3, 1, "same", "linear", initializer, rng, name=f"res_{i}_conv_1"),
            )
            for i in range(blocks)
        ]
        self.add_components(self.conv, *(c for block in self.blocks for c in block))

    @api
    def call(self, x):
        """``[B, H, W, C]`` -> ``[B, ceil(H / 2), ceil(W / 2), filters]``."""
        x = self.ops.max_pool2d(self.conv.call(x), 3, 2, "same")
        for first, second in self.blocks:
            x = x + second.call(first.call(self.ops.activation(self.activation, x)))
        return x


class CNN(SlotNetwork):
    """The network-slot component ``cnn``: image observations -> rank-1 features.

    ``call(x)`` takes a batch of images ``[B, H, W, C]`` (or ``[B, C, H, W]``, ``[B, H, W]``; see
    :func:`image_layout`) of any integer or float dtype, casts and scales them to float32 inside
    the graph, runs the convolutions, flattens (C order of NHWC) and runs the dense layers.

    Args:
        settings: validated :class:`CNNSettings`.
        rng: numpy generator of the initial weights (a seed gives the same weights on every backend).
        name: component name.
    """

    def __init__(self, settings: CNNSettings, rng: np.random.Generator | None = None, name: str = "cnn"):
        super().__init__(name)
        rng = np.random.default_rng(rng)
        self.settings = settings
        act, init = settings.activation, settings.initializer
        self.convs = [
            Conv2DLayer(c.filters, c.kernel, c.stride, c.padding, act, init, rng, name=f"conv_{i}")
            for i, c in enumerate(settings.conv or [])
        ]
        self.stacks = [
            ResidualStack(f, settings.residual_blocks, act, init, rng, name=f"stack_{i}")
            for i, f in enumerate(settings.residual_stacks or [])
        ]
        self.dense = [DenseLayer(h, act, init, rng, name=f"dense_{i}") for i, h in enumerate(settings.hidden or [])]
        self.add_components(*self.convs, *self.stacks, *self.dense)
        self.layout = "last"
        self.scale = 1.0
        self.integer_input = False

    def check_input_spaces(self, method, spaces):
        x = spaces["x"]
        if isinstance(x, BoolBox) or not isinstance(x, (FloatBox, IntBox)) or len(x.shape) not in (2, 3):
            raise SpaceError(
                f"the 'cnn' network takes images: a box of rank 3 ([H, W, C] or [C, H, W]) or 2 ([H, W]) "
                f"of integers (uint8 pixels) or floats, got {x!r}; vector observations take the 'mlp' network."
            )
        integer = isinstance(x, IntBox)
        if self.variables_created:
            # Built: every call must give the images the scale and layout were chosen for.
            if integer != self.integer_input or image_layout(tuple(x.shape), self.settings.channels) != self.layout:
                kind = "integer" if self.integer_input else "float"
                raise SpaceError(
                    f"this cnn was built for {kind} images of layout '{self.layout}' (its scale and axes "
                    f"follow from the first input), got {x!r}; give every call the observation space's dtype."
                )
            return
        self.integer_input = integer
        self.layout = image_layout(tuple(x.shape), self.settings.channels)
        self.scale = float(self.settings.scale if self.settings.scale is not None else (1 / 255 if integer else 1.0))

    @api
    def call(self, x):
        """Features ``[B, hidden[-1]]`` (or the flattened maps without dense layers) of images ``x``."""
        ops = self.ops
        x = ops.image_to_float(x, self.scale)
        if self.layout == "gray":
            x = ops.expand_dims(x, -1)
        elif self.layout == "first":
            x = ops.transpose(x, (0, 2, 3, 1))
        for conv in self.convs:
            x = conv.call(x)
        for stack in self.stacks:
            x = stack.call(x)
        if self.stacks:
            x = ops.activation(self.settings.activation, x)
        x = ops.flatten(x)
        for layer in self.dense:
            x = layer.call(x)
        return x
