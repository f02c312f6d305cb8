"""The ``rlgraph tune`` command line (argument definitions only: nothing heavy is imported here)."""

from __future__ import annotations

from types import SimpleNamespace


def _add_arguments(p) -> None:
    p.add_argument("config", help="YAML/JSON config file or the name of a shipped config")
    p.add_argument(
        "--space",
        required=True,
        help="YAML search space over config paths, e.g. agent.optimizer.learning_rate: {loguniform: [1e-4, 1e-2]}",
    )
    p.add_argument("--samples", type=int, default=8, help="number of trials (default 8)")
    p.add_argument("--scheduler", choices=["fifo", "asha"], default="asha", help="trial scheduler (default asha)")
    p.add_argument("--searcher", choices=["random", "optuna"], default="random", help="search algorithm")
    p.add_argument("--max-concurrent", type=int, default=None, help="trials run at once (default: as CPUs allow)")
    p.add_argument("--cpus-per-trial", type=float, default=1.0, help="CPUs reserved per trial (default 1)")
    p.add_argument("--out", default=None, help="results folder (default runs/tune_<config>)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted search in --out (Tune's restore)")
    p.add_argument(
        "--address",
        default=None,
        help="Ray cluster to run the trials on: auto, host:port or ray://host:port, as the Ray executors' "
        "executor.address (default: a private local Ray)",
    )
    p.add_argument(
        "--connect-timeout-s",
        type=float,
        default=10.0,
        help="seconds to reach --address before the search fails (default 10)",
    )
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field in every trial")


def _run(args) -> int:
    from rlgraph_ray.tune import run_tune  # deferred: the search module loads only when the command runs

    return run_tune(args)


#: The command object the ``rlgraph_commands`` hook returns.
TUNE_COMMAND = SimpleNamespace(
    help="hyperparameter search on Ray Tune (each trial an ordinary rlgraph run)",
    add_arguments=_add_arguments,
    run=_run,
)
