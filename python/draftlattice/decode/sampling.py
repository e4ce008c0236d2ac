"""Sampling settings of the target and the draft distributions q handed to the verifier.

In sampling mode the decoder is lossless: every output sequence has exactly the probability the
target gives it under the settings below (temperature, then top-k, then top-p applied to head 1's
logits, via ``draftlattice.verify.sampling_distribution``). Drafters may propose from any
distribution q as long as they report q exactly; the verifier corrects for the difference.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..verify import sampling_distribution


@dataclass(frozen=True)
class SamplingConfig:
    """How the target samples each token.

    Attributes:
        temperature: > 0; logits are divided by it.
        top_k: keep the k most likely tokens (0 = all).
        top_p: keep the smallest set of most likely tokens with total probability >= top_p (1.0 = all).
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 = no limit), got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")

    def distribution(self, logits: torch.Tensor) -> torch.Tensor:
        """Probabilities [..., V] (float32, rows sum to 1) from logits [..., V] under these settings."""
        return sampling_distribution(logits, self.temperature, self.top_k, self.top_p)


def scatter_candidates(candidates: torch.Tensor, probs: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Full-vocabulary q [..., V] from a distribution over candidate tokens.

    Args:
        candidates: [..., k] token ids (distinct along the last axis).
        probs: [..., k] probabilities of the candidates (sum to 1 along the last axis).
        vocab_size: V.
    Returns:
        [..., V] float32 on the candidates' device, zero outside the candidates.
    """
    q = torch.zeros(*candidates.shape[:-1], vocab_size, dtype=torch.float32, device=candidates.device)
    return q.scatter_(-1, candidates.long(), probs.to(q))


def sample_categorical(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One draw per row of probs [..., n] (int64 [...])."""
    flat = probs.reshape(-1, probs.shape[-1])
    return torch.multinomial(flat, 1, generator=generator).reshape(probs.shape[:-1])
