"""The torch backend: tensors, variables, ops, compiled functions and training steps."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlgraph_core.backend import Backend, parse_device
from rlgraph_core.errors import ConfigError
from rlgraph_torch.fused_loop import TorchFusedLoop
from rlgraph_torch.ops import TorchOps
from rlgraph_torch.compile import try_compile, with_eager_fallback
from rlgraph_torch.optim import TorchTrainStep, grads_or_none, new_guard

_NP_TO_TORCH = {
    np.dtype("float64"): torch.float32,
    np.dtype("float32"): torch.float32,
    np.dtype("int64"): torch.int64,
    np.dtype("int32"): torch.int64,
    np.dtype("bool"): torch.bool,
    np.dtype("uint8"): torch.uint8,
    np.dtype("int8"): torch.int64,
}
#: numpy dtypes that already are the tensor dtype ``to_tensor`` would pick: on the CPU such
#: arrays become tensors that share their memory (as ``torch.as_tensor`` would), with no copy.
_SAME_DTYPE = frozenset({np.dtype("float32"), np.dtype("int64"), np.dtype("bool"), np.dtype("uint8")})
_grad_enabled = torch.is_grad_enabled
_set_grad_enabled = torch._C._set_grad_enabled  # what torch.no_grad / torch.set_grad_enabled call


def _resolve_device(requested: str | None) -> torch.device:
    """Map a config device name to a ``torch.device`` that exists on this machine.

    ``auto`` picks the first CUDA device when one is available, else the CPU; ``cpu``,
    ``cuda`` and ``cuda:N`` are taken as is (``gpu[:N]`` is an alias of ``cuda[:N]``, so one config
    works for the torch and tf backends).

    Raises:
        ConfigError: an unknown name, CUDA requested where torch sees no CUDA device, or an index
            beyond the devices there are.
    """
    index = parse_device(requested, "torch", "auto (CUDA when available, else the CPU), cpu, cuda or cuda:N")
    if index == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    if index == "cpu":
        return torch.device("cpu")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "without CUDA support"
        raise ConfigError(
            f"'train.device' = '{requested}' asks for a CUDA GPU, but torch sees none (torch "
            f"{torch.__version__}, built {build}); use device=cpu or auto, or run on a machine "
            f"with an NVIDIA GPU and a CUDA build of torch."
        )
    if index >= count:
        raise ConfigError(
            f"'train.device' = '{requested}' names CUDA device {index}, but torch sees {count} "
            f"(cuda:0{f' to cuda:{count - 1}' if count > 1 else ''}); use one of those, or auto."
        )
    return torch.device(f"cuda:{index}")


class TorchBackend(Backend):
    """PyTorch, eager (define-by-run) or static (``torch.compile``).

    Args:
        mode: ``"eager"`` or ``"static"``.
        device: ``"auto"``, ``"cpu"``, ``"cuda[:N]"`` (``"gpu[:N]"`` is an alias).
        seed: seeds torch's global generator (weights are initialised in numpy anyway).
        compile_inference: in static mode, ``torch.compile`` inference functions
            (:meth:`function`: acting, greedy, values) as well as the train steps. Off by default:
            for the per-step batches of acting the compiled call is slower than eager (see
            :meth:`function`).
        flush_denormal: flush denormal floats to zero on the CPU (``torch.set_flush_denormal``) in
            the thread that makes the backend, where acting and learning run; TensorFlow and JAX
            flush them by default, torch does not. Denormals arise in training (Adam's moment
            estimates of weights whose gradients stay zero decay through them) and make every op
            that touches them many times slower: static DQN on CartPole (256-256 ReLU) trained
            1.5x as fast per CPU-second with them flushed (``benchmarks/README.md``, same-run
            baselines). False leaves the thread as it is. The flag is the thread's, so the numpy
            and other torch code run later in that thread flush them too.
        settings: the config's validated ``backend:`` section
            (:class:`~rlgraph_torch.settings.TorchSettings`); its fields win over the arguments.
    """

    name = "torch"

    def __init__(
        self,
        mode: str = "eager",
        device: str = "auto",
        seed: int | None = None,
        compile_inference: bool = False,
        settings: Any = None,
        flush_denormal: bool = True,
    ):
        super().__init__(mode, device, seed)
        if settings is not None:
            compile_inference = settings.compile_inference
            flush_denormal = settings.flush_denormal
        self.compile_inference = bool(compile_inference)
        #: whether this backend flushed denormals in the thread that made it (False: left as it was)
        self.flush_denormal = bool(flush_denormal) and torch.set_flush_denormal(True)
        self._device = _resolve_device(device)
        self._on_cpu = self._device.type == "cpu"
        self._ops = TorchOps(self._device)
        if seed is not None:
            torch.manual_seed(seed)

    @property
    def ops(self):
        return self._ops

    @property
    def device(self) -> str:
        return str(self._device)

    def to_tensor(self, value, dtype=None):
        # torch.is_tensor, not isinstance: inside a compiled train step dynamo traced the isinstance
        # form into 4 graphs instead of 1 (tests/torch/test_torch_recurrent.py's trace count).
        if torch.is_tensor(value):
            return value
        if isinstance(value, dict):  # a Dict observation: one tensor per key
            return {k: self.to_tensor(v, dtype) for k, v in value.items()}
        arr = np.asarray(value)
        if dtype is None and self._on_cpu and arr.dtype in _SAME_DTYPE and arr.flags.writeable:
            return torch.from_numpy(arr)  # the hot path (every act and update): no argument parsing
        tdtype = _NP_TO_TORCH.get(arr.dtype, torch.float32) if dtype is None else getattr(torch, dtype)
        return torch.as_tensor(arr, dtype=tdtype, device=self._device)

    def to_numpy(self, tensor) -> np.ndarray:
        if isinstance(tensor, torch.Tensor):
            if tensor.is_cpu and not tensor.requires_grad:
                return tensor.numpy()  # what .detach().cpu().numpy() gives here (shared memory), in one call
            return tensor.detach().cpu().numpy()
        return np.asarray(tensor)

    def variable(self, name, value, trainable=True):
        t = torch.as_tensor(np.asarray(value), device=self._device)
        if t.dtype == torch.float64:
            t = t.float()
        t = t.clone()
        if trainable:
            t.requires_grad_(True)
        return t

    def is_trainable(self, variable) -> bool:
        """Trainable variables are the tensors that require gradients."""
        return bool(torch.is_tensor(variable) and variable.requires_grad)

    def assign_numpy(self, variable, value):
        with torch.no_grad():
            variable.copy_(torch.as_tensor(np.asarray(value), device=variable.device))

    def function(self, fn):
        def no_grad_fn(*args):
            # What ``with torch.no_grad():`` does, without its context-manager object: that costs
            # about 3 us per call more (measured 3.9 vs 0.9 us on the 2-core CPU machine), and
            # acting calls this once per env step.
            prev = _grad_enabled()
            _set_grad_enabled(False)
            try:
                return fn(*args)
            finally:
                _set_grad_enabled(prev)

        # Static mode compiles the train steps but, unless ``compile_inference`` is set, runs
        # inference functions eagerly: a torch.compile'd call pays guard checks and the compiled
        # graph's dispatch on every call, more than the few eager ops of a small network cost.
        # benchmarks/bench_act.py, one act call, compiled / eager (2 shared CPU cores, 2026-12-02):
        # PPO 64-64 tanh, 8 obs: 179 / 102 us; DQN 256-256 relu, 1 obs: 132 / 78 us; SAC 256-256
        # relu, 1 obs: 116 / 54 us. (The tf backend decides the other way.)
        if self.mode == "static" and self.compile_inference:
            return with_eager_fallback(try_compile(torch.no_grad()(fn)), no_grad_fn)
        return no_grad_fn

    def set_num_threads(self, num_threads):
        torch.set_num_threads(int(num_threads))

    def train_step(self, loss_fn, variables, optimizer):
        return TorchTrainStep(loss_fn, variables, optimizer, compile_mode=self.mode == "static", guard=self.loop_guard)

    @property
    def loop_guard(self) -> torch.Tensor:
        """The fused loops' non-finite guard ``[ok, loss, norm]``, shared by this backend's train
        steps (their :meth:`~rlgraph_torch.optim.TorchTrainStep.inline` reads and writes it)."""
        guard = getattr(self, "_loop_guard", None)
        if guard is None:
            guard = self._loop_guard = new_guard(self.device)
        return guard

    @property
    def fuses_loops(self) -> bool:
        """Static mode compiles a fused loop's body once per input shape (see :mod:`rlgraph_torch.fused_loop`)."""
        return self.mode == "static"

    def fused_loop(self, body):
        """Static mode: :class:`~rlgraph_torch.fused_loop.TorchFusedLoop`; eager: a Python loop."""
        if self.mode != "static":
            return super().fused_loop(body)
        return TorchFusedLoop(self, body)

    def gradients(self, loss_fn, variables, *inputs):
        variables = list(variables)
        outputs = loss_fn(*inputs)
        grads = grads_or_none(outputs[0], variables)
        return (
            outputs[0].detach().cpu().numpy(),
            [
                np.zeros(tuple(v.shape), np.float32) if g is None else g.detach().cpu().numpy()
                for v, g in zip(variables, grads)
            ],
        )
