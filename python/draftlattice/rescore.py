"""Exact p-best rescoring of top-k lattices with a backoff n-gram LM.

The score of a draft ``d`` (one candidate per head) is

    total(d) = sum_t lattice.logprobs[t, rank_t] + alpha * ln p_LM(d | context)

in natural log, where ``context`` holds the already decoded tokens (only the last ``order - 1``
matter; ``bos`` puts ``<s>`` before them). :func:`rescore` returns the ``p`` drafts of highest
total, exactly as if all ``k**h`` drafts had been enumerated and sorted, without enumerating them
(dynamic programming over the lattice composed with the LM's states, branch-and-bound, then a
best-first extraction; see csrc/nbest.h). If ``p > k**h``, all ``k**h`` drafts are returned.

Tie rule: drafts with equal totals are ordered by the lexicographic order of their rank
sequences (the rank of a candidate is its column in :attr:`Lattice.tokens`, i.e. its order by
lattice log-probability then token id), smallest first. Totals are double-precision sums, so
"equal" means equal after rounding.
"""

from __future__ import annotations

import numbers
import sys
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from . import _core
from ._arrays import context_array, positive_int, to_numpy
from .lattice import Lattice


@dataclass(frozen=True)
class RescoreResult:
    """The p best drafts of one lattice, best first.

    Attributes:
        tokens: [p, h] int32 draft token ids.
        scores: [p] float64 totals, ``head_scores + alpha * lm_scores`` (natural log).
        head_scores: [p] float64 sums of the lattice log-probabilities of the drafts.
        lm_scores: [p] float64 natural-log LM probabilities of the drafts given the context
            (unweighted by alpha).
    """

    tokens: np.ndarray
    scores: np.ndarray
    head_scores: np.ndarray
    lm_scores: np.ndarray

    def __len__(self) -> int:
        return int(self.tokens.shape[0])


def check_alpha(alpha: Any) -> float:
    """alpha as a float; ValueError unless finite and >= 0."""
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real):
        raise ValueError(f"alpha must be a number, got {alpha!r}")
    if not np.isfinite(alpha) or alpha < 0:
        raise ValueError(f"alpha must be finite and >= 0, got alpha={alpha}")
    return float(alpha)


def core_lattice(lattice: Any) -> _core.Lattice:
    if not isinstance(lattice, Lattice):
        raise ValueError(f"expected a draftlattice.Lattice, got {type(lattice).__name__}")
    return lattice._core


def check_lm(lm: Any) -> _core.NgramLM:
    if not isinstance(lm, _core.NgramLM):
        raise ValueError(f"lm must be a draftlattice.NgramLM, got {type(lm).__name__}")
    return lm


def as_lattices(inputs: Any, k: int | None, temperature: float, num_threads: int | None,
                what: str = "lattices") -> list[Lattice]:
    """Lattices from a list of Lattice, logits [B, h, V] (needs k) or (tokens, logprobs) [B, h, k]."""
    if isinstance(inputs, Lattice):
        raise ValueError(f"{what}: pass a list of lattices for a batch (or use the single call)")
    if isinstance(inputs, (list, tuple)) and inputs and all(isinstance(x, Lattice) for x in inputs):
        return list(inputs)
    if isinstance(inputs, tuple) and len(inputs) == 2:  # top-k arrays
        tokens, logprobs = (to_numpy(x, name) for x, name in zip(inputs, ("tokens", "logprobs")))
        if tokens.ndim != 3 or logprobs.ndim != 3:
            raise ValueError(f"top-k {what} must be two [B, h, k] arrays, got shapes "
                             f"{list(tokens.shape)} and {list(logprobs.shape)}")
        if tokens.shape != logprobs.shape:
            raise ValueError(f"tokens shape {list(tokens.shape)} != logprobs shape {list(logprobs.shape)}")
        if tokens.shape[0] == 0:
            raise ValueError(f"{what} batch is empty (B=0)")
        return [Lattice.from_topk(t, lp) for t, lp in zip(tokens, logprobs)]
    if isinstance(inputs, (list, tuple)) and len(inputs) == 0:
        raise ValueError(f"{what} batch is empty (B=0)")
    if k is None:
        raise ValueError(f"k is required to build {what} from logits [B, h, V]")
    return Lattice.batch_from_logits(inputs, k, temperature, num_threads)


def _result(raw: tuple) -> RescoreResult:
    # What the frozen dataclass's __init__ does, without its per-field object.__setattr__ calls
    # (about 1 us of a call that takes a few us at small shapes).
    result = object.__new__(RescoreResult)
    tokens, scores, head_scores, lm_scores = raw
    result.__dict__.update(tokens=tokens, scores=scores, head_scores=head_scores, lm_scores=lm_scores)
    return result


_EMPTY_CONTEXT = np.zeros(0, dtype=np.int32)
_EMPTY_CONTEXT.flags.writeable = False
_INT32_MAX = 2**31 - 1


def _plain_context(context: Any) -> np.ndarray | None:
    """The int32 array for a context given as a tuple/list of plain non-negative ints or as a
    1-d int32 numpy array, or None for anything else (the full conversion handles it). The C++
    side checks the ids against the LM (negative ids or ids outside the vocab raise ValueError)."""
    kind = type(context)
    if kind is tuple or kind is list:
        if not context:
            return _EMPTY_CONTEXT
        for token in context:
            if type(token) is not int or not 0 <= token <= _INT32_MAX:
                return None
        return np.array(context, dtype=np.int32)
    if kind is np.ndarray and context.dtype == np.int32 and context.ndim == 1:
        return context
    return None


def rescore(lattice: Lattice, lm: Any, p: int = 1, alpha: float = 1.0,
            context: Sequence[int] | np.ndarray = (), bos: bool = False) -> RescoreResult:
    """The p best drafts of ``lattice`` under lattice log-probs + alpha * LM log-prob (exact).

    Args:
        lattice: an h x k :class:`Lattice`.
        lm: a :class:`draftlattice.NgramLM` over the same token ids.
        p: number of drafts, >= 1 (all k**h if p exceeds that).
        alpha: LM weight, finite and >= 0.
        context: already decoded token ids (1-d ints); only the last order-1 matter.
        bos: put ``<s>`` before the context.

    Returns:
        :class:`RescoreResult` with min(p, k**h) drafts, best first (tie rule: module docstring).

    Raises:
        ValueError: p < 1, alpha < 0 or NaN, negative token ids, ids outside the LM's vocab.
    """
    # Fast path for plain argument types (the usual call): the same checks, without the generic
    # conversions, which cost more than the search itself on small lattices.
    if (type(p) is int and p >= 1 and type(alpha) is float and 0.0 <= alpha <= sys.float_info.max
            and type(lattice) is Lattice and type(bos) is bool and isinstance(lm, _core.NgramLM)):
        plain = _plain_context(context)
        if plain is not None:
            return _result(_core.rescore(lattice._core, lm, p, alpha, plain, bos))
    raw = _core.rescore(core_lattice(lattice), check_lm(lm), positive_int(p, "p"), check_alpha(alpha),
                        context_array(context), bool(bos))
    return _result(raw)


def contexts_list(contexts: Any, batch: int) -> list[np.ndarray]:
    if contexts is None:
        return [np.zeros(0, dtype=np.int32)] * batch
    values = to_numpy(contexts, "contexts") if not isinstance(contexts, (list, tuple)) else contexts
    if len(values) != batch:
        raise ValueError(f"got {len(values)} contexts for {batch} lattices (one per sequence)")
    out = []
    for c in values:
        plain = _plain_context(c)
        out.append(context_array(c) if plain is None else plain)
    return out


def threads_arg(num_threads: int | None) -> int:
    return 0 if num_threads is None else positive_int(num_threads, "num_threads")


def rescore_batch(lattices: Any, lm: Any, contexts: Any = None, p: int = 1, alpha: float = 1.0,
                  k: int | None = None, bos: bool = False, temperature: float = 1.0,
                  num_threads: int | None = None) -> list[RescoreResult]:
    """:func:`rescore` for B sequences in parallel (C++ threads, GIL released).

    Args:
        lattices: a list of B :class:`Lattice`, logits [B, h, V] (with ``k``, ``temperature``),
            or a tuple ``(tokens, logprobs)`` of [B, h, k] arrays.
        contexts: B token-id sequences (one per lattice), or None for empty contexts.
        num_threads: worker threads (default: all hardware threads, at most B).

    Returns:
        B results, identical to B calls of :func:`rescore`.
    """
    built = as_lattices(lattices, k, temperature, num_threads)
    raw = _core.rescore_batch([lat._core for lat in built], check_lm(lm), positive_int(p, "p"),
                              check_alpha(alpha), contexts_list(contexts, len(built)), bool(bos),
                              threads_arg(num_threads))
    return [_result(r) for r in raw]
