"""Sampling settings of the target and the draft distributions q handed to the verifier.

In sampling mode the decoder is lossless: every output sequence has exactly the probability the
target gives it under the settings below (repetition penalty over the tokens so far, then
temperature, top-k and top-p applied to head 1's logits, in Hugging Face's order, via
``draftlattice.verify.sampling_distribution``). Drafters may propose from any distribution q as
long as they report q exactly; the verifier corrects for the difference. The drafters shape their
proposals with the same settings (:meth:`SamplingConfig.distribution` on the heads' logits, the
repetition penalty over the committed context), so that q resembles the target's law.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..verify._common import draw_categorical, sampling_distribution


@dataclass(frozen=True)
class SamplingConfig:
    """How the target samples each token.

    Attributes:
        temperature: > 0; logits are divided by it.
        top_k: keep the k most likely tokens (0 = all).
        top_p: keep the smallest set of most likely tokens with total probability >= top_p (1.0 = all).
        repetition_penalty: > 0; the logit l of every token already in the text becomes l / penalty
            if l > 0 else l * penalty (Keskar et al. 2019, Hugging Face's
            ``RepetitionPenaltyLogitsProcessor``), before the temperature; 1.0 = off.
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    repetition_penalty: float = 1.0

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 = no limit), got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if not self.repetition_penalty > 0:
            raise ValueError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")

    def seen(
        self,
        context: Sequence[int],
        vocab_size: int,
        drafts: torch.Tensor | None = None,
        device: torch.device | str | None = None,
    ) -> torch.Tensor | None:
        """:func:`seen_tokens` when the repetition penalty needs it, else None (saves the
        [p, g+1, V] masks of every step)."""
        if self.repetition_penalty == 1.0:
            return None
        return seen_tokens(context, vocab_size, drafts, device)

    def distribution(self, logits: torch.Tensor, seen: torch.Tensor | None = None) -> torch.Tensor:
        """Probabilities [..., V] (float32 or wider, rows sum to 1) from logits [..., V].

        ``seen``: bool [..., V] broadcastable to ``logits``, the tokens already in the text at each
        row (see :func:`seen_tokens`); needed when ``repetition_penalty != 1``.
        """
        if self.repetition_penalty != 1.0:
            if seen is None:
                raise ValueError("repetition_penalty != 1 needs the tokens seen so far (seen=...)")
            logits = penalize_repetitions(logits, seen, self.repetition_penalty)
        return sampling_distribution(logits, self.temperature, self.top_k, self.top_p)


def penalize_repetitions(logits: torch.Tensor, seen: torch.Tensor, penalty: float) -> torch.Tensor:
    """``l / penalty`` (``l > 0``) or ``l * penalty`` (``l <= 0``) where ``seen``, ``l`` elsewhere."""
    x = logits.float() if not logits.is_floating_point() else logits
    scaled = torch.where(x > 0, x / penalty, x * penalty)
    return torch.where(seen.to(x.device), scaled, x)


def seen_tokens(
    context: Sequence[int],
    vocab_size: int,
    drafts: torch.Tensor | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Bool masks of the tokens already in the text, on ``device`` (default: ``drafts``' device,
    else the host).

    Without ``drafts``: [V], the tokens of ``context``. With ``drafts [p, g]``: [p, g+1, V], row
    i position j = ``context`` plus draft i's first j tokens (the text the target's law after
    that prefix conditions on).
    """
    if device is None:
        device = drafts.device if drafts is not None else torch.device("cpu")
    base = torch.zeros(vocab_size, dtype=torch.bool, device=device)
    if len(context):
        base[torch.tensor(list(context), dtype=torch.int64, device=device)] = True
    if drafts is None:
        return base
    p, g = drafts.shape
    grown = torch.zeros(p, g + 1, vocab_size, dtype=torch.bool, device=device)
    if g:
        grown[:, 1:].scatter_(-1, drafts.to(device=device, dtype=torch.int64).unsqueeze(-1), True)
        grown = grown.to(torch.int8).cumsum(1).bool()
    return grown | base


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
    return draw_categorical(probs, generator)


def draw_distinct(probs: torch.Tensor, n: int, generator: torch.Generator | None) -> torch.Tensor:
    """min(n, support) distinct draws from probs [V], without replacement: each from probs with
    the earlier draws removed and the rest renormalised (int64 [m], in draw order)."""
    m = min(n, int((probs > 0).sum()))
    device = probs.device if generator is None else generator.device  # host laws, CUDA generators
    return torch.multinomial(probs.double().to(device), m, replacement=False, generator=generator).to(probs.device)
