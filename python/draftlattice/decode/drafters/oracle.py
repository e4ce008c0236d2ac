"""Oracle drafts: the best path through the top-k lattice given the target's true continuation.

A reference upper bound for lattice drafters, not a decoder one can deploy: it needs the target's
greedy output, computed beforehand (e.g. by ``greedy_decode``). At each step the draft follows the
reference for as long as the reference token is among its head's top-k, then takes top-1
candidates (``draftlattice.oracle_draft``, C++ core); that path has the longest accepted prefix
any draft from the top-k lattice can have.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ...lattice import Lattice
from ...sample import oracle_draft
from .base import Drafts, check_head_logits


class OracleDrafter:
    """Best top-k lattice path against a known reference sequence (greedy mode only).

    Args:
        reference: prompt + the target's greedy continuation (model token ids).
        k: candidates per head (>= 1).
    """

    name = "oracle"
    num_drafts = 1

    def __init__(self, reference: Sequence[int], k: int = 4) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.reference = list(reference)
        self.k = k

    def propose(self, head_logits: torch.Tensor, context: Sequence[int]) -> Drafts:
        check_head_logits(head_logits)
        n, g = len(context), head_logits.shape[0]
        if list(context) != self.reference[:n]:
            raise ValueError(
                "the oracle's reference does not continue this context (it needs the target's greedy output)"
            )
        logits = head_logits.detach().float().cpu().numpy()
        lattice = Lattice.from_logits(logits, min(self.k, logits.shape[1]))
        reference = self.reference[n : n + g]
        reference += lattice.tokens[len(reference) :, 0].tolist()  # past the reference: top-1
        tokens, _ = oracle_draft(lattice, np.asarray(reference, dtype=np.int32))
        return Drafts(torch.from_numpy(tokens.astype(np.int64))[None])

    def sample(self, head_logits, context, sampling, generator) -> Drafts:
        raise ValueError("the oracle drafter needs a known greedy reference; it has no sampling mode")
