"""Checks the OpenFST exact-backoff reference (lmfst.cc: ARPA -> phi automaton, PhiMatcher
composition + ShortestPath) against brute-force enumeration of every lattice path scored by
the `kenlm` module, on small random lattices and random contexts.

    python bench/openfst/verify_exact.py [ARPA ...]
        default: katz3, wt2_kn3_pruned and missing_context.arpa (a trigram whose bigram context is
        not listed); pass ../shared/data/lm/wt2_kn4.arpa.xz for the benchmark's model (slow to load).

Needs `pip install kenlm pynini numpy` and `apt-get install libfst-dev`.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(1, str(Path(__file__).resolve().parents[2] / "python"))
import _fst_reference as ref  # noqa: E402
from draftlattice.assets import data_dir  # noqa: E402


class PyKatz:
    """Plain-Python Katz backoff over an ARPA (the definition, no state minimisation): the
    reference for models KenLM refuses (an n-gram whose context is not listed)."""

    def __init__(self, path: Path):
        self.prob, self.bo, self.order = {}, {}, 0
        n = 0
        for line in open(path, encoding="utf-8"):
            line = line.strip()
            if line.startswith("\\") and line.endswith("-grams:"):
                n = int(line[1 : line.index("-")])
                self.order = max(self.order, n)
            elif n and line and not line.startswith("\\"):
                f = line.split()
                key = tuple(f[1 : 1 + n])
                self.prob[key] = float(f[0])
                if len(f) > n + 1:
                    self.bo[key] = float(f[n + 1])

    def log10p(self, history: tuple, w: str) -> float:
        h = history[len(history) - (self.order - 1) :] if self.order > 1 else ()
        bo = 0.0
        while True:
            if h + (w,) in self.prob:
                return bo + self.prob[h + (w,)]
            if not h:
                return bo - 99.0
            bo += self.bo.get(h, 0.0)
            h = h[1:]


def brute_force(model, words, tokens, logprobs, context, alpha):
    if isinstance(model, PyKatz):
        h, k = tokens.shape
        out = []
        for choice in itertools.product(range(k), repeat=h):
            hist = tuple(words[w] for w in context)
            lm = 0.0
            for t, j in enumerate(choice):
                lm += model.log10p(hist, words[tokens[t, j]])
                hist = hist + (words[tokens[t, j]],)
            head = sum(float(logprobs[t, j]) for t, j in enumerate(choice))
            out.append((head + alpha * lm * ref.LN10, [int(tokens[t, j]) for t, j in enumerate(choice)]))
        out.sort(key=lambda sp: -sp[0])
        return out
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
    try:
        model = kenlm.Model(str(lm.arpa))
    except OSError as e:  # e.g. "The context of every 3-gram should appear as a 2-gram"
        print(f"{arpa.name}: kenlm refuses it ({str(e)[-70:]}); reference = plain Katz in Python")
        model = PyKatz(lm.arpa)
    words = lm.words
    usable = [i for i, w in enumerate(words) if w not in ("<s>", "</s>")]
    bos = words.index("<s>") if "<s>" in words else None
    rng = np.random.default_rng(seed)
    bad = total = 0
    # (h, k, p) shapes, all in one C++ run (one LM load).
    shapes = [
        (1, 4, 4),
        (2, 3, 9),
        (2, 4, 3),
        (3, 4, 64),
        (3, 3, 5),
        (4, 3, 81),
        (4, 4, 10),
        (5, 2, 32),
        (4, 2, 1),
        (3, 4, 1),
    ]
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
        maker = ref.LatticeMaker(lm, data_dir() / "wikitext-2" / "test.txt")
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
    name = "plain-Python Katz" if isinstance(model, PyKatz) else "kenlm"
    print(f"{arpa.name}: {trials - bad}/{trials} random lattices equal brute force ({name})")
    return bad


def main() -> int:
    shared = data_dir()
    arpas = [Path(a) for a in sys.argv[1:]] or [
        shared / "katz-reference" / "katz3.arpa",
        shared / "lm" / "wt2_kn3_pruned.arpa.xz",
        Path(__file__).resolve().parent / "missing_context.arpa",  # fill-in arcs (KenLM refuses it)
    ]
    return 1 if sum(check(a, 30, seed=7) for a in arpas) else 0


if __name__ == "__main__":
    sys.exit(main())
