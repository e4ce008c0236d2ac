"""Katz estimation of one order as a Spark job: probabilities, complete states, backoff weights.

For order k >= 2, every kept n-gram hw (count >= the order's min count) is joined with the
probability of its suffix h'w (the order below, already estimated), then the n-grams are
partitioned by their context h and walked context by context (``backoff.by_context``). Each run
starts with the context's own records, sort keys below any ``first``:

- ``TOTAL`` (-2): c(h), the sum of the counts of *all* h's successors, min-count removed ones
  included, so their mass goes to the backoff (as the C++ trainer; a ``reduceByKey``);
- ``STATE`` (-1): p(h), the product of h's ascending n-gram probabilities (only for pruning);

then the kept successors in order of first appearance. Per context the walk computes
p(w|h) = d(c(hw)) c(hw) / c(h) (OpenGrm's Katz, csrc/train/katz.cc), gives a complete state's
reserved mass to ``</s>``, the backoff weight alpha(h), and, when pruning, each n-gram's
relative-entropy score (prune.score) and p(hw) as a state for the order above.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import NamedTuple

from .backoff import COMPLETE_STATE_LN, backoff_ln, by_context, context_runs
from .counting import EOS
from .discounts import discount_for
from .prune import score

__all__ = ["Entry", "estimate_order", "unigram_entries"]

TOTAL = -2
STATE = -1


class Entry(NamedTuple):
    """One estimated n-gram: p(w|h), p(w|h') (None for unigrams), first appearance, the
    relative-entropy score (None unless pruning) and p(hw) as a state (None unless pruning)."""

    p: float
    p_lo: float | None
    first: int
    score: float | None
    state: float | None


def unigram_entries(counts: list[int], with_states: bool) -> list[tuple[tuple, Entry]]:
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
        entries.append(((word,), Entry(p, None, 0, None, state)))
    return entries


def _walk(records, discounts: list[float], vocab_size: int, pruning: bool) -> Iterator[tuple[str, tuple, object]]:
    for context, run in context_runs(records):
        total = state = None
        successors = []
        for sort_key, value in run:
            if sort_key == TOTAL:
                total = float(value)
            elif sort_key == STATE:
                state = value
            else:
                successors.append((sort_key, value))
        if not successors:
            continue  # not a context (every successor removed by its min count)
        probs = []
        mass = 0.0
        for _, (word, count, _p_lo) in successors:
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
        yield "backoff", context, COMPLETE_STATE_LN if complete else backoff_ln(hi, lo)
        for p, (first, (word, _count, p_lo)) in zip(probs, successors):
            if pruning:
                entry = Entry(p, p_lo, first, score(p, p_lo, state, hi, lo), state * p)
            else:
                entry = Entry(p, p_lo, first, None, None)
            yield "ngram", (*context, word), entry


def estimate_order(kept, totals, lower, discounts: list[float], vocab_size: int, partitions: int, pruning: bool):
    """One order's estimate: an RDD of ("ngram", ngram, Entry) and ("backoff", context, ln alpha).

    kept: (ngram, (count, first)) of order k after min counts; totals: (h, c(h)) over all
    successors; lower: the (ngram, Entry) RDD of order k - 1.
    """
    lower_probs = lower.mapValues(operator.attrgetter("p"))
    joined = kept.map(lambda item: (item[0][1:], (item[0], item[1]))).join(lower_probs, partitions)
    successors = joined.map(
        lambda item: ((item[1][0][0][:-1], item[1][0][1][1]), (item[1][0][0][-1], item[1][0][1][0], item[1][1]))
    )
    records = successors.union(totals.map(lambda item: ((item[0], TOTAL), item[1])))
    if pruning:
        states = lower.map(lambda item: ((item[0], STATE), item[1].state))
        records = records.union(states)
    return by_context(records, partitions).mapPartitions(
        lambda rs: _walk(rs, discounts, vocab_size, pruning)
    )
