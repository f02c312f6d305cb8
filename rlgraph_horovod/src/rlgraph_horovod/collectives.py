"""Collectives on numpy buffers, through the Horovod module of the backend in use.

The executor moves numpy (the gradient hook's flat float32 buffer, weights, small control
vectors). Horovod reduces framework tensors, so each adapter wraps one Horovod framework module:
``horovod.torch`` for backends whose tensors are torch tensors, ``horovod.tensorflow`` for
TensorFlow ones. The adapter is chosen from the backend *object* (the module its tensors come
from), so any backend built on those frameworks works, and core never names one.

A backend whose tensors come from a framework Horovod has no module for (JAX, or any other
plugin's) still trains under Horovod: only numpy crosses the adapter, so any Horovod framework
module that imports can reduce its buffers. :data:`NEUTRAL_ORDER` says which is tried first and
why; elastic mode then runs under that module's ``elastic.run`` as well, which resets only
Horovod itself (shutdown and init), never framework state, so it serves such backends too.

Without a launcher (plain ``rlgraph train``) :class:`SingleProcess` stands in: one rank, every
collective is the identity, and Horovod is not imported.
"""

from __future__ import annotations

import abc
import time
from typing import Callable

import numpy as np

from rlgraph_horovod.ranks import under_launcher


class Collectives(abc.ABC):
    """Rank, size and the collectives the executor needs, on numpy arrays.

    Every rank must call the same collectives in the same order with equally shaped arrays;
    ``name`` identifies the operation to Horovod (its timeline and stall reports).
    """

    #: Horovod framework module name (for messages), or None for :class:`SingleProcess`.
    framework: str | None = None

    @property
    @abc.abstractmethod
    def rank(self) -> int:
        """This process's rank (0 = the one that evaluates, logs and checkpoints)."""

    @property
    @abc.abstractmethod
    def size(self) -> int:
        """Number of ranks."""

    @abc.abstractmethod
    def allreduce(self, array: np.ndarray, *, average: bool, name: str) -> np.ndarray:
        """Sum (or mean, with ``average``) of ``array`` over all ranks; same shape and dtype."""

    @abc.abstractmethod
    def broadcast(self, array: np.ndarray, *, root: int, name: str) -> np.ndarray:
        """``root``'s ``array`` on every rank (all ranks pass the same shape and dtype)."""

    def shutdown(self) -> None:
        """Release Horovod's background thread (a no-op for one process)."""

    def elastic_run(self, func: Callable) -> Callable:
        """``func`` wrapped by Horovod's ``elastic.run`` for this framework (reset = shutdown + init
        of this module); one process has nothing to reset, so ``func`` is returned unchanged."""
        return func


class SingleProcess(Collectives):
    """One rank: every collective returns its input. Used when no launcher started the process."""

    @property
    def rank(self) -> int:
        return 0

    @property
    def size(self) -> int:
        return 1

    def allreduce(self, array: np.ndarray, *, average: bool, name: str) -> np.ndarray:
        return np.array(array, copy=True)

    def broadcast(self, array: np.ndarray, *, root: int, name: str) -> np.ndarray:
        return np.array(array, copy=True)


class _HorovodModule(Collectives):
    """One Horovod framework module (``hvd``) and the function that turns numpy into its tensors."""

    def __init__(self, hvd, to_tensor: Callable[[np.ndarray], object], elastic_module: str) -> None:
        self._hvd, self._to_tensor, self._elastic_module = hvd, to_tensor, elastic_module
        hvd.init()

    @property
    def rank(self) -> int:
        return int(self._hvd.rank())

    @property
    def size(self) -> int:
        return int(self._hvd.size())

    def allreduce(self, array: np.ndarray, *, average: bool, name: str) -> np.ndarray:
        hvd = self._hvd
        tensor = self._to_tensor(np.ascontiguousarray(array))
        return hvd.allreduce(tensor, name=name, op=hvd.Average if average else hvd.Sum).numpy()

    def broadcast(self, array: np.ndarray, *, root: int, name: str) -> np.ndarray:
        tensor = self._to_tensor(np.ascontiguousarray(array))
        return self._hvd.broadcast(tensor, root_rank=root, name=name).numpy()

    def shutdown(self) -> None:
        self._hvd.shutdown()

    def elastic_run(self, func: Callable) -> Callable:
        import importlib

        return importlib.import_module(self._elastic_module).run(func)


class HorovodTorch(_HorovodModule):
    """``horovod.torch`` on ``torch.from_numpy`` views (no copy into the allreduce)."""

    framework = "horovod.torch"

    def __init__(self) -> None:
        import horovod.torch as hvd
        import torch

        super().__init__(hvd, torch.from_numpy, "horovod.torch.elastic")


class HorovodTensorFlow(_HorovodModule):
    """``horovod.tensorflow`` on eager tensors made from the numpy arrays."""

    framework = "horovod.tensorflow"

    def __init__(self) -> None:
        import horovod.tensorflow as hvd
        import tensorflow as tf

        super().__init__(hvd, tf.convert_to_tensor, "horovod.tensorflow.elastic")


#: Adapter per framework, keyed by the top-level module of the backend's tensor type.
ADAPTERS: dict[str, Callable[[], Collectives]] = {"torch": HorovodTorch, "tensorflow": HorovodTensorFlow}

#: The adapters tried, in this order, for a backend whose tensor framework has no entry in
#: :data:`ADAPTERS`; the first whose Horovod module imports is used. ``horovod.torch`` comes first
#: because ``torch.from_numpy`` wraps the numpy buffer without a copy (``tf.convert_to_tensor``
#: copies it) and importing torch is lighter and quicker than importing TensorFlow, which also
#: starts its own thread pools in the process. Either reduces the same float32 buffers exactly.
NEUTRAL_ORDER: tuple[str, ...] = ("torch", "tensorflow")


class HorovodSetupError(RuntimeError):
    """Horovod cannot serve this backend (not installed, or built without its framework)."""


def tensor_framework(backend) -> str:
    """Top-level module of the tensors ``backend`` makes (``torch``, ``tensorflow`` ...)."""
    probe = backend.to_tensor(np.zeros(1, np.float32))
    return type(probe).__module__.split(".")[0]


_INSTALL_HINT = (
    "Build and install Horovod for this interpreter's frameworks with `python -m rlgraph_horovod.install` "
    "(it rebuilds when torch or TensorFlow was added after the last build)."
)


def collectives_for(backend) -> Collectives:
    """The collectives for ``backend``: Horovod's module for its framework under a launcher,
    :class:`SingleProcess` otherwise.

    A backend built on a framework in :data:`ADAPTERS` gets that framework's Horovod module; any
    other backend gets the first module of :data:`NEUTRAL_ORDER` that imports.

    Raises:
        HorovodSetupError: the Horovod module needed cannot be imported (none of them, for a
            backend outside :data:`ADAPTERS`).
    """
    if not under_launcher():
        return SingleProcess()
    framework = tensor_framework(backend)
    factory = ADAPTERS.get(framework)
    if factory is not None:
        try:
            return factory()
        except ImportError as exc:
            raise HorovodSetupError(
                f"Horovod's {framework} support cannot be imported ({exc}). {_INSTALL_HINT}"
            ) from None
    failures = []
    for name in NEUTRAL_ORDER:
        try:
            return ADAPTERS[name]()
        except ImportError as exc:
            failures.append(f"{ADAPTERS[name].framework}: {exc}")
    raise HorovodSetupError(
        f"The backend {type(backend).__name__} makes {framework} tensors, for which Horovod has no module of its "
        f"own; the horovod executor then reduces its numpy gradient buffers through any Horovod framework module "
        f"that imports ({', '.join(ADAPTERS[n].framework for n in NEUTRAL_ORDER)}), but none did "
        f"({'; '.join(failures)}). Install torch (or TensorFlow) next to this backend, then: {_INSTALL_HINT}"
    )


class TimedAllreduce:
    """The gradient hook: mean of the flat gradient buffer over all ranks, timed.

    :attr:`seconds` and :attr:`calls` accumulate the time spent inside the allreduce and the
    number of calls, for the ``allreduce_ms_per_update`` metric.
    """

    def __init__(self, collectives: Collectives):
        self.collectives = collectives
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, flat: np.ndarray) -> np.ndarray:
        start = time.perf_counter()
        out = self.collectives.allreduce(flat, average=True, name="rlgraph.gradients")
        self.seconds += time.perf_counter() - start
        self.calls += 1
        return out.astype(np.float32, copy=False)
