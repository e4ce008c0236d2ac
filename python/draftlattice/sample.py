"""Exact sampling of drafts from a rescored lattice, and oracle drafts.

Sampling target: ``P(d) = exp(total(d)) / Z`` with ``total(d) = lattice log-prob of d + alpha *
ln p_LM(d | context)`` (the score of :func:`draftlattice.rescore`). The C++ core builds the whole
composed lattice, runs a backward (log-sum-exp) pass and samples left to right, returning for
every position the exact conditional distribution ``q`` over that head's k candidates given the
sampled prefix (columns aligned with :attr:`Lattice.tokens`), so a verifier can scatter it over
the vocabulary: ``prod_t q[t, rank_t] = P(d)``.

Randomness: one uint64 seed per lattice, drawn from the caller's ``torch.Generator`` or
``numpy.random.Generator`` (or given as an int), expanded by splitmix64 in the core; results are
identical across platforms and thread counts.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from . import _core
from ._arrays import context_array, int_array, to_numpy
from .lattice import Lattice
from .rescore import as_lattices, check_alpha, check_lm, contexts_list, core_lattice, threads_arg


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
    raise ValueError(f"generator must be a torch.Generator, numpy Generator, int or None, got "
                     f"{type(generator).__name__}")


def _count(n: Any) -> int:
    # >= 2**63 would be a pybind TypeError; the core bounds n * h * k (kMaxSampleValues).
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or not 0 <= n < 2**63:
        raise ValueError(f"n (number of samples) must be an integer in [0, 2**63), got {n!r}")
    return int(n)


def _samples(raw: tuple) -> DraftSamples:
    tokens, q, logprobs, log_z = raw
    return DraftSamples(tokens=tokens, q=q, logprobs=logprobs, log_z=float(log_z))


def sample_drafts(lattice: Lattice, lm: Any, n: int = 1, alpha: float = 1.0,
                  context: Sequence[int] | np.ndarray = (), bos: bool = False,
                  generator: Any = None) -> DraftSamples:
    """n drafts drawn exactly from ``P(d) ∝ exp(lattice(d) + alpha * ln p_LM(d | context))``."""
    raw = _core.sample_drafts(core_lattice(lattice), check_lm(lm), _count(n), check_alpha(alpha),
                              context_array(context), bool(bos), draw_seed(generator))
    return _samples(raw)


def sample_drafts_batch(lattices: Any, lm: Any, contexts: Any = None, n: int = 1,
                        alpha: float = 1.0, k: int | None = None, bos: bool = False,
                        temperature: float = 1.0, generator: Any = None,
                        num_threads: int | None = None) -> list[DraftSamples]:
    """:func:`sample_drafts` over B lattices in parallel; one seed per lattice is drawn from
    ``generator`` in order, so the result equals B single calls with those seeds."""
    built = as_lattices(lattices, k, temperature, num_threads)
    seeds = [draw_seed(generator) for _ in built]
    raw = _core.sample_drafts_batch([lat._core for lat in built], check_lm(lm), _count(n),
                                    check_alpha(alpha), contexts_list(contexts, len(built)),
                                    bool(bos), seeds, threads_arg(num_threads))
    return [_samples(r) for r in raw]


def oracle_draft(lattice: Lattice, reference: Sequence[int] | np.ndarray) -> tuple[np.ndarray, int]:
    """The oracle draft: follows ``reference`` [h] while reference[t] is among head t's
    candidates, then takes top-1 candidates. Returns (tokens [h] int32, accepted length)."""
    tokens, accepted = oracle_drafts([lattice], to_numpy(reference, "reference")[None])
    return tokens[0], int(accepted[0])


def oracle_drafts(lattices: Any, references: Any, k: int | None = None,
                  temperature: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Batched :func:`oracle_draft`: lattices (list, logits [B, h, V] with k, or top-k arrays)
    and references [B, h]. Returns (tokens [B, h] int32, accepted [B] int32)."""
    built = as_lattices(lattices, k, temperature, None)
    refs = int_array(references, "references", 2, "[B, h]")
    return _core.oracle_drafts([lat._core for lat in built], refs)
