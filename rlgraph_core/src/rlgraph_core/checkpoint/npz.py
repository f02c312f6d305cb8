"""Reading ``.npz`` files safely: every ``.npy`` header checked (manifest, size, no object dtype)
before any data is read, and never unpickling.
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path
from typing import Any, Callable

import numpy as np
from numpy.lib import format as npy_format

from rlgraph_core.errors import CheckpointError


Headers = dict[str, tuple[tuple[int, ...], np.dtype]]

#: The most bytes an ``.npy`` member may hold beyond its data (magic, header dict, padding).
_MAX_NPY_HEADER = 65_536 + 16


def _npy_header(zf: zipfile.ZipFile, member: str) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from the ``.npy`` header of ``member``, without reading its data."""
    with zf.open(member) as f:
        version = npy_format.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = npy_format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, _, dtype = npy_format.read_array_header_2_0(f)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
    if any(d < 0 for d in shape):
        raise ValueError(f"negative dimension in shape {shape}")
    return tuple(int(d) for d in shape), dtype


def _read_npz(
    path: Path,
    shown: Path,
    manifest: Any,
    check: Callable[[Headers], None],
    skip: Callable[[str], bool] = lambda name: False,
) -> dict[str, np.ndarray]:
    """Check the arrays of ``path`` by their headers (manifest, then ``check``), then read them.

    Nothing is read beyond the headers until every array passed; members ``skip`` names are
    checked against the manifest only and not read. Never unpickles.
    """
    if not isinstance(manifest, dict):
        raise CheckpointError(f"The manifest for '{shown}' in meta.json is not a mapping; corrupt checkpoint.")
    corrupt = (OSError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError, RuntimeError)
    try:
        zf = zipfile.ZipFile(path)
    except corrupt as exc:
        raise CheckpointError(f"Checkpoint file '{shown}' is corrupt or not an npz archive ({exc}).") from None
    with zf:
        members = zf.namelist()
        if len(members) != len(set(members)):
            raise CheckpointError(f"Checkpoint file '{shown}' names an array twice; corrupt checkpoint.")
        headers: Headers = {}
        for member in members:
            if not member.endswith(".npy"):
                raise CheckpointError(
                    f"Checkpoint file '{shown}' holds '{member}', which is not an .npy array; corrupt checkpoint."
                )
            try:
                shape, dtype = _npy_header(zf, member)
            except corrupt as exc:
                raise CheckpointError(
                    f"Checkpoint file '{shown}' is corrupt: the header of array '{member[:-4]}' is unreadable ({exc})."
                ) from None
            if dtype.hasobject:
                raise CheckpointError(
                    f"Checkpoint file '{shown}' holds array '{member[:-4]}' of object dtype. Object arrays need "
                    f"pickle to load, and rlgraph never loads with allow_pickle; corrupt or malicious checkpoint."
                )
            data_bytes = math.prod(shape) * dtype.itemsize
            if zf.getinfo(member).file_size > data_bytes + _MAX_NPY_HEADER:
                raise CheckpointError(
                    f"Checkpoint file '{shown}': array '{member[:-4][:60]}' inflates to "
                    f"{zf.getinfo(member).file_size:,} bytes, but its header describes {data_bytes:,} bytes of "
                    f"data; corrupt or malicious checkpoint. Nothing was loaded."
                )
            headers[member[:-4]] = (shape, dtype)
        if set(headers) != set(manifest):
            raise CheckpointError(
                f"Checkpoint file '{shown}' holds arrays {sorted(headers)[:5]}... but its manifest "
                f"lists {sorted(manifest)[:5]}...; the checkpoint is corrupt."
            )
        for name, entry in manifest.items():
            shape, dtype = headers[name]
            try:
                want_shape, want_dtype = entry
                matches = list(shape) == list(want_shape) and str(dtype) == want_dtype
            except (TypeError, ValueError):
                raise CheckpointError(
                    f"The manifest entry for '{name}' of '{shown}' is {entry!r}, not [shape, dtype]; corrupt checkpoint."
                ) from None
            if not matches:
                raise CheckpointError(
                    f"Array '{name}' in '{shown}' has shape {list(shape)} dtype {dtype}, but the manifest says "
                    f"{want_shape} {want_dtype}; corrupt checkpoint."
                )
        wanted = {name: header for name, header in headers.items() if not skip(name)}
        check(wanted)
        arrays = {}
        for name in wanted:
            try:
                with zf.open(name + ".npy") as f:
                    arrays[name] = npy_format.read_array(f, allow_pickle=False)
            except corrupt as exc:
                raise CheckpointError(
                    f"Checkpoint file '{shown}' is corrupt: array '{name}' cannot be read ({exc})."
                ) from None
    return arrays
