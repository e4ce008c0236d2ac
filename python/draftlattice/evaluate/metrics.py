"""Statistics of drafts and heads (definitions used by ``draftlattice eval`` and bench/RESULTS.md).

* Consecutive repetition (Kim et al. 2024, Table 3): over drafts d [N, g], the percentage of
  neighbouring pairs (d[i], d[i+1]) that are identical, and the mean over drafts of the longest
  run of one repeated token (a draft without repetition has maximum run 1).
* Per-head entropy: mean over positions of each head's full-vocabulary entropy (nats).
* Per-head accuracy: fraction of positions where head j's top-1 is the greedy token it predicts.
* h_max (section 6.2): the number of leading heads worth drafting with. ``h_max_entropy``: the
  largest j such that heads 1..j all have mean entropy <= threshold; ``h_max_accuracy``: the
  largest j such that heads 1..j all have top-1 accuracy >= threshold (head 1 always counts).
* Wins/ties/losses (Table 5): per position, the accepted length of draft B vs draft A.
* Repetitions repaired / introduced: among positions whose draft A has a repetition, the % whose
  draft B has none; among positions whose draft A has none, the % whose draft B has one.
"""

from __future__ import annotations

import numpy as np


def _drafts(drafts) -> np.ndarray:
    arr = np.asarray(drafts)
    if arr.ndim != 2:
        raise ValueError(f"drafts must be [N, g], got shape {arr.shape}")
    return arr


def has_repetition(drafts) -> np.ndarray:
    """[N] bool: the draft has at least one identical neighbouring pair."""
    arr = _drafts(drafts)
    return (arr[:, 1:] == arr[:, :-1]).any(1)


def max_runs(drafts) -> np.ndarray:
    """[N] int: longest run of one token within each draft (1 if none repeats; 0 for g = 0)."""
    arr = _drafts(drafts)
    n, g = arr.shape
    if g == 0:
        return np.zeros(n, np.int64)
    run = np.ones(n, np.int64)
    best = run.copy()
    for i in range(1, g):
        run = np.where(arr[:, i] == arr[:, i - 1], run + 1, 1)
        best = np.maximum(best, run)
    return best


def repetition(drafts) -> dict:
    """{"repeated_pct": % identical neighbouring pairs, "mean_max_run": ..., "drafts": N}."""
    arr = _drafts(drafts)
    pairs = arr.shape[0] * max(arr.shape[1] - 1, 0)
    same = int((arr[:, 1:] == arr[:, :-1]).sum())
    return {
        "repeated_pct": 100.0 * same / pairs if pairs else 0.0,
        "mean_max_run": float(max_runs(arr).mean()) if len(arr) else 0.0,
        "drafts": int(len(arr)),
    }


def wins_ties_losses(accepted_a, accepted_b) -> dict:
    """Percent of positions where B accepts more / as many / fewer tokens than A."""
    a, b = np.asarray(accepted_a), np.asarray(accepted_b)
    if a.shape != b.shape or a.ndim != 1 or len(a) == 0:
        raise ValueError(f"need two equal non-empty [N] arrays, got {a.shape} and {b.shape}")
    n = len(a)
    return {
        "wins_pct": 100.0 * (b > a).sum() / n,
        "ties_pct": 100.0 * (b == a).sum() / n,
        "losses_pct": 100.0 * (b < a).sum() / n,
        "positions": int(n),
    }


def repairs(drafts_a, drafts_b) -> dict:
    """% of A's repetitions repaired by B and % of repetition-free A drafts where B introduces one."""
    ra, rb = has_repetition(drafts_a), has_repetition(drafts_b)
    if ra.shape != rb.shape:
        raise ValueError("drafts_a and drafts_b must have the same number of drafts")
    with_rep, without = ra.sum(), (~ra).sum()
    return {
        "repaired_pct": 100.0 * (ra & ~rb).sum() / with_rep if with_rep else 0.0,
        "introduced_pct": 100.0 * (~ra & rb).sum() / without if without else 0.0,
        "with_repetition": int(with_rep),
        "without_repetition": int(without),
    }


def head_entropy(trace) -> np.ndarray:
    """[h] mean entropy (nats) of each head over all positions of the trace."""
    return np.concatenate(trace.entropy).mean(0)


def head_accuracy(trace) -> np.ndarray:
    """[h] top-1 accuracy of each head: head j's argmax at t equals y[t + j - 1] (positions
    where that token exists)."""
    h = trace.num_heads
    hits, totals = np.zeros(h), np.zeros(h)
    for ids, y in zip(trace.topk_ids, trace.tokens):
        for j in range(h):
            t = len(y) - j
            if t > 0:
                hits[j] += (ids[:t, j, 0] == y[j:]).sum()
                totals[j] += t
    return np.divide(hits, totals, out=np.zeros(h), where=totals > 0)


def _leading(ok: np.ndarray) -> int:
    count = int(np.cumprod(ok).sum())
    return max(count, 1)


def h_max_entropy(mean_entropy, threshold: float) -> int:
    """Largest j with mean entropy of heads 1..j all <= threshold (nats); at least 1."""
    return _leading(np.asarray(mean_entropy) <= threshold)


def h_max_accuracy(accuracy, threshold: float) -> int:
    """Largest j with top-1 accuracy of heads 1..j all >= threshold; at least 1."""
    return _leading(np.asarray(accuracy) >= threshold)
