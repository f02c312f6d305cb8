"""Launching ``horovodrun -np 2 -H localhost:2 --gloo`` from a test, with a hard timeout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent
HERE = Path(__file__).resolve().parent
CONFIGS = HERE.parents[1] / "configs"


def rank_env() -> dict[str, str]:
    """Environment of the ranks: quiet TF, headless plots, one compute thread per rank (2 ranks
    share this machine's cores; idle intra-op threads only slow tiny networks down)."""
    env = dict(os.environ)
    env.update(
        TF_CPP_MIN_LOG_LEVEL="3",
        TF_ENABLE_ONEDNN_OPTS="0",
        MPLBACKEND="Agg",
        OMP_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def horovodrun_cmd(*command: str, np_: int = 2) -> list[str]:
    """``horovodrun`` starting ``command`` on ``np_`` local ranks over Gloo."""
    return [str(BIN / "horovodrun"), "-np", str(np_), "-H", f"localhost:{np_}", "--gloo", *command]


def discovery_script(folder: Path) -> Path:
    """A ``--host-discovery-script`` offering this machine as two one-slot hosts.

    Horovod blacklists the host of a rank that dies and stops a job whose hosts are all
    blacklisted, so one ``localhost:2`` would end the job; ``localhost`` and ``127.0.0.1`` are
    both this machine (spawned locally, no ssh), and losing one leaves the other.
    """
    script = folder / "discover_hosts.sh"
    script.write_text("#!/bin/sh\necho localhost:1\necho 127.0.0.1:1\n")
    script.chmod(0o755)
    return script


def horovodrun_elastic_cmd(*command: str, discovery: Path, min_np: int = 1, max_np: int = 2) -> list[str]:
    """Elastic ``horovodrun``: ``max_np`` ranks to start, down to ``min_np`` after losses."""
    return [
        str(BIN / "horovodrun"),
        "-np",
        str(max_np),
        "--min-np",
        str(min_np),
        "--max-np",
        str(max_np),
        "--host-discovery-script",
        str(discovery),
        "--gloo",
        *command,
    ]


def run_horovod(
    *command: str, timeout: float, np_: int = 2, launcher: list[str] | None = None
) -> subprocess.CompletedProcess:
    """Run ``command`` under horovodrun (or the given ``launcher`` prefix); a hang fails the test
    after ``timeout`` seconds."""
    try:
        return subprocess.run(
            [*launcher, *command] if launcher is not None else horovodrun_cmd(*command, np_=np_),
            env=rank_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=HERE,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"horovodrun did not finish within {timeout} s (a rank hangs?)\n{exc.stdout}\n{exc.stderr}"
        ) from None


def rlgraph_train(*args: str) -> list[str]:
    """The ``rlgraph train`` command line of this interpreter's venv."""
    return [str(BIN / "rlgraph"), "train", *args, "--no-progress"]
