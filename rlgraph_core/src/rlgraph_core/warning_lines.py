"""rlgraph's own warnings as one line each on a command's stderr: ``rlgraph: warning: MESSAGE``.

Python shows a warning as ``FILE:LINE: RuntimeWarning: MESSAGE`` plus the source line, which
is noise for a user of the command line, and the same warning can come from two places (a
plugin manager made twice). While :func:`warning_lines` is active (the ``rlgraph`` command
wraps every subcommand in it), a warning raised by rlgraph's code, or whose message starts with
``rlgraph``, is printed as one line, each message once; other libraries' warnings keep Python's
format. Python users of the facade get ordinary Python warnings (filterable as usual).
"""

from __future__ import annotations

import contextlib
import re
import sys
import warnings
from typing import Iterator

__all__ = ["warning_lines"]

#: A source file of one of rlgraph's distributions (``.../rlgraph_core/...``, ``.../rlgraph_ray/...``).
_OWN_FILE = re.compile(r"[\\/]rlgraph_[a-z]+[\\/]|[\\/]rlgraph-[a-z-]+[\\/]")
#: The prefix some messages carry already (``rlgraph: ...``, ``rlgraph-ray: ...``).
_PREFIX = re.compile(r"^rlgraph(?:-[a-z]+)?:\s*")


def is_own_warning(message: str, filename: str) -> bool:
    """Whether a warning is rlgraph's: raised in its code or worded as its own."""
    return bool(_PREFIX.match(message) or _OWN_FILE.search(filename or ""))


@contextlib.contextmanager
def warning_lines() -> Iterator[None]:
    """Within the block, print rlgraph's warnings as ``rlgraph: warning: MESSAGE`` (each once)."""
    seen: set[str] = set()
    with warnings.catch_warnings():  # restores warnings.showwarning and the filters afterwards
        shown_before = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):
            text = str(message)
            if not is_own_warning(text, filename):
                shown_before(message, category, filename, lineno, file, line)
                return
            text = " ".join(_PREFIX.sub("", text, count=1).split())
            if text not in seen:
                seen.add(text)
                print(f"rlgraph: warning: {text}", file=sys.stderr)

        warnings.showwarning = show
        yield
