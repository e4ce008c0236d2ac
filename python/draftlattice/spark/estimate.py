"""Katz estimation of one order as a Spark job: probabilities, complete states, backoff weights.

For order k >= 2, every kept n-gram hw (count >= the order's min count) is joined with the
probability of its suffix h'w (the order below, already estimated), then the records are
partitioned by their context h (partition.by_context) and walked context by context. Each run
starts with the context's own records, sort keys below any ``first``:

- ``LOWER`` (-2): h's own estimate (order k - 1): its probability and, when pruning, p(h);
- ``TOTAL`` (-1): c(h), the sum of the counts of *all* h's successors, min-count removed ones
  included, so that their mass goes to the backoff (as the C++ trainer; a ``reduceByKey``);

then the kept successors in order of first appearance. Per context the walk computes
p(w|h) = d(c(hw)) c(hw) / c(h) (OpenGrm's Katz, csrc/train/katz.cc), gives a complete state's
reserved mass to ``</s>``, the backoff weight alpha(h), and, when pruning, each n-gram's
relative-entropy score (prune.score) and p(hw) as a state for the order above. It emits h's
ARPA row (order k - 1) and the order-k estimates, both in key order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from .backoff import COMPLETE_STATE_LN, LOWER, backoff_ln
from .counting import EOS
from .discounts import discount_for
from .keys import WORD_BITS, WORD_MASK, prefix, suffix_mask
from .partition import by_context, context_runs, join
from .prune import score

__all__ = ["Entry", "estimate_order", "unigram_entries"]

TOTAL = -1


class Entry(NamedTuple):
    """One estimated n-gram: p(w|h), p(w|h') (None for unigrams), first appearance, the
    relative-entropy score (None unless pruning) and p(hw) as a state (None unless pruning)."""

    p: float
    p_lo: float | None
    first: int
    score: float | None
    state: float | None


def unigram_entries(counts: list[int], with_states: bool) -> list[tuple[int, Entry]]:
    """p(w) = c(w) / N with N all counts but <s>'s (no discount); <s> gets p = 0.

    As a state (pruning), <s> takes p(</s>) (OpenGrm: both are the sentence boundary). The
    unigrams' ``first`` is unused (sums run over successors, which are bigrams or longer).
    """
    total = 0.0
    for count in counts[1:]:
        total += float(count)
    probs = [0.0] + [count / total for count in counts[1:]]
    entries = []
    for word, p in enumerate(probs):
        state = (probs[EOS] if word == 0 else p) if with_states else None
        entries.append((word, Entry(p, None, 0, None, state)))
    return entries


def _walk(records, discounts: list[float], vocab_size: int, pruning: bool) -> Iterator[tuple[str, int, object]]:
    for context, run in context_runs(records):
        if run[0][0] != LOWER:
            continue  # h itself removed by its min count: so were all its successors
        own: Entry = run[0][1]
        successors = run[2:] if len(run) > 1 and run[1][0] == TOTAL else []
        if not successors:  # not a context (no successors, or all removed by min counts)
            yield "row", context, (own.p, None)
            continue
        total = float(run[1][1])
        probs = []
        mass = 0.0
        for _, (_word, count, _p_lo) in successors:
            p = discount_for(discounts, count) * float(count) / total
            probs.append(p)
            mass += p
        complete = len(successors) == vocab_size - 1
        if complete:  # the state sums to one by itself: its reserved mass goes to </s>
            probs = [p + (1.0 - mass) if value[0] == EOS else p for p, (_, value) in zip(probs, successors)]
        hi = 0.0
        lo = 0.0
        for p, (_, (_word, _count, p_lo)) in zip(probs, successors):
            hi += p
            lo += p_lo
        yield "row", context, (own.p, COMPLETE_STATE_LN if complete else backoff_ln(hi, lo))
        entries = []
        for p, (first, (word, _count, p_lo)) in zip(probs, successors):
            if pruning:
                entry = Entry(p, p_lo, first, score(p, p_lo, own.state, hi, lo), own.state * p)
            else:
                entry = Entry(p, p_lo, first, None, None)
            entries.append(((context << WORD_BITS) | word, entry))
        entries.sort(key=lambda item: item[0])
        for key, entry in entries:
            yield "ngram", key, entry


def estimate_order(
    kept, totals, lower, order: int, discounts: list[float], vocab_size: int, bounds: list[int], pruning: bool
):
    """One order's estimate: an RDD of ("row", h, (p(h), ln alpha(h) or None)) for every n-gram
    of ``lower`` and ("ngram", hw, Entry) for ``kept``, both in key order.

    kept: (key, (count, first)) of order k after min counts; totals: (h, c(h)) over all
    successors; lower: the (key, Entry) RDD of order k - 1; bounds: partition.context_bounds
    over ``lower``'s keys.
    """
    mask = suffix_mask(order)
    lower_probs = lower.mapValues(lambda entry: entry.p)
    joined = join(kept.map(lambda item: (item[0] & mask, (item[0], item[1]))), lower_probs, len(bounds) + 1)
    successors = joined.map(
        lambda item: (
            (prefix(item[1][0][0]), item[1][0][1][1]),
            (item[1][0][0] & WORD_MASK, item[1][0][1][0], item[1][1]),
        )
    )
    records = successors.union(totals.map(lambda item: ((item[0], TOTAL), item[1])))
    records = records.union(lower.map(lambda item: ((item[0], LOWER), item[1])))
    return by_context(records, bounds).mapPartitions(lambda rs: _walk(rs, discounts, vocab_size, pruning))
