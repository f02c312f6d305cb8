"""The recurrent core: an LSTM or GRU layer whose state is data, not a hidden attribute.

``call(x, state, reset) -> (output, state)``: a sequence of features ``x`` ``[T, B, F]`` (time
major), the state at its start (a Dict space of its own, :attr:`RecurrentCore.state_space`:
``{h, c}`` for an LSTM, ``{h}`` for a GRU, each ``[B, units]``) and a reset mask ``[T, B]`` that
zeroes the state before every step where an episode starts; it returns the outputs
``[T, B, units]`` and the state after the last step. Acting is the same call with ``T = 1``.
An optional MLP encoder runs on every step's features first. The math is the backend
contract's ``lstm`` / ``gru`` op (each framework's fused kernel where it has one), with the
weight layout documented there: ``w_x [F, G * units]``, ``w_h [units, G * units]``, gate blocks
in torch's order (LSTM ``i, f, g, o``; GRU ``r, z, n``).

As a network slot (``agent.network: {type: lstm, ...}``) it is a stateful network
(:attr:`RecurrentSettings.stateful`): PPO trains it on sequences
(:mod:`rlgraph_core.agents.recurrent_ppo`); algorithms that cannot carry its state refuse it when
the config is validated.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from rlgraph_core.components.initializers import initialize
from rlgraph_core.components.network import MLP, NetworkSpec, SlotNetwork
from rlgraph_core.components.settings import NetworkSettings
from rlgraph_core.graph import api
from rlgraph_core.spaces import BoolBox, Dict, FloatBox, SpaceError

#: Gate blocks per cell type (the width of ``w_x`` and ``w_h`` is this times ``units``).
GATES = {"lstm": 4, "gru": 3}


class RecurrentSettings(NetworkSettings):
    """Settings of the recurrent core ``lstm`` / ``gru``.

    ``{type: lstm, units: 128, encoder: {hidden: [64]}, seq_len: 16}``: ``encoder`` is an MLP on
    each step's features before the cell (``hidden: []`` for none); ``head`` an MLP after it, one
    per output head of the algorithm (none by default); ``seq_len`` is the length of
    the sequences an algorithm trains the cell on (a rollout is cut into pieces of that many steps,
    each unrolled from the state stored at its start).
    """

    stateful: ClassVar[bool] = True

    type: Literal["lstm", "gru"] = "lstm"
    units: int = Field(128, gt=0, description="size of the state and of the output")
    encoder: NetworkSpec = Field(
        default_factory=lambda: NetworkSpec(hidden=[64]), description="MLP in front of the cell"
    )
    head: NetworkSpec = Field(
        default_factory=lambda: NetworkSpec(hidden=[]),
        description="MLP after the cell, one per output head of an algorithm (sb3-contrib's net_arch after its "
        "LSTM), e.g. {hidden: [64, 64], activation: tanh}; none by default",
    )
    initializer: str = Field("orthogonal", description="initializer of the input and recurrent weights")
    seq_len: int = Field(
        16, gt=0, description="steps per training sequence (back-propagation through time); divides agent.n_steps"
    )


class RecurrentCore(SlotNetwork):
    """An optional MLP encoder, then one LSTM or GRU layer (see the module docstring)."""

    def __init__(self, settings: RecurrentSettings, rng: np.random.Generator | None = None, name: str = "recurrent"):
        super().__init__(name)
        self.settings = settings
        self.cell = settings.type
        self.units = settings.units
        self.rng = np.random.default_rng(rng)
        self.encoder = MLP(settings.encoder, self.rng, name="encoder")
        self.add_components(self.encoder)
        self.weights: list = []

    @property
    def state_space(self) -> Dict:
        """The state between calls, per env: ``{h, c}`` (LSTM) or ``{h}`` (GRU), float ``[units]``."""
        keys = ("h", "c") if self.cell == "lstm" else ("h",)
        return Dict({k: FloatBox(shape=(self.units,)) for k in keys}).with_batch_rank()

    def initial_state(self, batch: int) -> dict[str, np.ndarray]:
        """Zeros of :attr:`state_space` for ``batch`` envs (what a reset sets)."""
        return {k: np.zeros((batch, self.units), np.float32) for k in self.state_space.keys()}

    def check_input_spaces(self, method, spaces):
        x, reset = spaces["x"], spaces["reset"]
        if not isinstance(x, FloatBox) or len(x.shape) != 1 or not x.has_time_rank:
            raise SpaceError(f"'{self.cell}' takes float features [T, B, F] (time rank, time major), got {x!r}.")
        if not isinstance(reset, (BoolBox, FloatBox)) or reset.shape != () or not reset.has_time_rank:
            raise SpaceError(f"'{self.cell}' takes a reset mask [T, B] (BoolBox() with time rank), got {reset!r}.")
        if set(spaces["state"].keys()) != set(self.state_space.keys()):
            raise SpaceError(f"'{self.cell}' takes a state {self.state_space!r}, got {spaces['state']!r}.")

    def create_variables(self, input_spaces):
        hidden = self.settings.encoder.hidden
        fan_in = hidden[-1] if hidden else int(input_spaces["x"].shape[0])
        width = GATES[self.cell] * self.units
        init = self.settings.initializer
        self._gain = 1.0 if init == "orthogonal" else None  # orthogonal's default gain sqrt(2) is for relu layers
        w_x = self.make_variable("w_x", initialize(init, self.rng, fan_in, width, self._gain))
        w_h = self.make_variable("w_h", initialize(init, self.rng, self.units, width, self._gain))
        if self.cell == "lstm":
            bias = np.zeros(width, np.float32)
            bias[self.units : 2 * self.units] = 1.0  # forget gate open at the start (keras' unit_forget_bias)
            self.weights = [w_x, w_h, self.make_variable("b", bias)]
        else:
            zeros = np.zeros(width, np.float32)
            self.weights = [w_x, w_h, self.make_variable("b_x", zeros), self.make_variable("b_h", zeros.copy())]

    @api
    def call(self, x, state, reset):
        """``(output [T, B, units], state)`` from features ``x [T, B, F]``, the state at the
        sequence start and the episode-start mask ``reset [T, B]``."""
        x = self.encoder.call(x)
        if self.cell == "lstm":
            y, h, c = self.ops.lstm(x, state["h"], state["c"], *self.weights, reset=reset)
            return y, {"h": h, "c": c}
        y, h = self.ops.gru(x, state["h"], *self.weights, reset=reset)
        return y, {"h": h}
