"""Partitioning by context: whole contexts per partition, partitions in key order.

Records keyed ``(context key, sort key)`` are range-partitioned on the context (bounds from a
sample of the contexts, like ``sortByKey``) and sorted within each partition, so that

- a partition is a run of whole contexts, each with its records in sort-key order, read as a
  stream (``context_runs``; memory: one context's successors, at most the vocabulary);
- partition i holds smaller contexts than partition i + 1, so what a walk emits in context
  order is globally sorted and can be written as ARPA without another shuffle.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Any

__all__ = ["by_context", "context_bounds", "context_runs", "join", "key_hash"]

_SAMPLES_PER_PARTITION = 20


def key_hash(key) -> int:
    """Hash partitioning for our keys (packed ints, tuples of words): Python's own hash.

    pyspark's default, ``portable_hash``, checks ``os.environ`` on every call, which was most of
    the counting job's time in a profile. ``hash`` agrees across workers because Spark starts
    every Python worker with the same PYTHONHASHSEED (and hash of an int needs none).
    """
    return hash(key)


def join(left, right, partitions: int):
    """``left.join(right)`` (inner, one value per key on the right) partitioned by ``key_hash``."""

    def pair(values):
        lefts, rights = [], []
        for side, value in values:
            (lefts if side == 0 else rights).append(value)
        return [(a, b) for a in lefts for b in rights]

    tagged = left.mapValues(lambda value: (0, value)).union(right.mapValues(lambda value: (1, value)))
    return tagged.groupByKey(partitions, partitionFunc=key_hash).flatMapValues(pair)


def context_bounds(contexts, size: int, partitions: int) -> list[int]:
    """Upper bounds (partitions - 1 of them) splitting ``contexts`` (an RDD of keys, ``size``
    of them) into about equal ranges; a sample goes to the driver."""
    if partitions <= 1 or size == 0:
        return []
    fraction = min(1.0, 3.0 * _SAMPLES_PER_PARTITION * partitions / size)
    sample = sorted(contexts.sample(False, fraction, seed=size).collect())
    if not sample:
        return []
    return sorted({sample[len(sample) * i // partitions] for i in range(1, partitions)})


def by_context(records, bounds: list[int]):
    """Range-partitions ((context, sort key), value) records on the context and sorts them."""

    def partition_of(key: tuple) -> int:
        return bisect.bisect_left(bounds, key[0])

    return records.repartitionAndSortWithinPartitions(len(bounds) + 1, partitionFunc=partition_of)


def context_runs(records: Iterator[tuple[tuple, Any]]) -> Iterator[tuple[int, list[tuple[Any, Any]]]]:
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
