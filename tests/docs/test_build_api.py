"""The docs session's reference check (``docs/build_api.py``) finds a broken reference and accepts
good ones: names of the docstring's module, of its class (instance attributes too), and absolute
paths. Runs in the ``docs`` nox session, where pdoc is installed."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pdoc")

ROOT = Path(__file__).resolve().parents[2]


def _build_api():
    spec = importlib.util.spec_from_file_location("build_api", ROOT / "docs" / "build_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_broken_references_are_found_and_good_ones_pass(tmp_path, monkeypatch):
    (tmp_path / "refmod.py").write_text(
        textwrap.dedent(
            '''
            """A module: :func:`helper`, :class:`Thing`, :mod:`json`, :func:`json.dumps`, :func:`nowhere`."""
            import json


            def helper():
                """Calls :meth:`Thing.run` and :func:`~json.loads`, not :class:`json.Nothing`."""


            class Thing:
                """Has :attr:`count` (set in ``__init__``) and :meth:`run`; not :meth:`walk`."""

                def __init__(self):
                    self.count = 0

                def run(self):
                    """Counts into :attr:`count`."""
            '''
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("refmod", None)
    broken = _build_api().broken_references(["refmod"])
    assert broken == [
        "refmod.Thing: reference to 'walk' resolves to nothing",
        "refmod.helper: reference to 'json.Nothing' resolves to nothing",
        "refmod: reference to 'nowhere' resolves to nothing",
    ]
