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


def run_horovod(*command: str, timeout: float, np_: int = 2) -> subprocess.CompletedProcess:
    """Run ``command`` under horovodrun; a hang fails the test after ``timeout`` seconds."""
    try:
        return subprocess.run(
            horovodrun_cmd(*command, np_=np_),
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
