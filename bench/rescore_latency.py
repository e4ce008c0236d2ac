"""Rescoring latency: draftlattice.rescore against OpenFST on the same lattices, same run.

For p in {1,2,4,8,16} at h=8, k=16, and 1-best over h in {4,8,16} x k in {2,4,8,16} (the shapes
of Kim et al. 2024, Tables 12-13), with the word-level 4-gram ../shared/data/lm/wt2_kn4.arpa.xz
(token ids = the ARPA's words in unigram order) and two kinds of lattices (unigram draws;
plausible WikiText-2 continuations, see _fst_reference.LatticeMaker), it prints the median
latency per lattice of

  ours          draftlattice.rescore(lattice, lm, p, alpha, context, bos=False)
  ours C++      the same search timed inside C++ (_core.rescore_seconds: no Python call, the
                context's start state walked once, untimed), i.e. the work OpenFST's time covers.
                It runs after the public and _core runs of the same lattice: at large shapes it
                also gains from a warmer machine (whichever engine is timed first after a lattice
                switch runs about 20% slower at 8x16 even after its warm-up run), so only at small
                shapes does "ours" minus "ours C++" measure the call overhead
  OpenFST exact C++ (libfst-dev): lazy ComposeFst(lattice, LM) with a PhiMatcher (failure
                arcs: exact Katz backoff) + ShortestPath(nshortest=p)   [bench/openfst/lmfst.cc]
  pynini eps    pynini.compose(lattice, LM with epsilon backoff) + shortestpath(nshortest=p,
                unique=p>1): the usual approximation

and checks that ours equals OpenFST exact on every lattice (all p scores within 1e-3 nats, the
paths equal up to ties), and counts how often the epsilon approximation's best draft differs
from the exact best. Lattices are built before timing for every engine; the context (the 3
WikiText words before the position) sets the LM start state in all three. The engines alternate
lattice by lattice (OpenFST, ours, pynini on lattice i, then on lattice i + 1), each with one
untimed run of the lattice first, so that the load of a shared machine hits them alike.

    python bench/rescore_latency.py            # full run (a few minutes on 2 cores)
    python bench/rescore_latency.py --quick    # fewer lattices

Setup: apt-get install libfst-dev g++ xz-utils; pip install pynini numpy; `make dev` (or
install the package). The first run converts the ARPA to OpenFST automata and caches them,
with the decompressed ARPA and our binary LM, in bench/.cache/ (git-ignored).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
_DEV = Path(__file__).resolve().parents[1] / "python"
if any((_DEV / "draftlattice").glob("_core*.so")):  # `make dev` build in place; else installed
    sys.path.insert(1, str(_DEV))
import _fst_reference as ref  # noqa: E402
from draftlattice.assets import data_dir  # noqa: E402

P_SWEEP = [(8, 16, p) for p in (1, 2, 4, 8, 16)]
ONE_BEST = [(h, k, 1) for h in (4, 8, 16) for k in (2, 4, 8, 16) if (h, k) != (8, 16)]
SHAPES = P_SWEEP + ONE_BEST
KINDS = ("unigram", "plausible")


def _format_version(path: Path) -> int:
    """The version field of a .dlm header (after the 8-byte magic, little-endian uint32)."""
    with open(path, "rb") as f:
        head = f.read(12)
    return int.from_bytes(head[8:12], "little") if head[:7] == b"DLNGRAM" else 0


def load_ours(lm_auto: ref.LmAutomata):
    """(draftlattice module, NgramLM, seconds to load) or (None, None, reason)."""
    try:
        import draftlattice as dl
    except ImportError as e:
        return None, None, f"draftlattice not importable ({e}); run `make dev` first"
    binary = ref.CACHE / "wt2_kn4.dlm"  # our binary format, made from the ARPA once
    t0 = time.perf_counter()
    # A cached file of an older build may lack the newer formats' search bounds (version 3: the
    # per-bigram bounds), and would time a weaker search.
    if binary.exists() and _format_version(binary) >= dl._core.BINARY_FORMAT_VERSION:
        lm = dl.NgramLM(binary, vocab=lm_auto.words)
    else:  # none yet, or written by an older build: without the search bounds of newer formats
        lm = dl.NgramLM(lm_auto.arpa, vocab=lm_auto.words)
        lm.save(binary, overwrite=True)
    return dl, lm, time.perf_counter() - t0


def one_lattice(lat: ref.Lattices, i: int) -> ref.Lattices:
    """Lattice i of a set, as a set of one (the unit the engines are interleaved by)."""
    return ref.Lattices(lat.tokens[i : i + 1], lat.logprobs[i : i + 1], lat.contexts[i : i + 1])


def median_seconds(call, repeats: int) -> float:
    """Median latency of `call` over up to `repeats` runs (fewer once they add up to
    ENOUGH_SECONDS), after one warm-up run."""
    call()
    clock = time.perf_counter
    runs = []
    while len(runs) < repeats and (not runs or sum(runs) < ref.ENOUGH_SECONDS):
        t0 = clock()
        call()
        runs.append(clock() - t0)
    return sorted(runs)[len(runs) // 2]


class OurEngines:
    """draftlattice.rescore (public API), the private _core.rescore (the same C++ search without
    the wrapper's argument checks and result object), and that search timed inside C++
    (_core.rescore_seconds, the measure OpenFST's server uses), on lattices built before timing."""

    def __init__(self, dl, lm, alpha: float):
        from draftlattice import _core

        self.dl, self.lm, self.alpha, self.core = dl, lm, alpha, _core

    def run(self, lat: ref.Lattices, i: int, p: int, repeats: int):
        """(public seconds, _core seconds, C++ seconds, [p, h] tokens, [p] scores) for lattice i."""
        dl, lm, alpha = self.dl, self.lm, self.alpha
        lattice = dl.Lattice.from_topk(lat.tokens[i], lat.logprobs[i])
        context = lat.context(i)
        core_context = np.asarray(context, dtype=np.int32)
        out = dl.rescore(lattice, lm, p=p, alpha=alpha, context=context, bos=False)
        public = median_seconds(lambda: dl.rescore(lattice, lm, p=p, alpha=alpha, context=context, bos=False), repeats)
        core = median_seconds(lambda: self.core.rescore(lattice._core, lm, p, alpha, core_context, False), repeats)
        cxx = self.core.rescore_seconds(lattice._core, lm, p, alpha, core_context, False, repeats)
        return public, core, cxx, np.asarray(out.tokens), np.asarray(out.scores)


def _unpack(out):
    return np.asarray(out.tokens), np.asarray(out.scores)


def same_drafts(scores_a, tokens_a, scores_b, tokens_b, tol=1e-3) -> bool:
    """All p scores within tol, and the drafts equal up to ties (within tol)."""
    if not np.allclose(scores_a, scores_b, atol=tol, rtol=0, equal_nan=False):
        return False
    return tied_sets_equal(scores_a, tokens_a, tokens_b, tol)


def tied_sets_equal(scores, tokens_a, tokens_b, tol) -> bool:
    """Drafts equal as sets within each group of tied scores (except the last group, which may
    continue past p)."""
    p = len(scores)
    q = 0
    while q < p:
        j = q
        while j + 1 < p and abs(scores[j + 1] - scores[q]) < tol:
            j += 1
        if j + 1 < p:
            a = sorted(map(tuple, tokens_a[q : j + 1]))
            b = sorted(map(tuple, tokens_b[q : j + 1]))
            if a != b:
                return False
        q = j + 1
    return True


def exact_lm_cost(maker: ref.LatticeMaker, start: int, draft) -> float:
    s, cost = start, 0.0
    for w in draft:
        c, s = maker.step(s, int(w))
        cost += c
    return cost


def eps_best_differs(maker, lat: ref.Lattices, i: int, eps_best, ex: ref.FstResult, alpha: float) -> bool:
    """The epsilon approximation's best draft of lattice i is another draft, worse by > 1e-3
    under the exact model."""
    if np.array_equal(eps_best, ex.tokens[0, 0]):
        return False
    h = lat.tokens.shape[1]
    idx = [int(np.where(lat.tokens[i, t] == eps_best[t])[0][0]) for t in range(h)]
    head = sum(float(lat.logprobs[i, t, j]) for t, j in enumerate(idx))
    total = head - alpha * exact_lm_cost(maker, int(ex.start_states[0]), eps_best)
    return total < ex.scores[0, 0] - 1e-3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="20 lattices per shape, 1 run each")
    ap.add_argument("-n", type=int, default=None, help="lattices per shape and kind (default 100)")
    ap.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="runs per lattice, fewer once they add up to 10 ms; their median counts (5)",
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--shapes", default=None, help="e.g. 8x16x1,4x2x1 (h x k x p)")
    ap.add_argument("--no-pynini", action="store_true")
    ap.add_argument("--batch", type=int, default=64, help="lattices per rescore_batch call (64)")
    args = ap.parse_args()
    n = args.n or (20 if args.quick else 100)
    repeats = args.repeats or (1 if args.quick else 5)
    warmup = 1  # one untimed run per lattice and engine (the engines alternate lattice by lattice)
    shapes = SHAPES if not args.shapes else [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    kinds = args.kinds.split(",")

    load0 = os.getloadavg()
    data = data_dir()
    arpa = data / "lm" / "wt2_kn4.arpa.xz"
    t0 = time.perf_counter()
    lm_auto = ref.convert(arpa)
    print(
        f"# OpenFST automata for {arpa.name}: "
        + (f"converted in {lm_auto.convert_seconds:.1f} s" if lm_auto.convert_seconds else "cached")
        + f" ({time.perf_counter() - t0:.1f} s)",
        flush=True,
    )
    maker = ref.LatticeMaker(lm_auto, data / "wikitext-2" / "test.txt")
    dl, lm, info = load_ours(lm_auto)
    print(f"# ours: {f'loaded in {info:.2f} s' if dl else info}", flush=True)
    eps = None if args.no_pynini else ref.PyniniEpsilon(lm_auto)

    # Lattices: fixed seed per (kind, shape); the p sweep shares the 8x16 lattices.
    sets = {}
    t0 = time.perf_counter()
    for kind in kinds:
        for h, k, _ in shapes:
            if (kind, h, k) not in sets:
                seed = args.seed + 1000 * KINDS.index(kind) + 37 * h + k
                sets[kind, h, k] = maker.make(kind, n, h, k, seed)
    print(f"# {len(sets)} lattice sets x {n} made in {time.perf_counter() - t0:.1f} s", flush=True)

    jobs = [(kind, h, k, p) for kind in kinds for h, k, p in shapes]
    # OpenFST runs in a resident C++ process, sent one lattice at a time.
    server = ref.OpenFstServer(lm_auto, args.alpha, repeats, warmup)
    ours = OurEngines(dl, lm, args.alpha) if dl is not None else None

    header = (
        f"{'kind':<9} {'h':>2} {'k':>2} {'p':>2} | {'ours ms':>8} {'OpenFST ms':>10} {'ratio':>6} "
        f"{'_core ms':>8} {'C++ ms':>8} {'C++ ratio':>9} "
        f"| {'pynini-eps ms':>13} {'eps best differs':>16} | {'ours == exact':>13} | {'states':>6}"
    )
    rows = []
    print(header)
    print("-" * len(header))
    for job in jobs:
        kind, h, k, p = job
        lat = sets[kind, h, k]
        # Lattice by lattice: OpenFST, ours, pynini on lattice i, then lattice i + 1, so that a
        # shared machine's load hits every engine alike.
        ex_sec, ours_sec, core_sec, cxx_sec, eps_sec = (np.full(lat.n, np.nan) for _ in range(5))
        ex_states = np.zeros(lat.n)
        equal_count, differs_count = 0, 0
        for i in range(lat.n):
            one = one_lattice(lat, i)
            ex = server.run(one, p)
            ex_sec[i], ex_states[i] = ex.seconds[0], ex.composed_states[0]
            if ours is not None:
                ours_sec[i], core_sec[i], cxx_sec[i], tok, sco = ours.run(lat, i, p, repeats)
                m = len(sco)
                got_tokens, got_scores = np.full((p, h), -1), np.full(p, np.nan)
                got_tokens[:m], got_scores[:m] = tok, sco
                equal_count += same_drafts(ex.scores[0], ex.tokens[0], got_scores, got_tokens)
            if eps is not None:
                er = eps.run(one, ex.start_states, p, args.alpha, repeats)
                eps_sec[i] = er.seconds[0]
                differs_count += eps_best_differs(maker, lat, i, er.tokens[0, 0], ex, args.alpha)
        ex_ms = 1e3 * float(np.median(ex_sec))
        ours_ms = core_ms = cxx_ms = ratio = cxx_ratio = None
        equal = "n/a"
        if ours is not None:
            ours_ms = 1e3 * float(np.median(ours_sec))
            core_ms = 1e3 * float(np.median(core_sec))
            cxx_ms = 1e3 * float(np.median(cxx_sec))
            ratio = ex_ms / ours_ms
            cxx_ratio = ex_ms / cxx_ms
            equal = f"{equal_count}/{lat.n}"
        eps_ms = differs = None
        if eps is not None:
            eps_ms = 1e3 * float(np.median(eps_sec))
            differs = 100.0 * differs_count / lat.n
        row = dict(
            kind=kind,
            h=h,
            k=k,
            p=p,
            ours_ms=ours_ms,
            core_ms=core_ms,
            cxx_ms=cxx_ms,
            cxx_ratio=cxx_ratio,
            exact_ms=ex_ms,
            ratio=ratio,
            eps_ms=eps_ms,
            eps_differs_pct=differs,
            equal=equal,
            composed_states=float(np.median(ex_states)),
        )
        rows.append(row)
        print(format_row(row), flush=True)

    server.close()
    if dl is not None:
        rows_batch = batch_throughput(dl, lm, sets, kinds, args.alpha, args.batch)
    else:
        rows_batch = []
    if args.json:
        import json

        args.json.write_text(
            json.dumps(
                {
                    "n": n,
                    "repeats": repeats,
                    "alpha": args.alpha,
                    "seed": args.seed,
                    "date": str(datetime.date.today()),
                    "latency": rows,
                    "batch": rows_batch,
                },
                indent=1,
            )
        )
    print(
        f"# n={n} lattices per shape, {repeats} run(s) per lattice (median) after {warmup} warm-up run; "
        f"alpha={args.alpha}; seed={args.seed}; {platform.machine()} {os.cpu_count()} CPUs; "
        f"{datetime.date.today()}; load average at start {load0[0]:.1f}, at end {os.getloadavg()[0]:.1f}"
    )
    return 0


def format_row(r) -> str:
    def f(x, fmt):
        return format(x, fmt) if x is not None else "n/a"

    return (
        f"{r['kind']:<9} {r['h']:>2} {r['k']:>2} {r['p']:>2} | {f(r['ours_ms'], '8.3f'):>8} "
        f"{r['exact_ms']:>10.3f} {f(r['ratio'], '5.1f') + 'x' if r['ratio'] else 'n/a':>6} "
        f"{f(r['core_ms'], '8.3f'):>8} {f(r['cxx_ms'], '8.3f'):>8} "
        f"{f(r['cxx_ratio'], '5.1f') + 'x' if r['cxx_ratio'] else 'n/a':>9} | "
        f"{f(r['eps_ms'], '13.3f'):>13} {f(r['eps_differs_pct'], '15.1f') + '%' if r['eps_differs_pct'] is not None else 'n/a':>16} | "
        f"{r['equal']:>13} | {r['composed_states']:>6.0f}"
    )


def batch_throughput(dl, lm, sets, kinds, alpha, batch):
    """Lattices per second: single rescore() calls in a loop vs rescore_batch (1 and 2 threads)."""
    print()
    print(
        f"{'kind':<9} {'h':>2} {'k':>2} {'p':>2} | {'loop lat/s':>10} {'batch 1 thr':>11} "
        f"{'batch 2 thr':>11} | {'2 thr / loop':>12}"
    )
    rows = []
    for kind in kinds:
        for h, k, p in ((8, 16, 1), (8, 16, 4), (8, 16, 16), (4, 4, 1)):
            if (kind, h, k) not in sets:
                continue
            lat = sets[kind, h, k]
            m = min(batch, lat.n)
            lattices = [dl.Lattice.from_topk(lat.tokens[i], lat.logprobs[i]) for i in range(m)]
            contexts = [lat.context(i) for i in range(m)]
            dl.rescore_batch(lattices[:4], lm, p=p, alpha=alpha, contexts=contexts[:4], bos=False, num_threads=1)

            def best_of(fn, tries):
                best = float("inf")
                for _ in range(tries):
                    t0 = time.perf_counter()
                    fn()
                    best = min(best, time.perf_counter() - t0)
                return m / best

            def loop():
                for i in range(m):
                    dl.rescore(lattices[i], lm, p=p, alpha=alpha, context=contexts[i], bos=False)

            tries = 2 if k * h * p > 1000 else 5
            rate_loop = best_of(loop, tries)
            rates = [
                best_of(
                    lambda: dl.rescore_batch(
                        lattices, lm, p=p, alpha=alpha, contexts=contexts, bos=False, num_threads=thr
                    ),
                    tries,
                )
                for thr in (1, 2)
            ]
            rows.append(
                dict(
                    kind=kind,
                    h=h,
                    k=k,
                    p=p,
                    batch=m,
                    loop_per_s=rate_loop,
                    batch1_per_s=rates[0],
                    batch2_per_s=rates[1],
                )
            )
            print(
                f"{kind:<9} {h:>2} {k:>2} {p:>2} | {rate_loop:>10.0f} {rates[0]:>11.0f} {rates[1]:>11.0f} | "
                f"{rates[1] / rate_loop:>11.1f}x",
                flush=True,
            )
    print(f"# batch = {m} lattices per call; best of several calls")
    return rows


if __name__ == "__main__":
    sys.exit(main())
