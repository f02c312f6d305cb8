"""Shared test setup: quiet TensorFlow, headless matplotlib, no progress bars."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


import contextlib  # noqa: E402
import subprocess  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture
def read_only_dir(tmp_path):
    """An empty folder nothing can be written into: a tmpfs remounted read-only when running as
    root (permissions do not stop root), else a folder without write permission."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(folder)], capture_output=True
    ).returncode:
        pytest.skip("running as root without a read-only mount: permissions would not stop root")
    try:
        yield folder
    finally:
        with contextlib.suppress(OSError):
            subprocess.run(["umount", str(folder)], capture_output=True)
