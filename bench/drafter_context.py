"""Per-step cost of the lattice drafter's LM context, at growing history lengths: rescoring with
the whole history as token ids (what the drafter did before issue 10: O(history) per step) against
the committed text's LM state advanced by the accepted tokens (CommittedLmState: O(accepted)).

    make dev && PYTHONPATH=python python bench/drafter_context.py

The shipped Katz 4-gram (lm_models/katz4.dlm), one fixed 7 x 8 lattice of random logits, p = 4,
3 accepted tokens per step; median of 200 steps per history length, both ways in the same steps.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np
import torch

import draftlattice as dl
from draftlattice.decode import LatticeDrafter

lm = dl.NgramLM(Path(__file__).resolve().parents[1] / "lm_models" / "katz4.dlm")
V = 4096
rng = np.random.default_rng(0)
drafter = LatticeDrafter(lm, k=8, p=4, alpha=0.5)
logits = torch.from_numpy(rng.normal(size=(7, V)).astype(np.float32))
lattice = drafter.lattice(logits)
for n in (100, 10_000, 100_000):
    history = rng.integers(0, V, size=n).tolist()
    old, new = [], []
    for _ in range(200):
        history.extend(rng.integers(0, V, size=3).tolist())  # 3 accepted tokens per step
        t0 = time.perf_counter()
        dl.rescore(lattice, lm, 4, 0.5, np.asarray(history, dtype=np.int32), True)
        t1 = time.perf_counter()
        state = drafter.committed.after(history)
        dl.rescore(lattice, lm, 4, 0.5, state)
        t2 = time.perf_counter()
        old.append(t1 - t0)
        new.append(t2 - t1)
    print(
        f"history {n:>7}: whole history {statistics.median(old) * 1e3:.3f} ms/step, "
        f"committed state {statistics.median(new) * 1e3:.3f} ms/step"
    )
