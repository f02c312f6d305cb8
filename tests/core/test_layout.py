"""The nox sessions run several test folders in one pytest call, so their module names must differ."""

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
#: Folders that a nox session collects together (``core`` with each backend's folder).
SESSIONS = (("core", "torch"), ("core", "tf"))


def test_test_module_basenames_are_unique_within_a_session():
    for folders in SESSIONS:
        names = Counter(p.name for folder in folders for p in (TESTS / folder).glob("test_*.py"))
        clashes = sorted(name for name, count in names.items() if count > 1)
        assert not clashes, f"{' + '.join(folders)} share test module names {clashes}; rename one side"
