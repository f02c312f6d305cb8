"""Check a run's output folder (``--out``) before anything is built.

:func:`check_out_dir` refuses, with one paragraph each, an output path that names an existing
file, lies under a file, cannot be created or written (permissions, a read-only or virtual file
system), or is not a valid path at all (a NUL character, a name or path too long). It creates
nothing: a folder that does not exist yet is created by the run itself, so a config that fails
validation afterwards (or a ``--dry-run``) leaves no trace.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from rlgraph_core.errors import ConfigError

__all__ = ["check_out_dir", "check_out_file"]


def _fail(option: str, path: str | os.PathLike, problem: str) -> ConfigError:
    shown = os.fspath(path)
    shown = shown if len(shown) <= 160 else f"{shown[:100]}...{shown[-40:]}"
    return ConfigError(
        f"{option} '{shown}' cannot be used as the output folder: {problem}. Pass a folder "
        f"that exists and is writable, or a new one whose parent is."
    )


def _limit(folder: Path, name: str, default: int) -> int:
    try:
        return int(os.pathconf(folder, name))
    except (OSError, ValueError, AttributeError):
        return default


def _nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists (the file-system root at worst)."""
    current = path
    while not os.path.lexists(current) and current != current.parent:
        current = current.parent
    return current


def _probe_writable(folder: Path) -> str | None:
    """Create and remove a temporary folder in ``folder``; the OS's reason if that fails."""
    try:
        probe = tempfile.mkdtemp(prefix=".rlgraph-probe-", dir=folder)
    except OSError as exc:
        return exc.strerror or str(exc)
    shutil.rmtree(probe, ignore_errors=True)
    return None


def check_out_dir(path: str | os.PathLike, option: str = "--out") -> Path:
    """Check that ``path`` can be the output folder of a run; return it as a :class:`Path`.

    The folder may exist (it must then be a writable folder) or not (then its nearest existing
    ancestor must be a writable folder and every new name must be a valid one). Nothing is left
    behind: writability is probed with a temporary folder that is removed at once.

    ``option`` is how the caller names the path in the message (``--out`` on the command line,
    ``out=`` from Python).

    Raises:
        ConfigError: naming the path and what is wrong with it.
    """
    text = os.fspath(path)
    if not text.strip():
        raise _fail(option, text, "the path is empty")
    if "\0" in text:
        raise _fail(option, text.replace("\0", "\\0"), "the path contains a NUL character")
    out = Path(text).expanduser()
    absolute = Path(os.path.abspath(out))
    ancestor = _nearest_existing(absolute)
    name_max = _limit(ancestor, "PC_NAME_MAX", 255)
    for part in absolute.relative_to(ancestor).parts:
        if len(os.fsencode(part)) > name_max:
            raise _fail(
                option, text, f"the name '{part[:40]}...' is longer than the {name_max} bytes this file system allows"
            )
    path_max = _limit(ancestor, "PC_PATH_MAX", 4096)
    if len(os.fsencode(str(absolute))) >= path_max:
        raise _fail(option, text, f"the path is longer than the {path_max} bytes this file system allows")
    if ancestor == absolute:
        if not os.path.exists(absolute):
            raise _fail(option, text, "it is a broken symbolic link")
        if not os.path.isdir(absolute):
            raise _fail(option, text, "it is an existing file, not a folder")
        problem = _probe_writable(absolute)
        if problem:
            raise _fail(option, text, f"the folder is not writable ({problem})")
        return out
    if not os.path.isdir(ancestor):
        raise _fail(
            option,
            text,
            f"'{ancestor}' is not a folder (a file or a broken link), so no folder can be created under it",
        )
    problem = _probe_writable(ancestor)
    if problem:
        raise _fail(option, text, f"it would be created in '{ancestor}', which is not writable ({problem})")
    return out


def check_out_file(path: str | os.PathLike, option: str = "--out", example: str = "policy.onnx") -> Path:
    """Check that ``path`` can be written as a file (a new one, or one replaced); return it.

    Refused, in one paragraph: an existing folder (``example`` names the file to write in it), a
    folder that does not exist, and one that cannot be written (permissions, a read-only or
    virtual file system such as ``/proc``). Nothing is created.
    """
    text = os.fspath(path)
    shown = text if len(text) <= 160 else f"{text[:100]}...{text[-40:]}"
    out = Path(text).expanduser()
    if not text.strip() or "\0" in text:
        raise ConfigError(
            f"{option} '{shown.replace(chr(0), '?')}' is not a valid file path; pass one such as {example}."
        )
    if out.is_dir():
        raise ConfigError(f"{option} '{shown}' is an existing folder; pass the file to write, e.g. {out / example}.")
    parent = Path(os.path.abspath(out)).parent
    if not parent.is_dir():
        raise ConfigError(
            f"{option} '{shown}': the folder '{parent}' does not exist; create it first or pass another path."
        )
    problem = _probe_writable(parent)
    if problem:
        raise ConfigError(
            f"{option} '{shown}' cannot be written: its folder '{parent}' is not writable ({problem}). Pass a path "
            f"in a writable folder."
        )
    return out
