"""Exact sampling of drafts from a rescored lattice, and oracle drafts.

Sampling target: ``P(d) = exp(total(d)) / Z`` with ``total(d) = lattice log-prob of d + alpha *
ln p_LM(d | context)`` (the score of :func:`draftlattice.rescore`). The C++ core builds the whole
composed lattice, runs a backward (log-sum-exp) pass and samples left to right, returning for
every position the exact conditional distribution ``q`` over that head's k candidates given the
sampled prefix (columns aligned with :attr:`Lattice.tokens`), so a verifier can scatter it over
the vocabulary: ``prod_t q[t, rank_t] = P(d)``.

Full support (:func:`sample_from_heads`): the lattice also carries, at every position, one
"other" arc for the head's probability mass outside its top-k, so the proposal never has less
support than the head. The arc's LM score is the LM's probability of "a token outside the
candidates" and the LM restarts from an empty context after it (see csrc/sample.h); the concrete
token is then drawn from the head restricted to the complement of its top-k. The returned ``q``
is the exact law of the concrete draft over the whole vocabulary.

Randomness: one uint64 seed per lattice, drawn from the caller's ``torch.Generator`` or
``numpy.random.Generator`` (or given as an int), expanded by splitmix64 in the core; results are
identical across platforms and thread counts.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _core
from ._arrays import context_array, int_array, to_numpy
from ._core import LmState
from .lattice import Lattice
from .rescore import as_lattices, contexts_list, core_lattice, threads_arg


@dataclass(frozen=True)
class DraftSamples:
    """n drafts sampled from one rescored lattice.

    Attributes:
        tokens: [n, h] int32 sampled drafts.
        q: [n, h, k] float64; ``q[i, t]`` is the distribution of head t's candidates (columns of
            ``lattice.tokens[t]``) given draft i's tokens before t. Rows sum to 1.
        logprobs: [n] float64 natural log of ``P(draft)`` (= sum of ln q of the chosen candidates).
        log_z: natural-log partition function ``ln sum_d exp(total(d))``.
    """

    tokens: np.ndarray
    q: np.ndarray
    logprobs: np.ndarray
    log_z: float


def draw_seed(generator: Any = None) -> int:
    """A uint64 seed from a torch.Generator, a numpy Generator, an int, or fresh entropy (None)."""
    if generator is None:
        return int(np.random.default_rng().integers(0, 2**64, dtype=np.uint64))
    if isinstance(generator, np.random.Generator):
        return int(generator.integers(0, 2**64, dtype=np.uint64))
    if isinstance(generator, numbers.Integral) and not isinstance(generator, bool):
        if not 0 <= generator < 2**64:
            raise ValueError(f"seed must be in [0, 2**64), got {generator}")
        return int(generator)
    if type(generator).__module__.startswith("torch"):
        import torch

        # On the generator's device: a CUDA generator cannot draw into a host tensor.
        high = int(torch.randint(0, 2**32, (1,), generator=generator, device=generator.device).item())
        low = int(torch.randint(0, 2**32, (1,), generator=generator, device=generator.device).item())
        return (high << 32) | low
    raise ValueError(
        f"generator must be a torch.Generator, numpy Generator, int or None, got {type(generator).__name__}"
    )


def _count(n: Any, name: str = "n (number of samples)") -> int:
    # >= 2**63 would be a pybind TypeError; the core bounds n * h * k (kMaxSampleValues).
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or not 0 <= n < 2**63:
        raise ValueError(f"{name} must be an integer in [0, 2**63), got {n!r}")
    return int(n)


def _samples(raw: tuple) -> DraftSamples:
    tokens, q, logprobs, log_z = raw
    return DraftSamples(tokens=tokens, q=q, logprobs=logprobs, log_z=float(log_z))


def sample_drafts(
    lattice: Lattice,
    lm: Any,
    n: int = 1,
    alpha: float = 1.0,
    context: Sequence[int] | np.ndarray | LmState = (),
    bos: bool = False,
    generator: Any = None,
    other_logprobs: Any = None,
) -> DraftSamples:
    """n drafts drawn exactly from ``P(d) ∝ exp(lattice(d) + alpha * ln p_LM(d | context))``.

    ``context``: token ids (``bos`` puts ``<s>`` before them) or the :class:`~draftlattice.LmState`
    of this LM after them (``bos`` False), as in :func:`draftlattice.rescore`: a decoder that keeps
    its committed text's state pays per step only for the tokens it accepted.

    ``other_logprobs`` [h] (natural log, ``-inf`` allowed) adds the "other" arc of each position
    (module docstring): ``q`` then has ``k + 1`` columns, the last one the other arc, and a
    drawn other arc shows as token ``-1``. :func:`sample_from_heads` builds on it."""
    other = None if other_logprobs is None else _other_array(other_logprobs)
    start = context if isinstance(context, LmState) else context_array(context)
    raw = _core.sample_drafts(core_lattice(lattice), lm, n, alpha, start, bool(bos), draw_seed(generator), other)
    return _samples(raw)


def _other_array(values: Any) -> np.ndarray:
    array = np.ascontiguousarray(to_numpy(values, "other_logprobs"), dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"other_logprobs must be 1-d [h], got shape {list(array.shape)}")
    return array


@dataclass(frozen=True)
class HeadDraftSamples:
    """n drafts from the rescored lattice of the heads' distributions (:func:`sample_from_heads`).

    Attributes:
        tokens: [n, h] int64 concrete draft tokens.
        q: [n, h, V] float64; ``q[i, t]`` is the exact law draft i's token t was drawn from, given
            its earlier tokens (zero exactly where the head is zero).
        lattice: the top-k lattice the LM rescored (``lattice.k`` may be below the requested k
            when a head has fewer non-zero tokens).
        arc_q: [n, h, k+1] the lattice-level conditionals (last column: the other arc; 0 when
            ``full_support`` is off).
    """

    tokens: np.ndarray
    q: np.ndarray
    lattice: Lattice
    arc_q: np.ndarray


def sample_from_heads(
    head_logprobs: Any,
    k: int,
    lm: Any,
    n: int = 1,
    alpha: float = 1.0,
    context: Sequence[int] | np.ndarray | LmState = (),
    bos: bool = False,
    generator: Any = None,
    full_support: bool = True,
) -> HeadDraftSamples:
    """n drafts from the rescored top-k lattice of ``head_logprobs``, with an "other" arc per
    position when ``full_support`` (the default; off: the proposal only has the top-k tokens).

    Args:
        head_logprobs: [h, V] natural-log head distributions (rows sum to 1 in probability;
            ``-inf`` for tokens a head excludes, e.g. after top-p).
        k: top-k candidates per head (capped at the smallest number of non-zero tokens of a head).
        lm, alpha, context, bos: as :func:`sample_drafts` (``context`` token ids or an LmState).
        generator: source of two seeds (the lattice walk, then the concrete "other" tokens).
        full_support: add the "other" arcs.
    Returns:
        HeadDraftSamples; the law of a draft is ``prod_t q[i, t, tokens[i, t]]``.
    """
    logp = np.asarray(to_numpy(head_logprobs, "head_logprobs"), dtype=np.float64)
    if logp.ndim != 2 or logp.shape[0] < 1 or logp.shape[1] < 1:
        raise ValueError(f"head_logprobs must be [h, V] with h, V >= 1, got shape {list(logp.shape)}")
    if np.isnan(logp).any() or (logp > 1e-6).any():
        raise ValueError("head_logprobs must be log-probabilities (<= 0, no NaN)")
    h, vocab = logp.shape
    support = int(np.isfinite(logp).sum(axis=1).min())
    if support < 1:
        raise ValueError("every head needs at least one token of non-zero probability")
    k = min(_count(k, "k"), support)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    order = _top_k(logp, k)
    top = np.take_along_axis(logp, order, axis=1)
    rest = np.exp(logp)  # becomes the head restricted outside the top-k, [h, V]
    np.put_along_axis(rest, order, 0.0, axis=1)
    mass = rest.sum(axis=1)  # outside the top-k: a sum of positive terms, no cancellation
    with np.errstate(divide="ignore", invalid="ignore"):
        other = np.log(mass)  # -inf if none
        rest /= mass[:, None]
    rest[mass <= 0] = 0.0
    lattice = Lattice.from_topk(order.astype(np.int32), top.astype(np.float32))
    if not full_support:
        other = np.full(h, -np.inf)  # an "other" arc of probability 0 changes nothing else
        rest[:] = 0.0
    drawn = sample_drafts(lattice, lm, n, alpha, context, bos, generator, other)
    rng = np.random.default_rng(draw_seed(generator))
    arc_q = drawn.q  # [n, h, k+1]
    q = arc_q[:, :, k : k + 1] * rest[None]  # [n, h, V]
    for t in range(h):
        q[:, t, lattice.tokens[t]] = arc_q[:, t, :k]
    tokens = drawn.tokens.astype(np.int64)
    for i, t in zip(*np.nonzero(tokens < 0)):
        tokens[i, t] = rng.choice(vocab, p=rest[t] / rest[t].sum())
    return HeadDraftSamples(tokens=tokens, q=q, lattice=lattice, arc_q=arc_q)


def _top_k(logp: np.ndarray, k: int) -> np.ndarray:
    """[h, k] ids of each row's k largest values, best first, ties by lower id (the order of a
    full stable sort, without sorting all V values)."""
    kth = -np.partition(-logp, k - 1, axis=1)[:, k - 1 : k]  # each row's k-th largest value
    out = np.empty((logp.shape[0], k), dtype=np.int64)
    for t, (row, bound) in enumerate(zip(logp, kth[:, 0])):
        above = np.flatnonzero(row > bound)
        ties = np.flatnonzero(row == bound)[: k - len(above)]  # lowest ids first
        ids = np.concatenate([above, ties])
        out[t] = ids[np.lexsort((ids, -row[ids]))]
    return out


def sample_drafts_batch(
    lattices: Any,
    lm: Any,
    contexts: Any = None,
    n: int = 1,
    alpha: float = 1.0,
    k: int | None = None,
    bos: bool = False,
    temperature: float = 1.0,
    generator: Any = None,
    num_threads: int | None = None,
    other_logprobs: Any = None,
) -> list[DraftSamples]:
    """:func:`sample_drafts` over B lattices in parallel; one seed per lattice is drawn from
    ``generator`` in order, so the result equals B single calls with those seeds.
    ``other_logprobs``: None or one [h] array per lattice (see :func:`sample_drafts`)."""
    built = as_lattices(lattices, k, temperature, num_threads)
    seeds = [draw_seed(generator) for _ in built]
    other = None if other_logprobs is None else [_other_array(o) for o in other_logprobs]
    raw = _core.sample_drafts_batch(
        [lat._core for lat in built],
        lm,
        n,
        alpha,
        contexts_list(contexts, len(built)),
        bool(bos),
        seeds,
        threads_arg(num_threads),
        other,
    )
    return [_samples(r) for r in raw]


def oracle_draft(lattice: Lattice, reference: Sequence[int] | np.ndarray) -> tuple[np.ndarray, int]:
    """The oracle draft: follows ``reference`` [h] while reference[t] is among head t's
    candidates, then takes top-1 candidates. Returns (tokens [h] int32, accepted length)."""
    tokens, accepted = oracle_drafts([lattice], to_numpy(reference, "reference")[None])
    return tokens[0], int(accepted[0])


def oracle_drafts(
    lattices: Any, references: Any, k: int | None = None, temperature: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Batched :func:`oracle_draft`: lattices (list, logits [B, h, V] with k, or top-k arrays)
    and references [B, h]. Returns (tokens [B, h] int32, accepted [B] int32)."""
    built = as_lattices(lattices, k, temperature, None)
    refs = int_array(references, "references", 2, "[B, h]")
    return _core.oracle_drafts([lat._core for lat in built], refs)
