"""Validation messages of config errors: pydantic's errors as one paragraph naming each field
path, its (shortened) bad value and the constraint, or the known fields of an unknown one.

A leaf module: the registry-aware validators (:mod:`rlgraph_core.config.run`, ``memory``,
``slots``, ``wrappers``) all import it, and it imports none of them.
"""

from __future__ import annotations

import difflib
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from rlgraph_core.config.limits import shorten

__all__ = ["format_validation_error", "value_error_text"]


def _model_at(model, loc) -> type[BaseModel] | None:
    """The pydantic model that holds the field at ``loc`` (a path below ``model``), if any."""
    for part in loc:
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return None
        candidates = [field.annotation, *typing.get_args(field.annotation)]
        model = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if model is None:
            return None
    return model


def _models_in(annotation) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Optional, Union, Annotated, lists)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _nested_fields(model, name: str, exact: bool, depth: int = 3) -> list[tuple[str, ...]]:
    """Paths below ``model`` (sub-models, ``depth`` levels at most) of fields called ``name``
    (``exact``) or close to it: where an unknown key most likely belongs (shortest paths first)."""
    exact_paths: list[tuple[str, ...]] = []
    close: list[tuple[str, ...]] = []
    frontier: list[tuple[tuple[str, ...], type[BaseModel]]] = [((), model)]
    for _ in range(depth):
        below = []
        for path, owner in frontier:
            for field_name, field in owner.model_fields.items():
                for sub in _models_in(field.annotation):
                    for sub_name in sub.model_fields:
                        target = (*path, field_name, sub_name)
                        if sub_name == name:
                            exact_paths.append(target)
                        elif difflib.get_close_matches(name, [sub_name], n=1, cutoff=0.85):
                            close.append(target)
                    below.append(((*path, field_name), sub))
        frontier = below
    return list(dict.fromkeys(exact_paths if exact else close))


def format_validation_error(exc: ValidationError, prefix: str, raw: Any, model=None) -> str:
    """One line per pydantic error: the field path below ``prefix``, the (shortened) bad value and
    the constraint; an unknown field gets the closest known one (also one level down) and the
    known fields of its section."""
    parts = []
    for err in exc.errors():
        path = ".".join(str(p) for p in (prefix, *err["loc"]) if p != "")
        value = err.get("input")
        shown = shorten(value) if not isinstance(value, dict) else "{...}"
        if err["type"] == "extra_forbidden":
            owner = _model_at(model, err["loc"][:-1]) if model is not None else None
            msg = f"'{path}' is not a known field (value {shown})"
            if owner is not None:
                known = list(owner.model_fields)
                key = str(err["loc"][-1])
                section = ".".join(str(p) for p in (prefix, *err["loc"][:-1]) if p != "")
                # e.g. agent.learning_rate: a field of that name lives in agent.optimizer (an exact
                # name one level down beats a close one here: learning_starts is not meant)
                nested = _nested_fields(owner, key, exact=True)
                close = [] if nested else difflib.get_close_matches(key, known, n=1)
                if not nested and not close:
                    nested = _nested_fields(owner, key, exact=False)
                if nested:
                    close = [".".join(nested[0])]
                msg += (
                    f"; did you mean '{section + '.' if nested and section else ''}{close[0]}'?" if close else ";"
                ) + f" Known fields of '{section}': {', '.join(known) or '(none)'}"
            parts.append(msg)
        elif err["type"] == "value_error" and isinstance(value, dict):
            # a model-level check (e.g. capacity vs batch_size): its message names the fields
            text = value_error_text(err)
            parts.append(text if text.startswith("'") else f"'{path}': {text}")
        else:
            msg = value_error_text(err) if err["type"] == "value_error" else err["msg"]
            parts.append(f"'{path}' = {shown}: {msg}")
    return "; ".join(parts)


def value_error_text(err: dict) -> str:
    """The message of a validator's ValueError, without pydantic's 'Value error, ' prefix."""
    ctx = err.get("ctx") or {}
    return str(ctx["error"]) if "error" in ctx else err["msg"]
