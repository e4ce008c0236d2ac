"""Per-step cost of sampling lattice drafts at growing history lengths (issue 13): the whole
history sent to the core as token ids (what the sampling path did before: O(history) per step)
against the committed text's LM state advanced by the accepted tokens (CommittedLmState, as
``LatticeDrafter.sample`` does now: O(accepted)).

    make dev && PYTHONPATH=python python bench/sampling_context.py

The shipped Katz 4-gram (lm_models/katz4.dlm), one fixed 7 x 4096 set of random head laws,
k = 8, p = 4 i.i.d. drafts with full support, sample_alpha = 0.2, 3 accepted tokens per step;
median of 200 steps per history length, both ways in the same steps (same seeds, so both draw
the same drafts: checked).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np
import torch

import draftlattice as dl
from draftlattice.decode.drafters.lattice import CommittedLmState
from draftlattice.sample import sample_from_heads

lm = dl.NgramLM(Path(__file__).resolve().parents[1] / "lm_models" / "katz4.dlm")
V, K, P, ALPHA = 4096, 8, 4, 0.2
rng = np.random.default_rng(0)
head_logprobs = torch.log_softmax(torch.from_numpy(rng.normal(size=(7, V)) * 3), -1).numpy()
committed = CommittedLmState(lm, bos=True)
torch.set_num_threads(1)
for n in (100, 10_000, 100_000):
    history = rng.integers(0, V, size=n).tolist()
    old, new = [], []
    for step in range(200):
        history.extend(rng.integers(0, V, size=3).tolist())  # 3 accepted tokens per step
        t0 = time.perf_counter()
        a = sample_from_heads(head_logprobs, K, lm, P, ALPHA, np.asarray(history, dtype=np.int32), True, step)
        t1 = time.perf_counter()
        b = sample_from_heads(head_logprobs, K, lm, P, ALPHA, committed.after(history), False, step)
        t2 = time.perf_counter()
        assert np.array_equal(a.tokens, b.tokens)
        old.append(t1 - t0)
        new.append(t2 - t1)
    print(
        f"history {n:>7}: whole history {statistics.median(old) * 1e3:.3f} ms/step, "
        f"committed state {statistics.median(new) * 1e3:.3f} ms/step"
    )
