"""The check every ``(class, settings model)`` registration entry goes through.

Backends, components, executors, memories and environment wrappers register under their hook
as ``{name: (callable, settings_model)}``; backends, components and executors also accept the
older plain form, the callable alone. :func:`entry_problem` says, in one sentence, why an entry
does not fit that format, worded for the kind of plugin it belongs to, so the plugin manager can
report the entry and leave it out while the rest of the plugin still registers.

This module imports nothing from the rest of the core, so every subpackage that owns a kind may
use it without an import cycle.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["entry_problem"]


def _article(word: str) -> str:
    return "an" if word.lstrip("(")[:1] in ("a", "e", "i", "o", "u") else "a"


def entry_problem(
    obj: Any,
    *,
    kind: str,
    base: type,
    made_by: Literal["class", "factory"] = "class",
    plain: bool = True,
) -> str | None:
    """Why ``obj`` is not a fitting registration entry of ``kind`` (None: it fits).

    Args:
        obj: the registered value: a ``(callable, settings_model)`` pair, or (if ``plain``) the
            callable alone.
        kind: the plugin kind in the singular, as the messages name it ("backend", "memory" ...).
        base: the class every settings model of this kind subclasses; the message names its
            import path.
        made_by: what the first element is, "class" (written ``(<kind>_class, settings_model)``)
            or "factory" (written ``(factory, settings_model)``).
        plain: whether the callable alone, without a settings model, is also accepted.
    """
    pair = f"({kind}_class, settings_model)" if made_by == "class" else "(factory, settings_model)"
    if isinstance(obj, tuple) and len(obj) == 2:
        first, model = obj
        if not callable(first):
            return f"the {kind} {made_by} {first!r} is not callable"
        if not (isinstance(model, type) and issubclass(model, base)):
            return f"the settings model {model!r} is not a subclass of {base.__module__}.{base.__qualname__}"
        return None
    if not plain:
        return f"expected {_article(pair)} {pair} tuple"
    if isinstance(obj, tuple):
        return f"expected {_article(kind)} {kind} {made_by} or {_article(pair)} {pair} tuple"
    if not callable(obj):
        return f"the {kind} {obj!r} is neither {_article(made_by)} {made_by} nor {_article(pair)} {pair} tuple"
    return None
