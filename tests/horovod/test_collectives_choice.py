"""Which Horovod module reduces a backend's buffers (no Horovod needed: the adapters are faked).

A backend built on torch or TensorFlow gets that framework's Horovod module; a backend whose
tensors come from any other framework (the jax plugin's) gets the first Horovod module that
imports, in ``NEUTRAL_ORDER``, since only numpy crosses the adapter; none importable is a
``HorovodSetupError`` that names what failed and how to install.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlgraph_horovod import collectives
from rlgraph_horovod.collectives import HorovodSetupError, SingleProcess, collectives_for, tensor_framework


def _adapter(name: str, importable: bool):
    """A stand-in for one Horovod framework adapter: one rank, or an ImportError when made."""

    class Adapter(SingleProcess):
        framework = f"horovod.{name}"

        def __init__(self) -> None:
            if not importable:
                raise ImportError(f"no module named 'horovod.{name}.mpi_lib_v2'")

    return Adapter


class _Tensor:
    """A tensor of a framework Horovod has no module for."""

    __module__ = "otherframework.arrays"


class _OtherBackend:
    def to_tensor(self, array: np.ndarray) -> _Tensor:
        return _Tensor()


class _TorchLikeBackend:
    def to_tensor(self, array: np.ndarray):
        class Tensor:
            __module__ = "torch"

        return Tensor()


@pytest.fixture
def launched(monkeypatch):
    """Pretend horovodrun started this process; the adapters are set by each test."""
    monkeypatch.setattr(collectives, "under_launcher", lambda: True)

    def use(torch: bool, tensorflow: bool) -> None:
        monkeypatch.setitem(collectives.ADAPTERS, "torch", _adapter("torch", torch))
        monkeypatch.setitem(collectives.ADAPTERS, "tensorflow", _adapter("tensorflow", tensorflow))

    return use


def test_a_backend_outside_the_adapters_takes_the_first_importable_module(launched):
    assert tensor_framework(_OtherBackend()) == "otherframework"
    launched(torch=True, tensorflow=True)
    assert collectives_for(_OtherBackend()).framework == "horovod.torch"
    launched(torch=False, tensorflow=True)
    assert collectives_for(_OtherBackend()).framework == "horovod.tensorflow"


def test_no_importable_module_is_a_setup_error_naming_each_failure(launched):
    launched(torch=False, tensorflow=False)
    with pytest.raises(HorovodSetupError) as info:
        collectives_for(_OtherBackend())
    msg = str(info.value)
    assert "_OtherBackend makes otherframework tensors" in msg
    assert "horovod.torch: no module named 'horovod.torch.mpi_lib_v2'" in msg
    assert "horovod.tensorflow: no module named" in msg and "python -m rlgraph_horovod.install" in msg


def test_a_torch_backend_never_falls_back_to_another_module(launched):
    launched(torch=False, tensorflow=True)
    with pytest.raises(HorovodSetupError, match="Horovod's torch support cannot be imported"):
        collectives_for(_TorchLikeBackend())


def test_without_a_launcher_no_module_is_imported(monkeypatch):
    monkeypatch.setattr(collectives, "under_launcher", lambda: False)
    monkeypatch.setitem(collectives.ADAPTERS, "torch", _adapter("torch", False))
    assert isinstance(collectives_for(_OtherBackend()), SingleProcess)


def test_the_jax_backend_takes_the_neutral_path(launched):
    """The jax plugin's arrays are not torch or TF tensors: Horovod reaches them through numpy."""
    pytest.importorskip("jax")
    from rlgraph_core.assemble import make_backend

    backend = make_backend("jax", "eager", device="cpu", seed=0)
    assert tensor_framework(backend) not in collectives.ADAPTERS
    launched(torch=True, tensorflow=True)
    assert collectives_for(backend).framework == collectives.ADAPTERS[collectives.NEUTRAL_ORDER[0]].framework
