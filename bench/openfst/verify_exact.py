"""Checks the OpenFST exact-backoff reference (lmfst.cc: ARPA -> phi automaton, PhiMatcher
composition + ShortestPath) against brute-force enumeration of every lattice path scored by
the `kenlm` module, on small random lattices and random contexts.

    python bench/openfst/verify_exact.py [ARPA ...]     (default: katz3 + wt2_kn3_pruned)

Needs `pip install kenlm pynini numpy` and `apt-get install libfst-dev`.
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _fst_reference as ref  # noqa: E402


def brute_force(model, words, tokens, logprobs, context, alpha):
    import kenlm

    state, tmp = kenlm.State(), kenlm.State()
    model.NullContextWrite(state)
    for w in context:
        model.BaseScore(state, words[w], tmp)
        state, tmp = tmp, state
    h, k = tokens.shape
    out = []
    for choice in itertools.product(range(k), repeat=h):
        s, lm = state, 0.0
        for t, j in enumerate(choice):
            nxt = kenlm.State()
            lm += model.BaseScore(s, words[tokens[t, j]], nxt)
            s = nxt
        head = sum(float(logprobs[t, j]) for t, j in enumerate(choice))
        out.append((head + alpha * lm * ref.LN10, [int(tokens[t, j]) for t, j in enumerate(choice)]))
    out.sort(key=lambda sp: -sp[0])
    return out


def check(arpa: Path, trials: int, seed: int) -> int:
    import kenlm

    lm = ref.convert(arpa)
    model = kenlm.Model(str(lm.arpa))
    words = lm.words
    usable = [i for i, w in enumerate(words) if w not in ("<s>", "</s>")]
    bos = words.index("<s>") if "<s>" in words else None
    rng = np.random.default_rng(seed)
    bad = total = 0
    # (h, k, p) shapes, all in one C++ run (one LM load).
    shapes = [(1, 4, 4), (2, 3, 9), (2, 4, 3), (3, 4, 64), (3, 3, 5), (4, 3, 81), (4, 4, 10),
              (5, 2, 32), (4, 2, 1), (3, 4, 1)]
    alpha = float(rng.choice([1.0, 0.5, 2.0]))
    jobs = []
    for h, k, p in shapes:
        tokens = np.empty((trials, h, k), dtype=np.int32)
        logprobs = rng.normal(-2.0, 1.0, size=(trials, h, k)).astype(np.float32)
        contexts = np.full((trials, 5), -1, dtype=np.int32)
        for i in range(trials):
            # Half the lattices use frequent words only, so that higher orders fire.
            pool = usable[: max(k, min(len(usable), 60))] if i % 2 else usable
            tokens[i] = [rng.choice(pool, size=k, replace=False) for _ in range(h)]
            ctx = [int(w) for w in rng.choice(pool, size=int(rng.integers(0, 4)))]
            if bos is not None and rng.random() < 0.3:
                ctx = [bos] + ctx
            contexts[i, : len(ctx)] = ctx
        jobs.append((ref.Lattices(tokens, logprobs, contexts), p))
    if arpa.name.startswith("wt2_"):
        # Plausible WikiText continuations (as in the benchmark): long n-gram matches fire.
        maker = ref.LatticeMaker(lm, ref.shared_dir() / "data" / "wikitext-2" / "test.txt")
        for h, k, p in ((3, 4, 6), (4, 3, 1), (4, 4, 16)):
            jobs.append((maker.make("plausible", trials, h, k, seed + h + k), p))
    results = ref.run_openfst_exact(lm, jobs, alpha, repeats=1, warmup=0)
    for (lat, p), res in zip(jobs, results):
        tokens, logprobs = lat.tokens, lat.logprobs
        h = tokens.shape[1]
        k = tokens.shape[2]
        for i in range(trials):
            total += 1
            everything = brute_force(model, words, tokens[i], logprobs[i], lat.context(i), alpha)
            want = np.array([sc for sc, _ in everything[:p]])
            got = res.scores[i]
            ok = np.allclose(got, want, atol=1e-3, rtol=0)
            # Paths: equal wherever the score is not tied (within 1e-3) with another path.
            for q in range(p):
                tied = any(abs(want[q] - sc) < 1e-3 for j, (sc, _) in enumerate(everything) if j != q)
                if not tied and list(res.tokens[i, q]) != everything[q][1]:
                    ok = False
            if not ok:
                bad += 1
                print(f"MISMATCH {arpa.name}: h={h} k={k} p={p} ctx={lat.context(i)}\n got {got}\n want {want}")
    trials = total
    print(f"{arpa.name}: {trials - bad}/{trials} random lattices equal brute force (kenlm)")
    return bad


def main() -> int:
    shared = ref.shared_dir() / "data"
    arpas = [Path(a) for a in sys.argv[1:]] or [
        shared / "katz-reference" / "katz3.arpa",
        shared / "lm" / "wt2_kn3_pruned.arpa.xz",
    ]
    return 1 if sum(check(a, 30, seed=7) for a in arpas) else 0


if __name__ == "__main__":
    sys.exit(main())
