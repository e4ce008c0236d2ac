"""N-gram counting as a Spark job, and word ids in order of first appearance.

Each sentence w_1..w_m is counted as ``<s> w_1 .. w_m </s>``: every n-gram of order 1..N ending
at w_1..w_m or ``</s>`` gets +1, and the unigram ``<s>`` counts the sentences (as OpenGrm's
ngramcount and the C++ counter, csrc/train/counts.h).

Besides its count, every n-gram keeps ``first``: the position of its first occurrence,
``(sentence position << 32) | index of its last word``. The C++ trainer numbers the n-grams of
an order in the order it first meets them and sums probabilities in that order; ``first`` lets
the Spark jobs sum in the same order, so that floating-point sums match bit for bit.

The counting is a ``reduceByKey`` with map-side combining over word-spelling tuples; then the
unigram table (one row per word, the vocabulary) goes to the driver, which numbers the words:
``<s>`` = 0, ``</s>`` = 1, then by first appearance. The vocabulary is the only table the
driver holds; it is broadcast to map each n-gram to its packed word ids (keys.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .keys import pack
from .partition import key_hash

__all__ = ["BOS", "EOS", "Vocabulary", "count_ngrams", "to_ids"]

# Word keys before numbering: spellings are str; <s> and </s> are these ints, so that a corpus
# word spelled "<s>" stays a separate word (as in the C++ counter, which numbers it as any word).
BOS = 0
EOS = 1
_INDEX_BITS = 32


def _sentence_ngrams(order: int, sentence: tuple[int, list[str]]) -> Iterator[tuple[tuple, tuple[int, int]]]:
    position, words = sentence
    extended: list[Any] = [BOS, *words, EOS]
    base = position << _INDEX_BITS
    yield (BOS,), (1, base)
    for end in range(1, len(extended)):
        first = base | end
        for k in range(1, min(order, end + 1) + 1):
            yield tuple(extended[end - k + 1 : end + 1]), (1, first)


def _merge(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0] + b[0], min(a[1], b[1])


def count_ngrams(sentences, order: int, partitions: int):
    """RDD of (word-key tuple, (count, first)) for all orders 1..N (unigrams include <s>, </s>)."""
    return sentences.flatMap(lambda s: _sentence_ngrams(order, s)).reduceByKey(
        _merge, partitions, partitionFunc=key_hash
    )


class Vocabulary:
    """Words numbered as the C++ counter numbers them: <s>, </s>, then by first appearance."""

    def __init__(self, unigrams: list[tuple[tuple, tuple[int, int]]]) -> None:
        words = sorted((first, key[0]) for key, (_, first) in unigrams if key[0] not in (BOS, EOS))
        self.spellings: list[str] = ["<s>", "</s>"] + [word for _, word in words]
        self.ids: dict[Any, int] = {BOS: 0, EOS: 1}
        self.ids.update((word, index) for index, (_, word) in enumerate(words, start=2))
        counts = {key[0]: count for key, (count, _) in unigrams}
        self.counts: list[int] = [counts.get(BOS, 0), counts.get(EOS, 0)] + [counts[w] for _, w in words]

    def __len__(self) -> int:
        return len(self.spellings)

    @property
    def sentences(self) -> int:
        return self.counts[0]

    @property
    def tokens(self) -> int:
        """Words counted, </s> excluded."""
        return sum(self.counts[2:])


def to_ids(counts, ids_broadcast):
    """(word-key tuple, value) -> (packed word-id key, value) (keys.py), the ids from a
    broadcast dict."""

    def convert(item):
        ids = ids_broadcast.value
        key, value = item
        return pack(ids[word] for word in key), value

    return counts.map(convert)
