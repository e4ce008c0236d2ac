"""Relative-entropy (Stolcke) pruning as ngramshrink, as Spark jobs (csrc/train/prune.cc).

1. Each n-gram's own score D (``score``, computed in the estimation walk, which has the sums of
   its context at hand).
2. Scores raised to the maximum over the n-grams that extend them (prefix or suffix), from the
   highest order down: a ``reduceByKey(max)`` per order.
3. theta: ln(1 + threshold), or for a target size the midpoint between the last score kept and
   the first pruned, found by a distributed sort (only theta reaches the driver).
4. An n-gram of order >= 2 is kept iff its raised score is not below theta. (The C++ code also
   keeps any n-gram a kept longer n-gram needs; with raised scores that rule never fires,
   since a needed n-gram's raised score is at least its kept extension's, which is >= theta.)

Kept probabilities are unchanged; the caller recomputes the backoff weights.
"""

from __future__ import annotations

import math

from .backoff import clamped_neglogs
from .keys import prefix, suffix_mask
from .partition import key_hash

__all__ = ["apply_theta", "raise_scores", "score", "theta_for_target"]


def _neg_log_sum(a: float, b: float) -> float:
    """-ln(e^-a + e^-b)."""
    if a > b:
        a, b = b, a
    return a - math.log1p(math.exp(a - b))


def score(p_hi: float, p_lo: float, p_h: float, hi: float, lo: float) -> float:
    """Stolcke's D for removing hw: p_hi = p(w|h), p_lo = p(w|h'), p_h = p(h), hi and lo the
    sums of p(.|h) and p(.|h') over h's successors (same operations as the C++ trainer)."""
    if p_hi <= 0 or p_h <= 0:
        return -math.inf
    num, denom = clamped_neglogs(hi, lo)
    new_log_backoff = _neg_log_sum(denom, -math.log(p_lo)) - _neg_log_sum(num, -math.log(p_hi))
    d = math.log(p_lo) + new_log_backoff - math.log(p_hi)
    d *= p_hi
    d += (new_log_backoff + (num - denom)) * math.exp(-num)
    return -p_h * d


def _cpp_max(a: float, b: float) -> float:
    return max(a, b)  # as std::max(a, b), NaN included: keeps a unless a < b


def _raise(a: tuple[float, object], b: tuple[float, object]) -> tuple[float, object]:
    """Merges (score, Entry or None) pairs of one key: the max score, the entry kept."""
    return _cpp_max(a[0], b[0]), a[1] if a[1] is not None else b[1]


def raise_scores(levels: dict[int, object], order: int, partitions: int) -> dict[int, object]:
    """{k: RDD of (key, (raised score, Entry))} for k = 2..order."""
    raised = {order: levels[order].mapValues(lambda e: (e.score, e))}
    for k in range(order - 1, 1, -1):
        mask = suffix_mask(k + 1)
        extensions = raised[k + 1].flatMap(
            lambda item, mask=mask: ((prefix(item[0]), (item[1][0], None)), (item[0] & mask, (item[1][0], None)))
        )
        own = levels[k].mapValues(lambda e: (e.score, e))
        raised[k] = own.union(extensions).reduceByKey(_raise, partitions, partitionFunc=key_hash)
    return raised


def theta_for_target(scores, total: int, keep: int, partitions: int) -> float:
    """The threshold keeping ``keep`` of the ``total`` scores (ngramshrink's ThetaForMaxNGrams)."""
    if keep >= total:
        return -math.inf
    index = total - keep - 1  # position of the largest score to prune, ascending
    ranked = scores.sortBy(lambda s: s, numPartitions=partitions).zipWithIndex()
    last_pruned = ranked.filter(lambda item: item[1] == index).first()[0]
    first_kept = scores.filter(lambda s: s > last_pruned).fold(math.inf, min)
    if first_kept == math.inf:
        return last_pruned + 1
    return (last_pruned + first_kept) / 2


def apply_theta(raised, theta: float):
    """The (key, Entry) records of a raised level whose raised score is not below theta."""
    return raised.filter(lambda item: not item[1][0] < theta).mapValues(lambda v: v[1])
