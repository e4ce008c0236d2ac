"""Does a change of the compiled core make the lean step faster? Two builds of draftlattice (a
copy of ``python/draftlattice`` with each build's ``_core``, e.g. ``cp -r python/draftlattice
/tmp/a/`` before the change and ``/tmp/b/`` after ``make dev``) time the default model's step
against the nodes it verifies, in child processes alternated round by round (A, B, A, B, ...;
two builds of one extension cannot share a process). Reports each build's median and the
median of the paired ratios B / A with their spread: on a shared VM the machine's speed drifts by
10-20% between minutes, far more than most kernel changes, and a pair measured back to back
shares the drift.

    python bench/build_ab.py /tmp/a /tmp/b [--rounds 6] [--nodes 1 2 3 4 6 8 16] [--weights int4] [--kernel K]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys


def child(args: argparse.Namespace) -> None:
    """One build's cost curve (the fastest of ``--repeats`` per node count, as the fit measures it)."""
    import torch

    from draftlattice.default_model import load_default
    from draftlattice.lean.fit import measure_cost_curve

    torch.set_num_threads(args.threads)
    bundle = load_default(weights=args.weights, kernel=args.kernel)
    with bundle.step.session():
        curve = measure_cost_curve(bundle.step, nodes=tuple(args.nodes), repeats=args.repeats)
    print(json.dumps({"kernel": getattr(bundle.step, "kernel", ""), "ms": list(curve.ms)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("builds", nargs=2, help="two folders, each holding a draftlattice package")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 3, 4, 6, 8, 16])
    parser.add_argument("--repeats", type=int, default=15, help="timed steps per node count in a child")
    parser.add_argument("--weights", default="int4")
    parser.add_argument("--kernel", default="auto", help="the quantized step's kernel (auto: the fastest here)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    for build in args.builds:
        if not os.path.isfile(os.path.join(build, "draftlattice", "__init__.py")):
            raise SystemExit(f"{build}: no draftlattice package in it (copy python/draftlattice there)")
    flags = [f"--{name}" for name in ("weights", "kernel", "threads", "repeats")]
    values = [args.weights, args.kernel, str(args.threads), str(args.repeats)]
    command = [sys.executable, __file__, *args.builds, "--child", "--nodes", *map(str, args.nodes)]
    command += [item for pair in zip(flags, values) for item in pair]
    runs: dict[str, list[list[float]]] = {build: [] for build in args.builds}
    for round_ in range(args.rounds):
        for build in args.builds:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([build, os.path.dirname(__file__)])}
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"{build}: the child failed:\n{done.stderr[-2000:]}")
            result = json.loads(done.stdout.strip().splitlines()[-1])
            runs[build].append(result["ms"])
            print(f"round {round_ + 1} {build} ({result['kernel']}): {result['ms']}", file=sys.stderr, flush=True)
    a, b = args.builds
    print(
        f"{platform.processor() or platform.machine()}, {args.threads} threads, {args.weights} step, "
        f"{args.rounds} alternated rounds; ms per step, medians; B / A paired"
    )
    print(f"| nodes | A: {a} | B: {b} | B / A (median) | B / A (min - max) |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for i, nodes in enumerate(args.nodes):
        ms_a = [run[i] for run in runs[a]]
        ms_b = [run[i] for run in runs[b]]
        ratios = [y / x for x, y in zip(ms_a, ms_b)]
        print(
            f"| {nodes} | {statistics.median(ms_a):.2f} | {statistics.median(ms_b):.2f} | "
            f"{statistics.median(ratios):.3f} | {min(ratios):.2f} - {max(ratios):.2f} |"
        )


if __name__ == "__main__":
    main()
