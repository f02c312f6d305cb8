"""Shape arithmetic of the convolution and pooling ops, shared by every backend and the CNN.

Pure Python on ints (no framework), so backends compute the same padding and the ``cnn``
component infers its feature size from an observation space before anything is built.
Padding follows TensorFlow's convention, which PyTorch lacks for strided convolutions:

* ``valid``: no padding; ``out = (size - kernel) // stride + 1``;
* ``same``: ``out = ceil(size / stride)``; the padding needed, ``max((out - 1) * stride + kernel
  - size, 0)``, is split with the odd element at the bottom / right.
"""

from __future__ import annotations

from typing import Sequence

PADDINGS = ("same", "valid")


def pair(value: int | Sequence[int], what: str = "strides") -> tuple[int, int]:
    """``value`` as ``(height, width)``: an int is used for both.

    Raises:
        ValueError: not a positive int or a pair of positive ints.
    """
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise ValueError(f"{what} must be an int or a pair (height, width), got {list(value)!r}.")
        out = (int(value[0]), int(value[1]))
    else:
        out = (int(value), int(value))
    if out[0] <= 0 or out[1] <= 0:
        raise ValueError(f"{what} must be positive, got {value!r}.")
    return out


def check_padding(padding: str) -> str:
    """``padding`` if it is ``same`` or ``valid``; else a ValueError naming both."""
    if padding not in PADDINGS:
        raise ValueError(f"padding must be 'same' or 'valid', got {padding!r}.")
    return padding


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """``(before, after)`` zero padding of one spatial axis for ``same`` (TensorFlow's split)."""
    out = (size + stride - 1) // stride
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def output_size(size: int, kernel: int, stride: int, padding: str) -> int:
    """Length of one spatial axis after a window op of ``kernel`` with ``stride`` and ``padding``.

    Raises:
        ValueError: ``valid`` padding with a kernel larger than the input.
    """
    if check_padding(padding) == "same":
        return (size + stride - 1) // stride
    if kernel > size:
        raise ValueError(f"a {kernel}-wide window does not fit an axis of {size} without padding ('valid').")
    return (size - kernel) // stride + 1
