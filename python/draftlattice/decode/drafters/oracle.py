"""Oracle drafts: the best path through the top-k lattice given the target's true continuation.

A reference upper bound for lattice drafters, not a drafter one can deploy: it needs the target's
greedy output, computed beforehand. At each step the draft follows the reference for as long as
the reference token is among its head's top-k, then takes top-1 candidates
(:func:`draftlattice.oracle_draft`, C++ core); that path has the longest accepted prefix any
draft from the top-k lattice can have.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ...lattice import Lattice
from ...sample import oracle_draft
from .base import Proposal, SampledDrafts, Sampling, topk_lattice


class OracleDrafter:
    """Best top-k lattice path against known references (greedy decoding only).

    Args:
        references: per batch row, the prompt (without padding) + the target's greedy output.
        k: candidates per head (>= 1).
    """

    name = "oracle"
    p = 1
    sample_rules: tuple[str, ...] = ()  # greedy decoding only

    def __init__(self, references: list[list[int]], k: int = 4) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        self.references = [list(map(int, r)) for r in references]
        self.k = k

    def propose(self, head_logits: Tensor, sampling: Sampling | None, draws: int) -> Proposal:
        if sampling is not None:
            raise ValueError("the oracle drafter needs a known greedy reference; it has no sampling mode")
        if head_logits.shape[0] != len(self.references):
            raise ValueError(f"the oracle has {len(self.references)} references for a batch of {head_logits.shape[0]}")
        return Proposal(list(topk_lattice(head_logits, min(self.k, head_logits.shape[-1]))))

    def finish(
        self, proposal: Proposal, host: list[Tensor], contexts: list[list[int]], device: torch.device
    ) -> tuple[Tensor, SampledDrafts | None]:
        ids, logprobs = host[0].numpy(), host[1].numpy()
        drafts = []
        for b, context in enumerate(contexts):
            n, g = len(context), ids.shape[1]
            if context != self.references[b][:n]:
                raise ValueError(
                    f"row {b}: the oracle's reference does not continue this context "
                    "(it needs the target's greedy output)"
                )
            lattice = Lattice.from_topk(ids[b].astype(np.int32), logprobs[b].astype(np.float32))
            reference = self.references[b][n : n + g]
            reference += lattice.tokens[len(reference) :, 0].tolist()  # past the reference: top-1
            tokens, _ = oracle_draft(lattice, np.asarray(reference, dtype=np.int32))
            drafts.append(tokens.astype(np.int64))
        return torch.from_numpy(np.stack(drafts))[:, None], None
