"""The TensorFlow backend: tensors, variables, ops, compiled functions and training steps."""

from __future__ import annotations

import contextlib
import re
from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf

from rlgraph_core.backend import Backend, FusedLoop, canonical_array, parse_device
from rlgraph_core.errors import ConfigError
from rlgraph_tf.loop import TFFusedLoop
from rlgraph_tf.ops import TFOps
from rlgraph_tf.optim import CompiledFunction, TFTrainStep, new_guard

_DTYPES = {"float32": np.float32, "int64": np.int64, "bool": np.bool_}
_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.\-/]")

#: GPUs on which this process already asked TensorFlow for on-demand memory growth.
_GROWTH_SET: set[str] = set()


def _allow_gpu_memory_growth(gpus) -> None:
    """Ask TensorFlow to take GPU memory on demand, so PyTorch in this process can use the GPU too.

    Only possible before TensorFlow initialises the GPU; afterwards the setting is left alone.
    """
    for gpu in gpus:
        if gpu.name in _GROWTH_SET:
            continue
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except (RuntimeError, ValueError):  # already initialised: keep what is in place
            pass
        _GROWTH_SET.add(gpu.name)


def _resolve_device(requested: str) -> tuple[str, str]:
    """Map a config device name to ``(tf_device, display_name)``.

    ``auto`` picks the first visible GPU, else the CPU. ``cuda[:N]`` is accepted as an alias of
    ``gpu[:N]`` so one config works for the torch and tf backends.
    """
    gpus = tf.config.list_physical_devices("GPU")
    index = parse_device(requested, "tf", "auto, cpu, gpu, gpu:N, cuda or cuda:N")
    if index == "auto":
        index = 0 if gpus else "cpu"
    if index == "cpu":
        return "/CPU:0", "cpu"
    if index >= len(gpus):
        raise ConfigError(
            f"Device '{requested}' was requested but TensorFlow sees {len(gpus)} GPU(s); "
            f"use device=cpu or auto, or install a GPU build of TensorFlow."
        )
    _allow_gpu_memory_growth(gpus)
    return f"/GPU:{index}", f"gpu:{index}"


class TFBackend(Backend):
    """TensorFlow 2, eager (define-by-run) or static (``tf.function``, XLA when it compiles).

    Args:
        mode: ``"eager"`` or ``"static"``.
        device: ``"auto"``, ``"cpu"``, ``"gpu[:N]"`` or ``"cuda[:N]"``.
        seed: seeds TensorFlow's global generator (weights are initialised in numpy anyway).
        jit_compile: in static mode, compile training steps with XLA (falls back to a plain
            ``tf.function`` with a warning if XLA fails). Inference functions always use a plain
            ``tf.function``: for the small per-step batches of acting it has less call overhead.
        settings: the config's validated ``backend:`` section
            (:class:`~rlgraph_tf.settings.TFSettings`); its fields win over the arguments.
    """

    name = "tf"

    def __init__(
        self,
        mode: str = "eager",
        device: str = "auto",
        seed: int | None = None,
        jit_compile: bool = True,
        settings: Any = None,
    ):
        super().__init__(mode, device, seed)
        if settings is not None:
            jit_compile = settings.jit_compile
        self._tf_device, self._device_name = _resolve_device(device)
        # Only when a GPU is visible can an op land anywhere but the CPU; then every variable,
        # tensor and call is pinned to the chosen device. On CPU-only hosts skip the scope.
        self._pin = bool(tf.config.list_physical_devices("GPU"))
        self._ops = TFOps(self._tf_device)
        self.jit_compile = bool(jit_compile)
        if seed is not None:
            tf.random.set_seed(seed)

    def set_num_threads(self, num_threads):
        """TF fixes its thread pools when its runtime starts; later calls are ignored."""
        try:
            tf.config.threading.set_intra_op_parallelism_threads(int(num_threads))
            tf.config.threading.set_inter_op_parallelism_threads(int(num_threads))
        except RuntimeError:
            pass

    def _scope(self):
        return tf.device(self._tf_device) if self._pin else contextlib.nullcontext()

    # --- tensors and variables -------------------------------------------------------------
    @property
    def ops(self) -> TFOps:
        """The neutral ops namespace on TensorFlow."""
        return self._ops

    @property
    def device(self) -> str:
        """``"cpu"`` or ``"gpu:N"``."""
        return self._device_name

    def to_tensor(self, value, dtype: str | None = None):
        """numpy / Python scalar -> tensor on the device (float32, int64, bool; uint8 kept)."""
        if isinstance(value, (tf.Tensor, tf.Variable)):
            return value if dtype is None else tf.cast(value, getattr(tf, dtype))
        if isinstance(value, dict):  # a Dict observation: one tensor per key
            return {k: self.to_tensor(v, dtype) for k, v in value.items()}
        arr = np.asarray(value)
        arr = canonical_array(arr) if dtype is None else arr.astype(_DTYPES[dtype], copy=False)
        if not self._pin:
            return tf.constant(arr)  # the hot path (every act and update); cheaper than convert_to_tensor
        with tf.device(self._tf_device):
            return tf.identity(tf.constant(arr))

    def to_numpy(self, tensor) -> np.ndarray:
        """Tensor or variable -> numpy (a copy for variables, which change in place)."""
        if isinstance(tensor, tf.Variable):
            return np.array(tensor.numpy(), copy=True)
        if isinstance(tensor, tf.Tensor):
            return np.asarray(tensor.numpy())  # 0-d results are arrays too, like torch's
        return np.asarray(tensor)

    def variable(self, name: str, value: np.ndarray, trainable: bool = True) -> tf.Variable:
        """A ``tf.Variable`` on the device holding ``value`` (floats as float32, ints as int64)."""
        arr = canonical_array(np.array(value, copy=True))
        with tf.device(self._tf_device):
            return tf.Variable(arr, trainable=trainable, name=_INVALID_NAME_CHARS.sub("_", name) or "var")

    def is_trainable(self, variable: Any) -> bool:
        """True for a ``tf.Variable`` made with ``trainable=True``."""
        return isinstance(variable, tf.Variable) and bool(variable.trainable)

    def assign_numpy(self, variable: tf.Variable, value: np.ndarray) -> None:
        """Overwrite ``variable`` from numpy (cast to the variable's dtype)."""
        variable.assign(np.asarray(value, dtype=variable.dtype.as_numpy_dtype))

    # --- computation -----------------------------------------------------------------------
    def function(self, fn: Callable) -> Callable:
        """Eager: ``fn`` itself. Static: ``tf.function(fn, reduce_retracing=True)``.

        Pass tensors, not Python numbers, for values that change between calls (epsilon ...):
        a traced function is specialised to the Python values it saw.
        """
        device = self._tf_device if self._pin else None
        # Unlike torch's, TF's compiled inference is much faster than eager even for the small
        # per-step batches of acting (one graph call instead of a Python dispatch per op):
        # benchmarks/bench_act.py, one act call, compiled / eager (2 shared CPU cores, 2026-12-02):
        # PPO 64-64 tanh, 8 obs: 313 / 2411 us; DQN 256-256 relu, 1 obs: 390 / 1408 us; SAC
        # 256-256 relu, 1 obs: 244 / 1206 us. So static mode compiles acting here.
        if self.mode == "static":
            return CompiledFunction(fn, jit_compile=False, what=getattr(fn, "__name__", "function"), device=device)
        if device is None:
            return fn

        def pinned(*args):
            with tf.device(device):
                return fn(*args)

        pinned.__wrapped__ = fn
        return pinned

    def train_step(self, loss_fn: Callable, variables: Sequence[Any], optimizer: dict) -> TFTrainStep:
        """A training step (see :class:`~rlgraph_tf.optim.TFTrainStep`): one ``tf.function`` in static mode."""
        with self._scope():
            return TFTrainStep(
                loss_fn,
                variables,
                optimizer,
                static=self.mode == "static",
                jit_compile=self.jit_compile,
                device=self._tf_device,
                pin_device=self._pin,
                guard=self.loop_guard,
            )

    @property
    def loop_guard(self) -> tf.Variable:
        """The fused loops' non-finite guard ``[ok, loss, norm]``, shared by this backend's train
        steps (their inline update reads and writes it; see :class:`~rlgraph_tf.loop.TFFusedLoop`)."""
        guard = getattr(self, "_loop_guard", None)
        if guard is None:
            with self._scope():
                guard = self._loop_guard = new_guard(self._tf_device)
        return guard

    @property
    def fuses_loops(self) -> bool:
        """True in static mode: :meth:`fused_loop` runs a whole update round as one program."""
        return self.mode == "static"

    def fused_loop(self, body: Callable[..., Sequence[Any]]) -> FusedLoop:
        """Static mode: a :class:`~rlgraph_tf.loop.TFFusedLoop` (one ``tf.function`` with a
        ``tf.while_loop`` per input signature, XLA when :attr:`jit_compile` and it compiles).
        Eager mode: the contract's Python loop."""
        if self.mode != "static":
            return super().fused_loop(body)
        return TFFusedLoop(
            body, jit_compile=self.jit_compile, device=self._tf_device if self._pin else None, guard=self.loop_guard
        )

    def gradients(self, loss_fn: Callable, variables: Sequence[Any], *inputs):
        """``(loss, [gradient per variable])`` as numpy; traced with ``tf.function`` in static mode.

        Variables the loss does not depend on, and non-trainable ones, get zero gradients.
        """
        variables = list(variables)
        watched = [v for v in variables if self.is_trainable(v)]

        def loss_and_grads(*args):
            with tf.GradientTape(watch_accessed_variables=False) as tape:
                tape.watch(watched)
                outputs = loss_fn(*args)
            grads = iter(tape.gradient(outputs[0], watched, unconnected_gradients=tf.UnconnectedGradients.ZERO))
            return outputs[0], [next(grads) if self.is_trainable(v) else tf.zeros_like(v) for v in variables]

        if self.mode == "static":
            loss_and_grads = tf.function(loss_and_grads)
        with self._scope():
            loss, grads = loss_and_grads(*inputs)
        return np.asarray(loss.numpy()), [np.asarray(g.numpy()) for g in grads]
