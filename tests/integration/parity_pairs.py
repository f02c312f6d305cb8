"""Which ``(backend, mode)`` pairs the cross-backend parity tests compare, and with what.

The compared pairs are every installed framework backend in both modes (from
:func:`rlgraph_core.testing.backend_pairs`, so ``RLGRAPH_TEST_BACKENDS`` narrows them; the numpy
harness has no automatic differentiation and is left out). Each is compared with the *reference
pair*, torch eager where torch is installed; in addition each other backend's static mode is
compared with its own eager mode (tf static against tf eager). A pair is never compared with
itself: such a test could not fail.

Test ids read ``<compared>-vs-<reference>``, e.g. ``tf-static-vs-torch-eager``.
"""

from __future__ import annotations

from typing import Callable, Iterable

import pytest

from rlgraph_core.testing import backend_pairs

Pair = tuple[str, str]

PREFERRED_REFERENCE: Pair = ("torch", "eager")
PAIRS: list[Pair] = [p for p in backend_pairs() if p[0] != "numpy"]
REFERENCE: Pair | None = (
    PREFERRED_REFERENCE
    if PREFERRED_REFERENCE in PAIRS
    else next((p for p in PAIRS if p[1] == "eager"), PAIRS[0] if PAIRS else None)
)


def pair_id(pair: Pair) -> str:
    """``torch-eager`` for ``("torch", "eager")``."""
    return f"{pair[0]}-{pair[1]}"


def comparisons(keep: Callable[[Pair], bool] = lambda pair: True) -> list[tuple[Pair, Pair]]:
    """``(reference, compared)`` pairs: every pair ``keep`` accepts against the reference pair,
    and each non-reference backend's static mode against its eager mode."""
    out = [(REFERENCE, p) for p in PAIRS if p != REFERENCE and keep(p)]
    for name in dict.fromkeys(n for n, _ in PAIRS):
        eager, static = (name, "eager"), (name, "static")
        if REFERENCE is not None and name != REFERENCE[0] and eager in PAIRS and static in PAIRS and keep(static):
            out.append((eager, static))
    assert all(ref != other for ref, other in out), out
    return out


def comparison_id(ref: Pair, other: Pair) -> str:
    """``tf-static-vs-torch-eager``."""
    return f"{pair_id(other)}-vs-{pair_id(ref)}"


def comparison_params(
    keep: Callable[[Pair], bool] = lambda pair: True, marks_for: Callable[[Pair], Iterable] = lambda pair: ()
):
    """pytest params ``(reference, compared)`` with ``comparison_id`` ids; ``marks_for(compared)``
    gives extra marks (e.g. ``slow`` for torch static)."""
    return [
        pytest.param(ref, other, id=comparison_id(ref, other), marks=list(marks_for(other)))
        for ref, other in comparisons(keep)
    ]


def slow_if_torch_static(pair: Pair) -> list:
    """``torch.compile`` costs seconds per function on CPU: those comparisons are marked slow."""
    return [pytest.mark.slow] if pair == ("torch", "static") else []
