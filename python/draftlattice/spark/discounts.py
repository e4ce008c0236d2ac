"""Count-of-counts (a small aggregate sent to the driver) and OpenGrm's Katz discounts.

The discount formula is ngrammake's (``CalculateKatzDiscount`` with its quirks, see
shared/docs/katz-opengrm.md section 3), written with the same floating-point operations in the
same order as csrc/train/katz.cc ``KatzDiscounts``, so the values are identical.
"""

from __future__ import annotations

__all__ = [
    "BINS",
    "NORM_EPS",
    "count_of_counts",
    "discount_for",
    "katz_discounts",
    "unigram_count_of_counts",
]

BINS = 5  # OpenGrm's --bins default
NORM_EPS = 0.001  # OpenGrm's fixed kNormEps


def unigram_count_of_counts(counts: list[int]) -> list[int]:
    """n_r of the unigrams for r = 1..BINS+1 from the vocabulary's counts (``counts[0]`` is <s>'s)."""
    n = [0] * (BINS + 1)
    for r in counts[1:]:
        if 1 <= r <= BINS + 1:
            n[r - 1] += 1
    return n


def count_of_counts(level) -> list[int]:
    """n_r for r = 1..BINS+1 of an order's RDD of (ngram, (count, ...)): one small aggregate."""

    def add(n: list[int], item) -> list[int]:
        r = item[1][0]
        if 1 <= r <= BINS + 1:
            n[r - 1] += 1
        return n

    def merge(a: list[int], b: list[int]) -> list[int]:
        return [x + y for x, y in zip(a, b)]

    return level.aggregate([0] * (BINS + 1), add, merge)


def katz_discounts(n: list[int], bins: int = BINS) -> list[float]:
    """d_1..d_{bins+1} from n_1..n_{bins+1} (index r - 1); the last is for counts above bins."""
    rnorm = 0.0
    for j in range(1, bins + 1):
        if n[j - 1] > 0:
            rnorm = (bins + 1) * float(n[bins]) / (j * float(n[j - 1]))
            break
    d = [1.0 - NORM_EPS] * (bins + 1)
    for r in range(1, bins + 1):
        rstar = float(r + 1)
        if n[r] > 0:
            rstar *= float(n[r])
        if n[r - 1] > 0:
            rstar /= float(n[r - 1])
        value = rstar / r - rnorm
        if 1.0 - rnorm > 0:
            value /= 1.0 - rnorm
        d[r - 1] = 1.0 - NORM_EPS if (value <= 0 or value >= 1) else value
    return d


def discount_for(discounts: list[float], r: int) -> float:
    """The discount of count r (counts above BINS share the last entry)."""
    return discounts[BINS if r > BINS else r - 1]
