"""The pip command that installs an optional part, from where rlgraph-core itself was installed.

Before a release ``pip install "rlgraph-core[tf]"`` cannot work (and ``pip install rlgraph``
installs an unrelated project), so a hint names what does: when rlgraph-core was installed from
a checkout (PEP 610's ``direct_url.json`` in its metadata names a local folder), the sibling
folder of the checkout (``pip install -e ./rlgraph_tf``, ``pip install -e "./rlgraph_core[atari]"``,
``-e`` only where rlgraph-core itself is editable); otherwise the extra of the installed
distribution (``pip install "rlgraph-core[atari]"``).
"""

from __future__ import annotations

import functools
import json
import os
from importlib import metadata as md
from pathlib import Path
from urllib.parse import unquote, urlparse

__all__ = ["checkout_install", "extra_install_command"]

#: The distribution this package is installed as.
CORE_DISTRIBUTION = "rlgraph-core"


@functools.lru_cache(maxsize=1)
def checkout_install() -> tuple[Path, bool] | None:
    """``(checkout root, editable)`` when rlgraph-core was installed from a local folder (a
    checkout: the folder holding ``rlgraph_core/``), else None (a wheel, an index, no metadata)."""
    try:
        text = md.distribution(CORE_DISTRIBUTION).read_text("direct_url.json")
    except md.PackageNotFoundError:
        return None
    if not text:
        return None
    try:
        info = json.loads(text)
    except ValueError:
        return None
    url = urlparse(str(info.get("url", "")))
    if url.scheme != "file" or not isinstance(info.get("dir_info"), dict):
        return None  # an archive or a VCS URL: not a folder one can point pip at again
    folder = Path(unquote(url.path))
    return folder.parent, bool(info["dir_info"].get("editable"))


def _shown(path: Path) -> str:
    """``path`` as a user types it: ``./rlgraph_tf`` below the current folder, else absolute."""
    try:
        rel = path.relative_to(Path(os.getcwd()))
    except ValueError:
        return str(path)
    return f"./{rel.as_posix()}"


def _folder_of(root: Path, distribution: str) -> Path:
    """The checkout folder of ``distribution``: ``rlgraph_tf/`` at the top, or ``plugins/<name>/``."""
    top = root / distribution.replace("-", "_")
    if top.is_dir() or not (root / "plugins" / distribution).is_dir():
        return top
    return root / "plugins" / distribution


def extra_install_command(extra: str | None, distribution: str | None = None) -> str:
    """The pip command for rlgraph-core's ``extra`` (which brings ``distribution``, an rlgraph
    plugin, where given), as it works from where rlgraph-core was installed."""
    checkout = checkout_install()
    if checkout is None:
        if extra is None:
            return f"pip install {distribution or CORE_DISTRIBUTION}"
        return f'pip install "{CORE_DISTRIBUTION}[{extra}]"'
    root, editable = checkout
    flag = "-e " if editable else ""
    if distribution is not None and distribution != CORE_DISTRIBUTION:
        return f"pip install {flag}{_shown(_folder_of(root, distribution))}"
    core = _shown(root / "rlgraph_core")
    return f'pip install {flag}"{core}[{extra}]"' if extra else f"pip install {flag}{core}"
