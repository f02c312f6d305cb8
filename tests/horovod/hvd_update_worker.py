"""Run on every rank by test_hvd_updates: K gradient updates on per-rank batches, weights saved.

Usage: ``hvd_update_worker.py BACKEND MODE:ALGO[+ALGO][,MODE:ALGO...] K OUT_DIR`` (e.g.
``eager:dqn+ppo,static:dqn``). Each rank builds the named agents with its own seed (so their initial weights differ), takes rank 0's state through the
executor's broadcast, learns ``K`` times from batches only it sees with the executor's gradient
hook, and writes ``OUT_DIR/<algo>-<mode>-rank<r>.npz`` (start and final weights).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from rlgraph_core.assemble import make_backend
from rlgraph_horovod.collectives import TimedAllreduce, collectives_for
from rlgraph_horovod.state_sync import broadcast_agent
import hvd_batches


def main(backend_name: str, modes: str, k: int, out: Path) -> None:
    coll = collectives_for(make_backend(backend_name, "eager", device="cpu", seed=0))
    rank = coll.rank
    for case in modes.split(","):
        mode, algos = case.split(":")
        for algo in algos.split("+"):
            backend = make_backend(backend_name, mode, device="cpu", seed=rank)
            backend.set_num_threads(1)
            agent = hvd_batches.make_agent(algo, backend, seed=rank)
            broadcast_agent(coll, agent, seed=rank)
            start = agent.get_weights()
            hook = TimedAllreduce(coll)
            agent.set_gradient_hook(hook)
            for step in range(k):
                agent.learn(hvd_batches.batch(algo, rank, step))
            final = agent.get_weights()
            np.savez(
                out / f"{algo}-{mode}-rank{rank}.npz",
                **{f"start/{n}": v for n, v in start.items()},
                **{f"final/{n}": v for n, v in final.items()},
                calls=np.array(hook.calls),
            )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]))
