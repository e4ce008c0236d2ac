"""Work and latency of exact p-best rescoring (draftlattice.rescore) on wt2_kn4, beside the cost
of composing the whole lattice with the LM (what an exhaustive exact composition must visit,
measured with sample_drafts(n=0), which builds the full composed lattice).

Lattices: (a) "unigram": logits = log unigram frequency + Gumbel noise (candidates are frequent
but unrelated words); (b) "plausible": WikiText-2 valid text, the true next words boosted plus
random candidates. Fixed seeds, 1 warm-up, median over lattices x repeats.

    PYTHONPATH=python python bench/rescore_search.py [path/to/wt2_kn4.arpa.xz]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import draftlattice as dl
from _timing import median_ms
from draftlattice import _core

root = Path(__file__).resolve().parents[1]
data = next(p / "shared" / "data" for p in root.parents if (p / "shared" / "data").is_dir())
arpa = sys.argv[1] if len(sys.argv) > 1 else str(data / "lm" / "wt2_kn4.arpa.xz")
vocab = (root / "examples" / "wt2_vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
lm = dl.NgramLM(arpa, vocab=vocab)
index = {w: i for i, w in enumerate(vocab)}
ids = [index.get(w, index["<unk>"]) for w in (data / "wikitext-2" / "valid.txt").read_text().split()]
V = len(vocab)
freq = np.bincount(ids, minlength=V) + 1.0
log_unigram = np.log(freq / freq.sum())
rng = np.random.default_rng(0)


def make(kind: str, h: int, k: int):
    pos = int(rng.integers(10, len(ids) - 20))
    ctx = np.array(ids[pos - 5 : pos], dtype=np.int32)
    if kind == "unigram":
        logits = (log_unigram[None, :] + rng.gumbel(size=(h, V))).astype(np.float32)
    else:
        logits = rng.normal(0, 1, size=(h, V)).astype(np.float32)
        for j in range(h):
            logits[j, ids[pos + j]] += 6
            logits[j, rng.integers(0, V, size=k)] += 4
    return dl.Lattice.from_logits(logits, k), ctx


print("| lattices | h | k | p | rescore ms | full composition ms | ratio | arcs scored |")
print("|---|---|---|---|---|---|---|---|")
for kind in ("unigram", "plausible"):
    for h, k, p in [(8, 16, 1), (8, 16, 4), (8, 16, 16), (4, 16, 1), (16, 16, 1), (8, 4, 1)]:
        rows = []
        for _ in range(10):
            lattice, ctx = make(kind, h, k)
            core = lattice._core
            fast = median_ms(lambda: _core.rescore(core, lm, p, 1.0, ctx, False))
            full = median_ms(lambda: _core.sample_drafts(core, lm, 0, 1.0, ctx, False, 0), repeats=1)
            nodes, arcs, _ = _core.rescore_stats(core, lm, p, 1.0, ctx, False)
            rows.append((fast, full, arcs))
        fast, full, arcs = (float(np.median([r[i] for r in rows])) for i in range(3))
        print(f"| {kind} | {h} | {k} | {p} | {fast:.3f} | {full:.3f} | {full / fast:.1f}x | {arcs:.0f} |")
