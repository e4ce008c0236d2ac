"""Backoff weights per context, and the walk that recomputes them after pruning.

alpha(h) = (1 - sum_{w in A(h)} p(w|h)) / (1 - sum_{w in A(h)} p(w|h')), each sum's neglog
clamped to >= 1e-9, a complete state getting cost 99 (OpenGrm's RecalcBackoff; the same
floating-point operations as csrc/train/model.cc ``ComputeBackoffs``). The sums run over a
context's successors in order of first appearance, the order the C++ trainer adds them in, so
the weights match bit for bit.

A context is complete when it has a successor for every word but ``<s>`` (``</s>``
included). OpenGrm's test is recursive (every successor of the backoff state seen, and the
backoff state complete), but each successor of h is also one of h' (true of counts, min-count
filtering and pruning alike), so successor counts only grow down the chain up to the unigram
state's V - 1, and the recursive test is the same as "h has V - 1 successors".
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from .keys import WORD_BITS, WORD_MASK, prefix
from .partition import by_context, context_runs

__all__ = ["COMPLETE_STATE_LN", "LOWER", "backoff_ln", "clamped_neglogs", "recompute_backoffs"]

MIN_NEGLOG = 1e-9  # OpenGrm's kNormEps * kFloatEps
COMPLETE_STATE_LN = -99.0  # ln alpha of a complete state (OpenGrm's kInfBackoff cost 99)
LOWER = -2  # sort key of a context's own n-gram record, before its successors (first >= 0)


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


def _walk(records, vocab_size: int, top: bool) -> Iterator[tuple[str, int, tuple]]:
    for context, run in context_runs(records):
        p_context = run[0][1]  # the LOWER record sorts first
        successors = run[1:]
        if not successors:
            yield "row", context, (p_context, None)
            continue
        if len(successors) == vocab_size - 1:
            weight = COMPLETE_STATE_LN
        else:
            hi = 0.0
            lo = 0.0
            for _, (_word, p, p_lo) in successors:
                hi += p
                lo += p_lo
            weight = backoff_ln(hi, lo)
        yield "row", context, (p_context, weight)
        if top:  # the highest order's own rows, in key order
            for word, p, _ in sorted(value for _, value in successors):
                yield "top", (context << WORD_BITS) | word, (p, None)


def recompute_backoffs(level, lower, vocab_size: int, bounds: list[int], top: bool):
    """ARPA rows after pruning: ("row", h, (p(h), ln alpha(h) or None)) for every n-gram h of
    ``lower`` (order k - 1) and, when ``top``, ("top", hw, (p, None)) for ``level`` (order k),
    both in key order. ``level``/``lower``: RDDs of (key, estimate.Entry)."""
    successors = level.map(
        lambda item: ((prefix(item[0]), item[1].first), (item[0] & WORD_MASK, item[1].p, item[1].p_lo))
    )
    contexts = lower.map(lambda item: ((item[0], LOWER), item[1].p))
    return by_context(successors.union(contexts), bounds).mapPartitions(lambda records: _walk(records, vocab_size, top))
