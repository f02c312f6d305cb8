"""The shared ``(class, settings model)`` entry check, worded for each kind of plugin."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from rlgraph_core.registration import entry_problem


class Base(BaseModel):
    """The settings base of a made-up kind."""


class Sub(Base):
    """One plugin's settings model."""


def make():
    return object()


@pytest.mark.parametrize(
    "obj, options, expected",
    [
        ((make, Sub), {}, None),
        ((Base, Base), {}, None),
        (make, {}, None),
        (make, {"plain": False}, "expected a (gadget_class, settings_model) tuple"),
        ((make,), {}, "expected a gadget class or a (gadget_class, settings_model) tuple"),
        ((make, Sub, 1), {"made_by": "factory"}, "expected a gadget factory or a (factory, settings_model) tuple"),
        ((make, Sub, 1), {"kind": "item"}, "expected an item class or an (item_class, settings_model) tuple"),
        ((3, Sub), {}, "the gadget class 3 is not callable"),
        ((3, Sub), {"made_by": "factory", "plain": False}, "the gadget factory 3 is not callable"),
        ((make, dict), {}, f"the settings model {dict!r} is not a subclass of {__name__}.Base"),
        ((make, None), {}, f"the settings model None is not a subclass of {__name__}.Base"),
        ("name", {}, "the gadget 'name' is neither a class nor a (gadget_class, settings_model) tuple"),
        (
            "name",
            {"made_by": "factory"},
            "the gadget 'name' is neither a factory nor a (factory, settings_model) tuple",
        ),
    ],
)
def test_entry_problem_names_what_is_wrong_in_the_kinds_words(obj, options, expected):
    assert entry_problem(obj, **{"kind": "gadget", "base": Base, **options}) == expected


def test_every_kind_uses_the_shared_check():
    from rlgraph_core.backend.settings import BackendSettings, backend_entry_problem
    from rlgraph_core.components.settings import component_entry_problem
    from rlgraph_core.execution.settings import executor_entry_problem
    from rlgraph_core.plugins.manager import _entry_problem
    from rlgraph_core.wrappers import wrapper_entry_problem

    assert backend_entry_problem(3) == "the backend 3 is neither a factory nor a (factory, settings_model) tuple"
    assert backend_entry_problem((make, BackendSettings)) is None
    assert component_entry_problem((3, Sub)) == "the component class 3 is not callable"
    assert executor_entry_problem(()) == "expected an executor class or an (executor_class, settings_model) tuple"
    assert wrapper_entry_problem(make) == "expected a (factory, settings_model) tuple"
    assert "rlgraph_core.memories.settings.MemorySettings" in _entry_problem("memories", (make, Sub))
