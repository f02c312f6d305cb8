"""The jax backend: arrays, variables (cells), ops, jitted functions and training steps."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from rlgraph_core.backend import Backend, FusedLoop, canonical_array, parse_device
from rlgraph_core.errors import ConfigError
from rlgraph_jax.loop import JaxFusedLoop
from rlgraph_jax.ops import JaxOps, dtype_of, int_dtype
from rlgraph_jax.optim import JaxTrainStep, new_guard
from rlgraph_jax.state import CellRegistry, JaxVariable, StatefulFunction, swapped, track_reads, unwrap_tree


def _resolve_device(requested: str | None) -> jax.Device:
    """Map a config device name to a ``jax.Device``.

    ``auto`` is JAX's default device (its first accelerator when one is present, else the CPU);
    ``cpu``; ``gpu[:N]`` / ``cuda[:N]`` a GPU JAX sees.

    Raises:
        ConfigError: an unknown name, or a GPU JAX does not see.
    """
    index = parse_device(requested, "jax", "auto (JAX's default device), cpu, gpu, gpu:N, cuda or cuda:N")
    if index == "auto":
        return jax.devices()[0]
    if index == "cpu":
        return jax.devices("cpu")[0]
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if index >= len(gpus):
        raise ConfigError(
            f"Device '{requested}' was requested but JAX sees {len(gpus)} GPU(s) (backend "
            f"'{jax.default_backend()}'); use device=cpu or auto, or install a CUDA build of jaxlib."
        )
    return gpus[index]


class JaxBackend(Backend):
    """JAX: eager (op by op on ``jax.numpy``) or static (``jax.jit``; fused rounds as ``lax.scan``).

    Variables are :class:`~rlgraph_jax.state.JaxVariable` cells whose arrays the backend swaps
    (see :mod:`rlgraph_jax.state`): every compiled program takes the values of the cells it reads
    and returns the new values of those it assigns, so components keep their handles and
    assignments persist.

    JAX's process-wide ``jax_enable_x64`` switch is left as it is (off by default): integer
    tensors are then int32 inside programs and int64 at the numpy boundary.

    Args:
        mode: ``"eager"`` or ``"static"``.
        device: ``"auto"``, ``"cpu"``, ``"gpu[:N]"`` or ``"cuda[:N]"``.
        seed: unused beyond the base class (randomness is drawn host-side by the agents, and
            weights are initialised in numpy).
        settings: the config's validated ``backend:`` section
            (:class:`~rlgraph_jax.settings.JaxSettings`): ``enable_x64`` turns JAX's process-wide
            x64 switch on; ``jit_inference=False`` runs inference functions op by op in static mode.
    """

    name = "jax"

    def __init__(self, mode: str = "eager", device: str = "auto", seed: int | None = None, settings: Any = None):
        super().__init__(mode, device, seed)
        self.jit_inference = True if settings is None else bool(settings.jit_inference)
        if settings is not None and settings.enable_x64:
            jax.config.update("jax_enable_x64", True)  # process-wide, as the setting's description says
        self._device = _resolve_device(device)
        self._default = self._device == jax.devices()[0]
        self._ops = JaxOps(None if self._default else self._device)
        self._cells = CellRegistry()
        #: the fused loops' non-finite guard ``[ok, loss, norm]``, shared by the train steps (the
        #: first cell, so that it never changes the cell count programs are traced for)
        self._guard_reset = self._put(np.array([1.0, 0.0, 0.0], np.float32))
        self.loop_guard = self._cells.add(new_guard(self._guard_reset))

    # --- tensors and variables -------------------------------------------------------------
    @property
    def ops(self) -> JaxOps:
        """The neutral ops namespace on jax.numpy."""
        return self._ops

    @property
    def device(self) -> str:
        """``"cpu"`` or ``"gpu:N"``."""
        return "cpu" if self._device.platform == "cpu" else f"gpu:{self._device.id}"

    def _put(self, arr) -> jax.Array:
        out = jnp.asarray(arr)
        return out if self._default else jax.device_put(out, self._device)

    def to_tensor(self, value, dtype: str | None = None):
        """numpy / Python scalar -> array on the device (float32, int64 stand-in, bool; uint8 kept)."""
        if isinstance(value, JaxVariable):
            value = value.value
        if isinstance(value, jax.Array):
            return value if dtype is None else value.astype(dtype_of(dtype))
        if isinstance(value, dict):  # a Dict observation (a legal-action mask's too): one array per key
            return {k: self.to_tensor(v, dtype) for k, v in value.items()}
        arr = np.asarray(value)
        arr = canonical_array(arr, int_dtype()) if dtype is None else arr.astype(dtype_of(dtype), copy=False)
        return self._put(arr)

    def to_numpy(self, tensor) -> np.ndarray:
        """Array or variable -> a numpy copy (integers as int64, the contract's dtype)."""
        arr = np.array(unwrap_tree(tensor))
        if arr.dtype.kind == "i" and arr.dtype != np.int64:
            arr = arr.astype(np.int64)
        return arr

    def variable(self, name: str, value: np.ndarray, trainable: bool = True) -> JaxVariable:
        """A :class:`JaxVariable` cell holding ``value`` (floats as float32), registered here."""
        arr = canonical_array(np.array(value, copy=True), int_dtype())
        return self._cells.add(JaxVariable(self._put(arr), name, trainable))

    def is_trainable(self, variable: Any) -> bool:
        """True for a variable made with ``trainable=True``."""
        return isinstance(variable, JaxVariable) and variable.trainable

    def assign_numpy(self, variable: JaxVariable, value: np.ndarray) -> None:
        """Swap ``variable``'s array for ``value`` (cast to the variable's dtype)."""
        variable.value = self._put(np.asarray(value, dtype=variable.value.dtype))

    # --- computation -----------------------------------------------------------------------
    def function(self, fn: Callable) -> Callable:
        """Eager (or ``jit_inference=False``): ``fn`` itself. Static: ``jax.jit`` over ``fn`` and the backend's cells.

        Pass arrays, not Python numbers, for values that change between calls (epsilon ...):
        a Python number is a weakly typed input and retraces nothing, but a Python ``bool``
        or string used in control flow is compiled into the program.
        """
        if self.mode == "static" and self.jit_inference:
            return StatefulFunction(self._cells, fn)
        return fn

    def train_step(self, loss_fn: Callable, variables: Sequence[Any], optimizer: dict) -> JaxTrainStep:
        """A training step (see :class:`~rlgraph_jax.optim.JaxTrainStep`): one jit program in static mode."""
        return JaxTrainStep(
            self._cells, loss_fn, variables, optimizer, static=self.mode == "static", guard=self.loop_guard
        )

    @property
    def fuses_loops(self) -> bool:
        """True in static mode: :meth:`fused_loop` runs a whole update round as one program."""
        return self.mode == "static"

    def fused_loop(self, body: Callable[..., Sequence[Any]]) -> FusedLoop:
        """Static mode: a :class:`~rlgraph_jax.loop.JaxFusedLoop` (``lax.scan`` under ``jit``);
        eager mode: the contract's Python loop."""
        if self.mode != "static":
            return super().fused_loop(body)
        return JaxFusedLoop(self._cells, body, self.loop_guard, self._guard_reset)

    @property
    def cells(self) -> CellRegistry:
        """Every cell of this backend (variables, optimizer states, learning rates, the loop guard),
        in creation order: what a program that runs the agent inside its own trace carries."""
        return self._cells

    def scan_loop(self, body: Callable[..., Sequence[Any]]) -> JaxFusedLoop:
        """A :class:`~rlgraph_jax.loop.JaxFusedLoop` over ``body`` in either mode, sharing the train
        steps' guard (the ``compiled`` executor calls its :meth:`~JaxFusedLoop.traced` scan inside
        its own program)."""
        return JaxFusedLoop(self._cells, body, self.loop_guard, self._guard_reset)

    def reset_loop_guard(self) -> None:
        """Mark the shared non-finite guard healthy again (before a program with fused updates)."""
        self.loop_guard.value = self._guard_reset

    def gradients(self, loss_fn: Callable, variables: Sequence[Any], *inputs):
        """``(loss, [gradient per variable])`` as numpy (``jax.value_and_grad``, op by op).

        Variables the loss does not read, and non-trainable ones, get zero gradients.
        """
        variables = list(variables)
        train = [v for v in variables if self.is_trainable(v)]

        def objective(values):
            # Inputs are unwrapped inside the swap: an input passed as a variable (a gradient
            # with respect to an input) must read the traced value, not the concrete one.
            with swapped(train, values), track_reads(variables):
                return unwrap_tree(loss_fn(*unwrap_tree(inputs))[0])

        loss, grads = jax.value_and_grad(objective)([v.value for v in train])
        grads_iter = iter(grads)
        out = [
            np.asarray(next(grads_iter)) if self.is_trainable(v) else np.zeros(v.shape, np.float32) for v in variables
        ]
        return np.asarray(loss), out

    def set_num_threads(self, num_threads: int) -> None:
        """XLA fixes its CPU thread pool when JAX starts (``XLA_FLAGS``); later calls do nothing."""
