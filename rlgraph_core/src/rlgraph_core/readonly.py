"""A public, read-only view of a private attribute, in one line instead of a four-line property.

``n_step = ReadOnly[int]("_n", "Maximum number of steps a transition spans.")`` in a class body
is the same as::

    @property
    def n_step(self) -> int:
        \"\"\"Maximum number of steps a transition spans.\"\"\"
        return self._n

It is a :class:`property` (``isinstance`` holds; assigning raises the same ``AttributeError``;
``help`` and pdoc list it with its docstring) whose getter is :func:`operator.attrgetter`.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

__all__ = ["ReadOnly"]

T = TypeVar("T")


class ReadOnly(property, Generic[T]):
    """A read-only property that returns the instance's attribute ``attr``, documented by ``doc``.

    Args:
        attr: name of the attribute read (usually private: ``"_n"``).
        doc: the property's docstring.
    """

    def __init__(self, attr: str, doc: str) -> None:
        super().__init__(operator.attrgetter(attr))
        self.__doc__ = doc  # a property subclass keeps its docstring on the instance

    if TYPE_CHECKING:  # the type the attribute reads as; at run time property's own __get__ serves

        @overload
        def __get__(self, instance: None, owner: type | None = None) -> ReadOnly[T]: ...
        @overload
        def __get__(self, instance: object, owner: type | None = None) -> T: ...
        def __get__(self, instance: object, owner: type | None = None) -> Any: ...
