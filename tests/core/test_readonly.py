"""``ReadOnly``: a one-line read-only property over a private attribute."""

from __future__ import annotations

import pytest

from rlgraph_core.memories import ReplayMemory
from rlgraph_core.readonly import ReadOnly
from rlgraph_core.spaces import Discrete


class _Holder:
    size = ReadOnly[int]("_size", "How many things are held.")

    def __init__(self, size: int) -> None:
        self._size = size


def test_reads_the_attribute_and_keeps_its_docstring():
    holder = _Holder(3)
    assert holder.size == 3
    holder._size = 5
    assert holder.size == 5
    assert isinstance(_Holder.size, property)
    assert _Holder.size.__doc__ == "How many things are held."


def test_refuses_assignment_and_deletion_as_a_property_does():
    holder = _Holder(3)
    with pytest.raises(AttributeError, match="property 'size' of '_Holder' object has no setter"):
        holder.size = 4  # type: ignore[misc]
    with pytest.raises(AttributeError, match="has no deleter"):
        del holder.size  # type: ignore[misc]
    assert holder.size == 3


def test_library_attributes_stay_read_only():
    space = Discrete(4)
    memory = ReplayMemory(8)
    for obj, name in ((space, "n"), (space, "has_batch_rank"), (memory, "capacity")):
        with pytest.raises(AttributeError, match="has no setter"):
            setattr(obj, name, 1)
    assert (space.n, space.start, space.num_categories, memory.capacity) == (4, 0, 4, 8)
    assert type(space).n.__doc__ == "Number of categories."
