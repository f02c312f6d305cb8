"""Bounds on what a config may be, checked before anything validates or echoes it.

A config is a small document. A hostile or broken one must fail fast with a short message:

* a file larger than :data:`MAX_CONFIG_BYTES` is refused before it is parsed;
* an empty file (or one of comments only) is refused: it would silently train the defaults;
* a mapping with the same key twice is refused (YAML and JSON parsers silently keep the last);
* a document that expands to more than :data:`MAX_CONFIG_NODES` values (a YAML alias bomb,
  "billion laughs", is a few lines that expand to 10^9) is refused before validation walks it;
* an override key (``--set a.b.c=...``) deeper than :data:`MAX_KEY_DEPTH` is refused (it would
  nest past Python's recursion limit);
* a string longer than :data:`MAX_STRING_CHARS` outside ``env.kwargs`` is refused (no name or
  setting is that long; the environment's own arguments may be);
* every error quotes at most a short prefix of a value (:func:`shorten`).
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from rlgraph_core.errors import ConfigError, prefix, shorten

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_NODES",
    "MAX_KEY_DEPTH",
    "MAX_STRING_CHARS",
    "check_document",
    "parse_json",
    "parse_yaml",
    "prefix",
    "shorten",
]

#: The largest config file read (the shipped configs are about 1 KB).
MAX_CONFIG_BYTES = 4 * 1024 * 1024
#: The most values (mappings, lists and scalars, aliases counted at every use) a config may expand to.
MAX_CONFIG_NODES = 100_000
#: The most parts an override's key path may have (the deepest shipped setting has 4; env.kwargs may nest more).
MAX_KEY_DEPTH = 32
#: The longest string a config may hold outside ``env.kwargs``.
MAX_STRING_CHARS = 1_000


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a mapping holding the same key twice."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    loader.flatten_mapping(node)  # merge keys (<<: *defaults) are legitimate overrides
    seen: dict = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, "found an unhashable key", key_node.start_mark
            ) from None
        if key in seen:
            raise ConfigError(
                f"duplicate key {shorten(key)} (line {key_node.start_mark.line + 1}; first at line "
                f"{seen[key] + 1}): YAML keeps only the last value, which is almost always a mistake; "
                f"keep one of them"
            )
        seen[key] = key_node.start_mark.line
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml(text: str) -> Any:
    """``yaml.safe_load`` that refuses duplicate keys (a ConfigError without the file's name)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ConfigError(
                f"duplicate key {shorten(key)}: JSON parsers keep only the last value, which is almost always "
                f"a mistake; keep one of them"
            )
        out[key] = value
    return out


def parse_json(text: str) -> Any:
    """``json.loads`` that refuses duplicate keys."""
    return json.loads(text, object_pairs_hook=_unique_pairs)


def check_document(data: Any, where: str = "the config") -> None:
    """Refuse a document that expands to too many values, or holds an over-long string outside ``env.kwargs``.

    Values reached through several references (YAML aliases) count at every use, as a
    validator walking the document would visit them; the walk stops at the bound.

    Raises:
        ConfigError: naming ``where``, the field path and a short prefix of the value.
    """
    stack: list[tuple[Any, str]] = [(data, "")]
    count = 0
    while stack:
        value, path = stack.pop()
        count += 1
        if count > MAX_CONFIG_NODES:
            raise ConfigError(
                f"{where} expands to more than {MAX_CONFIG_NODES:,} values (at '{path[:80]}'); a config is a few "
                f"hundred. YAML aliases (&name / *name) that nest can expand exponentially (a 'billion laughs' "
                f"document); write the values out, or keep large data out of the config."
            )
        if isinstance(value, dict):
            stack.extend((v, f"{path}.{str(k)[:40]}" if path else str(k)[:40]) for k, v in value.items())
            stack.extend((k, path) for k in value if isinstance(k, str) and len(k) > MAX_STRING_CHARS)
        elif isinstance(value, (list, tuple)):
            stack.extend((v, f"{path}.{i}") for i, v in enumerate(value))
        elif (
            isinstance(value, str)
            and len(value) > MAX_STRING_CHARS
            and not (path == "env.kwargs" or path.startswith("env.kwargs."))
        ):
            raise ConfigError(
                f"'{path or 'key'}' in {where} is a string of {len(value):,} characters ({shorten(value, 40)}); "
                f"no rlgraph name or setting is longer than {MAX_STRING_CHARS:,} characters. Check the file "
                f"or the --set value for a pasted blob or a missing line break."
            )
