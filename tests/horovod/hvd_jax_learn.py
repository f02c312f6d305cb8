"""Run on every rank by test_hvd_jax: a short PPO run on the jax backend through the facade.

Usage: ``hvd_jax_learn.py MODE TOTAL_TIMESTEPS TARGET_RETURN OUT_DIR``. Each rank makes the shipped
PPO CartPole config with ``backend="jax"`` and the ``horovod`` executor, learns (rank 0 writes the
run folder ``OUT_DIR/run``: metrics, checkpoint, summary), then writes its final weights to
``OUT_DIR/rank<r>.npz`` and its summary to ``OUT_DIR/rank<r>.json``, so the test can compare the
ranks' weights after the last update.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from rlgraph_core import make
from rlgraph_horovod.ranks import launched_rank

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def main(mode: str, total: int, target: float, out: Path) -> None:
    rank = launched_rank()
    algo = make(
        str(CONFIGS / "ppo_cartpole.yaml"),
        backend="jax",
        mode=mode,
        executor={"type": "horovod", "check_interval": 10, "num_ranks": 2},
        train={"eval_interval": 2048, "eval_episodes": 5, "log_interval": 2048, "target_return": target},
    )
    algo.learn(total, out=out / "run" if rank == 0 else None)
    np.savez(out / f"rank{rank}.npz", **algo.agent.get_weights())
    summary = {k: v for k, v in algo.last_summary.items() if isinstance(v, (int, float, str, bool, type(None)))}
    (out / f"rank{rank}.json").write_text(json.dumps(summary))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), Path(sys.argv[4]))
