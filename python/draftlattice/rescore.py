"""Exact p-best rescoring of top-k lattices with a backoff n-gram LM.

The score of a draft ``d`` (one candidate per head) is

    total(d) = sum_t lattice.logprobs[t, rank_t] + alpha * ln p_LM(d | context)

in natural log, where ``context`` holds the already decoded tokens (only the last ``order - 1``
matter; ``bos`` puts ``<s>`` before them), or is the :class:`~draftlattice.LmState` after them
(``lm.start(tokens, bos)``, advanced with ``lm.advance(state, new_tokens)``): a decoder that keeps
the state of its committed text pays per step only for the tokens it accepted. :func:`rescore` returns the ``p`` drafts of highest
total, exactly as if all ``k**h`` drafts had been enumerated and sorted, without enumerating them
(dynamic programming over the lattice composed with the LM's states, branch-and-bound, then a
best-first extraction; see csrc/nbest.h). If ``p > k**h``, all ``k**h`` drafts are returned.

``-inf`` LM scores (``-inf`` or ``-99`` n-grams, ``oov_logprob=-inf``): ``alpha = 0`` means the
LM term is not used at all, so the total is the lattice score even there (never ``0 * -inf``);
with ``alpha > 0`` a draft the LM gives ``-inf`` is impossible and is not returned, so fewer than
``p`` drafts come back when fewer than ``p`` are possible (``lm_scores`` still reports the
unweighted LM score, ``-inf`` included, with ``alpha = 0``).

Tie rule: drafts with equal totals are ordered by the lexicographic order of their rank
sequences (the rank of a candidate is its column in :attr:`Lattice.tokens`, i.e. its order by
lattice log-probability then token id), smallest first. Totals are double-precision sums, so
"equal" means equal after rounding.

Arguments are validated once, by the C++ core (``p >= 1``, ``alpha`` finite and ``>= 0``, token ids
known to the LM, a state of this LM); the wrappers here only convert types. Wrong types raise
TypeError, impossible values ValueError.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _core
from ._arrays import context_array, to_numpy, tokens_in
from ._core import LmMemo, LmState
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


def core_lattice(lattice: Any) -> _core.Lattice:
    """The core lattice of a :class:`Lattice` (TypeError for anything else)."""
    if type(lattice) is Lattice or isinstance(lattice, Lattice):
        return lattice._core
    raise TypeError(f"lattice must be a draftlattice.Lattice, got {type(lattice).__name__}")


def as_lattices(
    inputs: Any, k: int | None, temperature: float, num_threads: int | None, what: str = "lattices"
) -> list[Lattice]:
    """Lattices from a list of Lattice, logits [B, h, V] (needs k) or (tokens, logprobs) [B, h, k]."""
    if isinstance(inputs, Lattice):
        raise TypeError(f"{what}: pass a list of lattices for a batch (or use the single call)")
    if isinstance(inputs, (list, tuple)) and inputs and all(isinstance(x, Lattice) for x in inputs):
        return list(inputs)
    if isinstance(inputs, tuple) and len(inputs) == 2:  # top-k arrays [B, h, k]
        tokens, logprobs = (to_numpy(x, name) for x, name in zip(inputs, ("tokens", "logprobs")))
        if tokens.ndim != 3 or tokens.shape != logprobs.shape:
            raise ValueError(
                f"top-k {what} must be two [B, h, k] arrays, got shapes {list(tokens.shape)} and {list(logprobs.shape)}"
            )
        if tokens.shape[0] == 0:
            raise ValueError(f"{what} batch is empty (B=0)")
        return [Lattice.from_topk(t, lp) for t, lp in zip(tokens, logprobs)]
    if isinstance(inputs, (list, tuple)) and len(inputs) == 0:
        raise ValueError(f"{what} batch is empty (B=0)")
    if k is None:
        raise ValueError(f"k is required to build {what} from logits [B, h, V]")
    return Lattice.batch_from_logits(inputs, k, temperature, num_threads)


# Contexts that go to the core as they are: tokens_in's torch check (a module name lookup, about
# 0.1 us) is for the rest.
_AS_IS = (tuple, list, LmState)


def rescore(
    lattice: Lattice,
    lm: Any,
    p: int = 1,
    alpha: float = 1.0,
    context: Sequence[int] | np.ndarray | LmState = (),
    bos: bool = False,
) -> RescoreResult:
    """The p best drafts of ``lattice`` under lattice log-probs + alpha * LM log-prob (exact).

    Args:
        lattice: an h x k :class:`Lattice`.
        lm: a :class:`draftlattice.NgramLM` over the same token ids.
        p: number of drafts, >= 1 (all k**h if p exceeds that).
        alpha: LM weight, in [0, 1e6] (a larger one overflows the scores).
        context: already decoded token ids (1-d ints; only the last order-1 matter), or the
            :class:`~draftlattice.LmState` of this LM after them (then ``bos`` must be False:
            the state already holds its ``<s>``).
        bos: put ``<s>`` before the context tokens.

    Returns:
        :class:`RescoreResult` with min(p, k**h) drafts, best first (tie rule: module docstring).

    Raises:
        TypeError: a non-integer p, a non-number alpha, a lattice or lm of the wrong type.
        ValueError: p < 1, alpha < 0 or NaN, negative token ids, ids outside the LM's vocab, a
            state of another LM.
    """
    # Written for a call of about 1.5 us at small shapes: no helper frames on the common path, and
    # the core builds the RescoreResult itself (without its __init__, about 0.5 us).
    core = lattice._core if type(lattice) is Lattice else core_lattice(lattice)
    if type(context) not in _AS_IS:
        context = tokens_in(context)
    return _core.rescore(core, lm, p, alpha, context, bos, RescoreResult)


def contexts_list(contexts: Any, batch: int) -> list[np.ndarray]:
    """B contexts as int32 arrays (None: empty ones); for the sampling wrappers."""
    if contexts is None:
        return [np.zeros(0, dtype=np.int32)] * batch
    values = to_numpy(contexts, "contexts") if not isinstance(contexts, (list, tuple)) else contexts
    return [context_array(c) for c in values]


def contexts_in(contexts: Any) -> Any:
    """B contexts as the batched bindings take them (torch tensors as numpy arrays; None,
    token sequences and LmStates as they are)."""
    contexts = tokens_in(contexts)
    if isinstance(contexts, (list, tuple)):
        return [tokens_in(c) for c in contexts]
    return contexts


def threads_arg(num_threads: int | None) -> int:
    """num_threads for the sampling bindings: 0 = all hardware threads."""
    return 0 if num_threads is None else num_threads


def rescore_batch(
    lattices: Any,
    lm: Any,
    contexts: Any = None,
    p: int = 1,
    alpha: float = 1.0,
    k: int | None = None,
    bos: bool = False,
    temperature: float = 1.0,
    num_threads: int | None = None,
    memos: Sequence[LmMemo | None] | None = None,
) -> list[RescoreResult]:
    """:func:`rescore` for B sequences in parallel (C++ threads, GIL released).

    Args:
        lattices: a list of B :class:`Lattice`, logits [B, h, V] (with ``k``, ``temperature``),
            or a tuple ``(tokens, logprobs)`` of [B, h, k] arrays.
        contexts: B contexts (token-id sequences or LmStates, one per lattice), or None for
            empty contexts.
        num_threads: worker threads (default: all hardware threads, at most B).
        memos: one :class:`LmMemo` (or None) per sequence, kept by a decoding loop from step to
            step: consecutive lattices of one sequence ask the LM mostly what earlier ones
            asked, and the memo answers from its small tables (the results are the same with or
            without it). A memo used by another call at the same moment is skipped, not waited for.

    Returns:
        B results, identical to B calls of :func:`rescore`.
    """
    built = as_lattices(lattices, k, temperature, num_threads)
    contexts = contexts_in(contexts)
    cores = [lat._core for lat in built]
    return _core.rescore_batch(cores, lm, p, alpha, contexts, bos, num_threads, memos, RescoreResult)
