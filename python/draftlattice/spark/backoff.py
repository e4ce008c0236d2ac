"""Backoff weights per context, and the partition-by-context walk that computes them.

alpha(h) = (1 - sum_{w in A(h)} p(w|h)) / (1 - sum_{w in A(h)} p(w|h')), each sum's neglog
clamped to >= 1e-9, a complete state getting cost 99 (OpenGrm's RecalcBackoff; the same
floating-point operations as csrc/train/model.cc ``ComputeBackoffs``).

The sums run over a context's successors in order of first appearance, which is the order the
C++ trainer adds them in, so the weights match bit for bit. The successors of one context are
brought together by ``by_context``: keyed ``(context, sort key)``, hash-partitioned on the
context and sorted within each partition, so a partition is a run of whole contexts each in
sort-key order and is read as a stream (no group is built beyond one context's successors).

A context is complete when it has a successor for every word but ``<s>`` (``</s>``
included). OpenGrm's test is recursive (every successor of the backoff state seen, and the
backoff state complete), but each successor of h is also one of h' (true of counts, min-count
filtering and pruning alike), so the successor counts only grow down the chain up to the
unigram state's V - 1, and the recursive test is the same as "h has V - 1 successors".
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from pyspark.rdd import portable_hash

__all__ = ["COMPLETE_STATE_LN", "backoff_ln", "by_context", "clamped_neglogs", "context_runs", "recompute_backoffs"]

MIN_NEGLOG = 1e-9  # OpenGrm's kNormEps * kFloatEps
COMPLETE_STATE_LN = -99.0  # ln alpha of a complete state (OpenGrm's kInfBackoff cost 99)


def clamped_neglogs(hi: float, lo: float) -> tuple[float, float]:
    """-ln(1 - hi) and -ln(1 - lo) as OpenGrm computes them (0 where the mass is exhausted)."""
    nh = max(-math.log(hi) if hi > 0 else 1e300, MIN_NEGLOG)
    nl = max(-math.log(lo) if lo > 0 else 1e300, MIN_NEGLOG)
    num = 0.0 if nh > 99.0 else -math.log(-math.expm1(-nh))
    denom = 0.0 if nl > 99.0 else -math.log(-math.expm1(-nl))
    return num, denom


def backoff_ln(hi: float, lo: float) -> float:
    """ln alpha(h) from hi = sum p(w|h) and lo = sum p(w|h') over h's successors."""
    num, denom = clamped_neglogs(hi, lo)
    return denom - num


def _context_partition(key: tuple) -> int:
    return portable_hash(key[0])


def by_context(records, partitions: int):
    """Sorts ((context, sort key), value) records into runs of whole contexts (see above)."""
    return records.repartitionAndSortWithinPartitions(partitions, partitionFunc=_context_partition)


def context_runs(records: Iterator[tuple[tuple, Any]]) -> Iterator[tuple[tuple, list[tuple[Any, Any]]]]:
    """(context, [(sort key, value), ...]) for each run of a partition sorted by ``by_context``."""
    current = None
    run: list[tuple[Any, Any]] = []
    for (context, sort_key), value in records:
        if context != current:
            if run:
                yield current, run
            current, run = context, []
        run.append((sort_key, value))
    if run:
        yield current, run


def _weights(records, vocab_size: int) -> Iterator[tuple[tuple, float]]:
    for context, run in context_runs(records):
        if len(run) == vocab_size - 1:
            yield context, COMPLETE_STATE_LN
            continue
        hi = 0.0
        lo = 0.0
        for _, (p, p_lo) in run:
            hi += p
            lo += p_lo
        yield context, backoff_ln(hi, lo)


def recompute_backoffs(level, vocab_size: int, partitions: int):
    """(context, ln alpha) for the contexts of an order-k level of (ngram, entry) records.

    Used after pruning; ``entry`` holds p, p_lo and first (see estimate.Entry).
    """
    records = level.map(lambda item: ((item[0][:-1], item[1].first), (item[1].p, item[1].p_lo)))
    return by_context(records, partitions).mapPartitions(lambda rs: _weights(rs, vocab_size))
