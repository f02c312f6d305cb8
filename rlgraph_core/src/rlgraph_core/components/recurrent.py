"""The recurrent core: an LSTM or GRU layer whose state is data, not a hidden attribute.

``call(x, state, reset) -> (output, state)``: a sequence of features ``x`` ``[T, B, F]`` (time
major), the state at its start (a Dict space of its own, :attr:`RecurrentCore.state_space`:
``{h, c}`` for an LSTM, ``{h}`` for a GRU, each ``[B, units]``) and a reset mask ``[T, B]`` that
zeroes the state before every step where an episode starts; it returns the outputs
``[T, B, units]`` and the state after the last step. Acting is the same call with ``T = 1``.
An encoder runs on every step's observation first: an MLP on float vectors (the default), a
``cnn`` on images or a ``dict_encoder`` on Dict observations (``encoder: {type: cnn, preset:
impala}``, the same components and settings as the feed-forward network slot); a ``cnn`` or
``dict_encoder`` runs once on all ``T * B`` steps of a sequence (the time axis folded into the
batch, uint8 pixels cast inside the graph) and its features are split back into ``[T, B, F]``
for the cell. The math of the cell is the backend
contract's ``lstm`` / ``gru`` op (each framework's fused kernel where it has one), with the
weight layout documented there: ``w_x [F, G * units]``, ``w_h [units, G * units]``, gate blocks
in torch's order (LSTM ``i, f, g, o``; GRU ``r, z, n``).

As a network slot (``agent.network: {type: lstm, ...}``) it is a stateful network
(:attr:`RecurrentSettings.stateful`): PPO trains it on sequences
(:mod:`rlgraph_core.agents.recurrent_ppo`); algorithms that cannot carry its state refuse it when
the config is validated.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Union

import numpy as np
from pydantic import Field, field_validator

from rlgraph_core.components.cnn import CNN, CNNSettings
from rlgraph_core.components.dict_encoder import DictEncoder, DictEncoderSettings
from rlgraph_core.components.initializers import initialize
from rlgraph_core.components.network import MLP, NetworkSpec, SlotNetwork
from rlgraph_core.components.settings import NetworkSettings
from rlgraph_core.graph import api
from rlgraph_core.spaces import BoolBox, Dict, FloatBox, SpaceError

#: The encoders a recurrent core can put in front of its cell, by ``type``.
EncoderSettings = Annotated[Union[NetworkSpec, CNNSettings, DictEncoderSettings], Field(discriminator="type")]

#: Gate blocks per cell type (the width of ``w_x`` and ``w_h`` is this times ``units``).
GATES = {"lstm": 4, "gru": 3}


class RecurrentSettings(NetworkSettings):
    """Settings of the recurrent core ``lstm`` / ``gru``.

    ``{type: lstm, units: 128, encoder: {hidden: [64]}, seq_len: 16}``: ``encoder`` runs on each
    step's observation before the cell: an MLP (``{hidden: [64]}``, ``hidden: []`` for none), a
    ``cnn`` for images (``{type: cnn, preset: nature}``, or ``encoder: cnn``) or a
    ``dict_encoder`` for Dict observations, with their network-slot settings; ``head`` an MLP after it, one
    per output head of the algorithm (none by default); ``seq_len`` is the length of
    the sequences an algorithm trains the cell on (a rollout is cut into pieces of that many steps,
    each unrolled from the state stored at its start).
    """

    stateful: ClassVar[bool] = True

    type: Literal["lstm", "gru"] = "lstm"
    units: int = Field(128, gt=0, description="size of the state and of the output")
    encoder: EncoderSettings = Field(
        default_factory=lambda: NetworkSpec(hidden=[64]),
        description="in front of the cell: an mlp ({hidden: [64]}, the default type), a cnn for images "
        "({type: cnn, preset: nature | impala}) or a dict_encoder for Dict observations",
    )
    head: NetworkSpec = Field(
        default_factory=lambda: NetworkSpec(hidden=[]),
        description="MLP after the cell, one per output head of an algorithm (sb3-contrib's net_arch after its "
        "LSTM), e.g. {hidden: [64, 64], activation: tanh}; none by default",
    )
    initializer: str = Field(
        "orthogonal",
        description="initializer of the input and recurrent weights (torch_linear: PyTorch's nn.LSTM / nn.GRU "
        "default, every weight and bias uniform in +-1/sqrt(units), no forget-gate bias)",
    )
    seq_len: int = Field(
        16, gt=0, description="steps per training sequence (back-propagation through time); divides agent.n_steps"
    )

    @field_validator("encoder", mode="before")
    @classmethod
    def _encoder_shorthand(cls, v: Any) -> Any:
        """``encoder: cnn`` is ``{type: cnn}``; a mapping without ``type`` is an ``mlp``'s settings."""
        if isinstance(v, str):
            return {"type": v}
        if isinstance(v, dict) and "type" not in v:
            return {**v, "type": "mlp"}
        return v


class RecurrentCore(SlotNetwork):
    """An encoder (MLP, CNN or Dict encoder), then one LSTM or GRU layer (see the module docstring).

    With an MLP encoder the cell's weights are made when the core's input spaces are known, before
    the MLP's (the order the initial weights are drawn in for a seed); with a ``cnn`` or
    ``dict_encoder`` on the first (build) call, once the encoder has given the width of its features.
    """

    def __init__(self, settings: RecurrentSettings, rng: np.random.Generator | None = None, name: str = "recurrent"):
        super().__init__(name)
        self.settings = settings
        self.cell_type = settings.type
        self.units = settings.units
        self.rng = np.random.default_rng(rng)
        encoder_class = {CNNSettings: CNN, DictEncoderSettings: DictEncoder}.get(type(settings.encoder), MLP)
        self.encoder: SlotNetwork = encoder_class.from_settings(settings.encoder, name="encoder", rng=self.rng)
        #: whether the encoder runs on steps with the time axis folded into the batch (an MLP runs on [T, B, F])
        self.folds_time = encoder_class is not MLP
        self.add_components(self.encoder)
        self.weights: list = []

    @property
    def state_space(self) -> Dict:
        """The state between calls, per env: ``{h, c}`` (LSTM) or ``{h}`` (GRU), float ``[units]``."""
        keys = ("h", "c") if self.cell_type == "lstm" else ("h",)
        return Dict({k: FloatBox(shape=(self.units,)) for k in keys}).with_batch_rank()

    def initial_state(self, batch: int) -> dict[str, np.ndarray]:
        """Zeros of :attr:`state_space` for ``batch`` envs (what a reset sets)."""
        return {k: np.zeros((batch, self.units), np.float32) for k in self.state_space.keys()}

    def check_input_spaces(self, method, spaces):
        x, reset, cell = spaces["x"], spaces["reset"], self.cell_type
        if not self.folds_time and (not isinstance(x, FloatBox) or len(x.shape) != 1 or not x.has_time_rank):
            raise SpaceError(
                f"'{cell}' with an mlp encoder takes float features [T, B, F] (time rank, time major), got {x!r}; "
                f"images take encoder: {{type: cnn}}, Dict observations encoder: {{type: dict_encoder}}."
            )
        if not x.has_time_rank:
            raise SpaceError(f"'{cell}' takes sequences [T, B, ...] (time rank, time major), got {x!r}.")
        if not isinstance(reset, (BoolBox, FloatBox)) or reset.shape != () or not reset.has_time_rank:
            raise SpaceError(f"'{cell}' takes a reset mask [T, B] (BoolBox() with time rank), got {reset!r}.")
        if set(spaces["state"].keys()) != set(self.state_space.keys()):
            raise SpaceError(f"'{cell}' takes a state {self.state_space!r}, got {spaces['state']!r}.")

    def create_variables(self, input_spaces):
        enc = self.settings.encoder
        if isinstance(enc, NetworkSpec):  # else on the first call, from the encoder's output (class docstring)
            self._create_cell(enc.hidden[-1] if enc.hidden else int(input_spaces["x"].shape[0]))

    def _create_cell(self, fan_in: int) -> None:
        width = GATES[self.cell_type] * self.units
        init = self.settings.initializer
        if init == "torch_linear":  # PyTorch's default for the cell (nn.LSTM / nn.GRU), not nn.Linear's
            self._create_torch_default_cell(fan_in, width)
            return
        self._gain = 1.0 if init == "orthogonal" else None  # orthogonal's default gain sqrt(2) is for relu layers
        w_x = self.make_variable("w_x", initialize(init, self.rng, fan_in, width, self._gain))
        w_h = self.make_variable("w_h", initialize(init, self.rng, self.units, width, self._gain))
        if self.cell_type == "lstm":
            bias = np.zeros(width, np.float32)
            bias[self.units : 2 * self.units] = 1.0  # forget gate open at the start (keras' unit_forget_bias)
            self.weights = [w_x, w_h, self.make_variable("b", bias)]
        else:
            zeros = np.zeros(width, np.float32)
            self.weights = [w_x, w_h, self.make_variable("b_x", zeros), self.make_variable("b_h", zeros.copy())]

    def _create_torch_default_cell(self, fan_in: int, width: int) -> None:
        """``nn.LSTM`` / ``nn.GRU``'s own start: every weight and bias U(-1/sqrt(units), 1/sqrt(units))
        whatever the input width, no forget-gate bias of 1; torch's two LSTM biases (b_ih + b_hh) are
        one ``b`` here, so it is their sum."""
        k = 1.0 / np.sqrt(self.units)

        def draw(*shape: int) -> np.ndarray:
            return self.rng.uniform(-k, k, size=shape).astype(np.float32)

        w_x = self.make_variable("w_x", draw(fan_in, width))
        w_h = self.make_variable("w_h", draw(self.units, width))
        if self.cell_type == "lstm":
            self.weights = [w_x, w_h, self.make_variable("b", draw(width) + draw(width))]
        else:
            self.weights = [w_x, w_h, self.make_variable("b_x", draw(width)), self.make_variable("b_h", draw(width))]

    @api
    def call(self, x, state, reset):
        """``(output [T, B, units], state)`` from observations ``x [T, B, ...]`` (a dict of them for a
        Dict observation), the state at the sequence start and the episode-start mask ``reset [T, B]``."""
        if not self.folds_time:
            return self.cell(self.encoder.call(x), state, reset)
        ops, space = self.ops, self.input_spaces["call"]["x"]
        # one batch of T * B steps for the encoder; shapes from the space, so a traced graph needs no dims
        if isinstance(space, Dict):
            folded = {key: ops.reshape(x[key], [-1, *sub.shape]) for key, sub in space.items()}
        else:
            folded = ops.reshape(x, [-1, *space.shape])
        folded = self.keep_space(folded, space.with_time_rank(False))
        features = self.encoder.call(folded)
        if not self.weights:  # the build's call: the cell's input width is known now
            self._create_cell(int(features.shape[-1]))
        return self.cell(ops.split_leading(features, reset), state, reset)

    def cell(self, x, state, reset):
        """``(output [T, B, units], state)`` of the LSTM/GRU cell on encoded features ``x [T, B, F]``."""
        if self.cell_type == "lstm":
            y, h, c = self.ops.lstm(x, state["h"], state["c"], *self.weights, reset=reset)
            return y, {"h": h, "c": c}
        y, h = self.ops.gru(x, state["h"], *self.weights, reset=reset)
        return y, {"h": h}
