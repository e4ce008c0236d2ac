"""Decoding statistics of :func:`draftlattice.hf.generate`, and the output object carrying them."""

from __future__ import annotations

from dataclasses import dataclass, field

from transformers.generation.utils import GenerateDecoderOnlyOutput


@dataclass
class DecodingStats:
    """What one ``generate`` call cost.

    Attributes:
        target_calls: serial forwards of the base model (the prompt's forward included).
        accepted: per verification call, the draft tokens accepted in each row still running
            (each call also yields the target's own next token, so a row gains ``a + 1``).
        new_tokens: tokens generated over all rows (EOS included, padding not).
        drafting_seconds: host time spent finishing drafts (LM rescoring or sampling of the
            transferred top-k lattices).
        verification_seconds: the rest of each step: the verification forward, acceptance, the
            heads' device work (top-k, p-best paths) and the one device->host transfer, cache
            compaction (on CUDA this includes the device work the transfer waits for).
    """

    target_calls: int = 0
    accepted: list[list[int]] = field(default_factory=list)
    new_tokens: int = 0
    drafting_seconds: float = 0.0
    verification_seconds: float = 0.0

    @property
    def row_calls(self) -> int:
        """Verification calls summed over the rows taking part in them."""
        return sum(len(a) for a in self.accepted)

    @property
    def mean_accepted(self) -> float:
        """Mean draft tokens accepted per row per verification call."""
        return sum(map(sum, self.accepted)) / self.row_calls if self.row_calls else 0.0

    @property
    def tokens_per_call(self) -> float:
        """Block efficiency: mean tokens a row gains per verification call (accepted + 1)."""
        return 1.0 + self.mean_accepted if self.row_calls else 0.0

    def summary(self) -> str:
        return (
            f"{self.new_tokens} tokens, {self.target_calls} target calls, "
            f"{self.tokens_per_call:.2f} tokens/call/row, drafting {self.drafting_seconds:.3f} s, "
            f"verification {self.verification_seconds:.3f} s"
        )


@dataclass
class DraftGenerateOutput(GenerateDecoderOnlyOutput):
    """transformers' ``GenerateDecoderOnlyOutput`` plus ``draft_stats`` (:class:`DecodingStats`).

    ``past_key_values`` is None: the cache holds masked holes where rows accepted fewer tokens
    than others, so it cannot be reused as an ordinary cache.
    """

    draft_stats: DecodingStats | None = None
