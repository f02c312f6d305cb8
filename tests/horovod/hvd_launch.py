"""Launching ``horovodrun -np 2 -H localhost:2 --gloo`` from a test, with a hard timeout."""

from __future__ import annotations

import json
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
            f"horovodrun did not finish within {timeout} s (a hang detector, sized at several times the "
            f"run's time on a loaded machine: a rank hangs?); {run_progress(command)}\n"
            f"{_text(exc.stdout)[-4000:]}\n{_text(exc.stderr)[-4000:]}"
        ) from None


def _text(data: bytes | str | None) -> str:
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data or ""


def run_progress(command: tuple[str, ...] | list[str]) -> str:
    """How far a run got: the last row of ``metrics.jsonl`` in the command's ``--out`` folder."""
    args = list(command)
    if "--out" not in args or args.index("--out") + 1 >= len(args):
        return "progress unknown (no --out folder in the command)"
    metrics = Path(args[args.index("--out") + 1]) / "metrics.jsonl"
    rows = metrics.read_text().splitlines() if metrics.is_file() else []
    if not rows:
        return f"no metrics row written yet in {metrics}"
    try:
        last = json.loads(rows[-1])
    except ValueError:
        return f"last metrics row unreadable: {rows[-1][:200]}"
    keys = ("timesteps", "wall_time", "episode_return_mean", "eval_return_mean")
    return "the run got to " + ", ".join(f"{k}={last.get(k)}" for k in keys)


def rlgraph_train(*args: str) -> list[str]:
    """The ``rlgraph train`` command line of this interpreter's venv."""
    return [str(BIN / "rlgraph"), "train", *args, "--no-progress"]
