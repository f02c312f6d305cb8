"""The per-env-step breakdown of this tree against the previous release, same machine, same run.

Reads the previous release's commit from ``benchmarks/release_reference.json`` (``--ref`` overrides
it), exports that commit into a temporary folder (``git archive``), and runs
``bench_act.py --breakdown`` on both trees in alternating child processes (``--repeats`` each,
so a load spike does not always hit the same side). Prints both tables, the ratio row of every
part (this tree / release) and, per variant, env steps per CPU-second of the whole loop (1e6 /
total µs). Run on an otherwise idle core, e.g.::

    taskset -c 0 python benchmarks/breakdown_vs_release.py                 # PPO torch eager + static
    python benchmarks/breakdown_vs_release.py --repeats 5 --fail-above 1.05  # release check

``--fail-above R`` exits 1 when the total of any variant is more than ``R`` times the release's
(a release-checklist gate, never a test: timings belong in benchmarks). When a release is cut,
set ``ref`` in the JSON file to its commit.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import bench_act

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = Path(__file__).with_name("release_reference.json")


def export_tree(ref: str, dest: Path) -> str:
    """Write commit ``ref`` of this repository into ``dest``; return its full id."""
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{ref}^{{commit}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return commit


def totals(results: dict) -> dict:
    """``{(algo, variant): total µs per env step}``."""
    return {(a, v): row["total"] for a, rows in results.items() for v, row in rows.items()}


def main() -> int:
    reference = json.loads(REFERENCE.read_text())
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ref", default=reference["ref"], help=f"the release's commit (default {reference['ref']})")
    p.add_argument("--algos", default=reference["algos"], help="comma-separated: ppo, dqn, sac")
    p.add_argument("--variants", default=reference["variants"], help="comma-separated backend-mode")
    p.add_argument("--steps", type=int, default=640, help="timed vector steps per child run")
    p.add_argument("--block", type=int, default=160, help="vector steps per interleaved block")
    p.add_argument("--repeats", type=int, default=3, help="alternating child runs per tree")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    p.add_argument("--fail-above", type=float, default=None, help="exit 1 if a total exceeds R x the release's")
    args = p.parse_args()
    child_args = argparse.Namespace(
        algos=args.algos.split(","),
        variants=args.variants.split(","),
        steps=args.steps,
        block=args.block,
        seed=args.seed,
        threads=1,
        clock=args.clock,
        breakdown=True,
    )
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory(prefix="rlgraph_release_") as tmp:
        tree = Path(tmp) / "tree"
        tree.mkdir()
        commit = export_tree(args.ref, tree)
        before, after = [], []
        for i in range(args.repeats):
            order = [("release", str(tree)), ("this", None)]
            for name, where in order if i % 2 == 0 else reversed(order):
                out = Path(tmp) / f"{name}{i}.json"
                (before if name == "release" else after).append(bench_act._child(where, child_args, out))
    base, now = bench_act._median_results(before), bench_act._median_results(after)
    label = (
        f"median of {args.repeats} alternating child runs, {args.steps} vector steps each, {args.clock} time, "
        f"load average now {os.getloadavg()[0]:.1f}"
    )
    bench_act.print_breakdown(f"RELEASE {commit[:10]} ({reference.get('what', '')}), {label}", base)
    bench_act.print_breakdown(f"THIS TREE, {label}", now, base)
    print("\nenv steps per CPU-second of the whole loop (1e6 / total µs):")
    worst = 0.0
    t_base, t_now = totals(base), totals(now)
    for key, total in t_now.items():
        ratio = total / t_base[key]
        worst = max(worst, ratio)
        print(
            f"  {key[0]} {key[1]:<14} release {1e6 / t_base[key]:>8.0f}   this tree {1e6 / total:>8.0f}   "
            f"time ratio {ratio:.2f}"
        )
    if args.fail_above is not None and worst > args.fail_above:
        print(f"FAIL: a variant's per-step time is {worst:.2f}x the release's (limit {args.fail_above})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
