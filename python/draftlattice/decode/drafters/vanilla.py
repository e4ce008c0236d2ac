"""Vanilla blockwise drafts (Stern et al. 2018): every head's own prediction, independently."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..sampling import SamplingConfig, sample_categorical
from .base import Drafts, check_head_logits


class VanillaDrafter:
    """Greedy: the argmax of each head (one draft). Sampling: each head's token drawn independently
    from the head's distribution under the target's sampling settings, q = that distribution."""

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
    ) -> Drafts:
        check_head_logits(head_logits)
        q = sampling.distribution(head_logits.float())  # [g, V]
        return Drafts(sample_categorical(q, generator)[None], q[None])
