"""Top-k lattices of h prediction heads (the drafts' search space).

A lattice has ``h`` positions (one per head) and ``k`` candidate tokens per position; a draft
picks one candidate per position, so a lattice holds ``k**h`` drafts. Candidates of a head are
stored best first: by log-probability descending, ties broken by the lower token id. The column
of a candidate is its *rank*; the tie rule of :func:`draftlattice.rescore` uses it.

The C++ core validates the arguments (see csrc/lattice.h); this module converts torch tensors to
numpy and documents the API.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _core
from ._arrays import tokens_in


class Lattice:
    """A top-k sausage lattice: ``tokens`` [h, k] int32 and ``logprobs`` [h, k] float32 (natural log).

    Build one with :meth:`from_logits` or :meth:`from_topk`.
    """

    __slots__ = ("_core",)

    def __init__(self, core: _core.Lattice) -> None:
        if not isinstance(core, _core.Lattice):
            raise TypeError("use Lattice.from_logits or Lattice.from_topk to build a Lattice")
        self._core = core

    @classmethod
    def from_logits(cls, logits: Any, k: int, temperature: float = 1.0) -> Lattice:
        """Top-k of each head's logits with exact log-softmax scores.

        Args:
            logits: [h, V] float16/float32/float64 (numpy array or torch tensor), finite.
            k: candidates per head, 1 <= k <= V.
            temperature: logits are divided by it before the softmax; > 0.

        Returns:
            A lattice whose ``logprobs`` are ``log_softmax(logits / temperature)`` (natural log,
            over the full vocabulary) of the k best tokens (ties: lower token id first).

        Raises:
            TypeError: k not an integer, temperature not a number.
            ValueError: wrong rank or dtype, h = 0, NaN/inf logits (or float64 ones beyond float32's
                range: the core computes in float32), k < 1, k > V, temperature <= 0.
        """
        return cls(_core.Lattice.from_logits(_logits_in(logits), k, temperature))

    @classmethod
    def batch_from_logits(
        cls, logits: Any, k: int, temperature: float = 1.0, num_threads: int | None = None
    ) -> list[Lattice]:
        """One lattice per sequence of ``logits`` [B, h, V] (see :meth:`from_logits`), in parallel."""
        cores = _core.Lattice.from_logits_batch(_logits_in(logits), k, temperature, num_threads)
        return [cls(core) for core in cores]

    @classmethod
    def from_topk(cls, tokens: Any, logprobs: Any, vocab_size: int | None = None) -> Lattice:
        """A lattice from precomputed top-k candidates.

        Args:
            tokens: [h, k] integer token ids, distinct within each head, >= 0 (and < vocab_size).
            logprobs: [h, k] finite natural-log probabilities, <= 0.
            vocab_size: when given, token ids >= vocab_size are rejected as unknown.

        The candidates of each head are re-sorted best first (see the module docstring).

        Raises:
            ValueError: shape mismatch, h = 0 or k = 0, negative/unknown/duplicate token ids,
                non-finite or positive log-probabilities.
        """
        return cls(_core.Lattice.from_topk(tokens_in(tokens), tokens_in(logprobs), vocab_size))

    @property
    def tokens(self) -> np.ndarray:
        """[h, k] int32 candidate token ids, best first within each head."""
        return self._core.tokens

    @property
    def logprobs(self) -> np.ndarray:
        """[h, k] float32 natural-log probabilities of the candidates."""
        return self._core.logprobs

    @property
    def h(self) -> int:
        """Number of heads (draft length)."""
        return self._core.h

    @property
    def k(self) -> int:
        """Candidates per head."""
        return self._core.k

    def to_fst_text(self) -> str:
        """OpenFST AT&T text of the lattice as an acceptor-like transducer.

        States 0..h; from state t to t+1 one arc per candidate with input = output label
        ``token + 1`` (label 0 is OpenFST's epsilon, so token ids are shifted by one) and weight
        ``-logprob`` (tropical semiring); state h is final with weight 0. Compile with
        ``fstcompile`` (no symbol tables needed).
        """
        return self._core.to_fst_text()

    def to_dot(self, words: Sequence[str] | None = None) -> str:
        """Graphviz DOT text; arcs read ``word (logprob)`` when ``words[token]`` is given."""
        return self._core.to_dot(list(words) if words is not None else [])

    def __repr__(self) -> str:
        return f"Lattice(h={self.h}, k={self.k})"


def _logits_in(logits: Any) -> Any:
    """Logits as the bindings take them (float32): float64 values beyond float32's range would
    become inf in the cast, so they are refused here with their value."""
    values = tokens_in(logits)
    if isinstance(values, np.ndarray) and values.dtype == np.float64 and values.size:
        finite = np.abs(values[np.isfinite(values)])  # inf and NaN: the core names their place
        largest = float(finite.max()) if finite.size else 0.0
        if largest > float(np.finfo(np.float32).max):
            raise ValueError(
                f"logits must fit float32 (the core computes in float32), got a value of magnitude {largest:g}"
            )
    return values
