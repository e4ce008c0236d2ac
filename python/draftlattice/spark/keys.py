"""N-gram keys: the word ids of an n-gram packed into one Python int, 32 bits per word.

An order-k n-gram w_1..w_k is ``sum(w_i << 32 (k - i))``. Ints hash, compare and pickle much
faster than tuples, and within one order numeric order is the lexicographic order of the word
ids, which is the ARPA line order. The prefix (w_1..w_{k-1}) is ``key >> 32``, the last word
``key & WORD_MASK`` and the suffix (w_2..w_k) ``key & suffix_mask(k)``. Word ids are below 2^32.
"""

from __future__ import annotations

__all__ = ["WORD_BITS", "WORD_MASK", "pack", "prefix", "suffix_mask", "unpack"]

WORD_BITS = 32
WORD_MASK = (1 << WORD_BITS) - 1


def pack(ids) -> int:
    key = 0
    for word in ids:
        key = (key << WORD_BITS) | word
    return key


def unpack(key: int, order: int) -> list[int]:
    return [(key >> (WORD_BITS * (order - 1 - i))) & WORD_MASK for i in range(order)]


def prefix(key: int) -> int:
    return key >> WORD_BITS


def suffix_mask(order: int) -> int:
    """Mask that keeps the last ``order - 1`` words of an order-``order`` key."""
    return (1 << (WORD_BITS * (order - 1))) - 1
