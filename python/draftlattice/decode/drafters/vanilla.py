"""Vanilla blockwise drafts (Stern et al. 2018): every head's own prediction, independently."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..sampling import SamplingConfig, draw_distinct, sample_categorical
from .base import Drafts, check_head_logits


class VanillaDrafter:
    """Greedy: the argmax of each head (one draft). Sampling: each head's token drawn independently
    from the head's distribution under the target's sampling settings (repetition penalty over
    the committed context), q = that distribution; n drafts are n independent draws."""

    name = "vanilla"
    num_drafts = 1

    def propose(self, head_logits: torch.Tensor, context: Sequence[int]) -> Drafts:
        check_head_logits(head_logits)
        return Drafts(head_logits.argmax(-1)[None])

    def sample(
        self,
        head_logits: torch.Tensor,
        context: Sequence[int],
        sampling: SamplingConfig,
        generator: torch.Generator | None,
        n: int = 1,
        distinct_first: bool = False,
    ) -> Drafts:
        """n drafts; with ``distinct_first``, min(n, support) drafts whose first tokens are drawn
        without replacement from head 2's law (q[:, 0] is that law, before any removal)."""
        check_head_logits(head_logits)
        seen = sampling.seen(context, head_logits.shape[1], device=head_logits.device)
        law = sampling.distribution(head_logits.float(), seen)  # [g, V]
        firsts = draw_distinct(law[0], n, generator) if distinct_first else None
        q = law.expand(n if firsts is None else len(firsts), *law.shape)  # [n, g, V]
        tokens = sample_categorical(q, generator)
        if firsts is not None:
            tokens[:, 0] = firsts
        return Drafts(tokens, q)
