"""What every drafter provides: drafts for the next block from the heads' logits.

The decoder asks for drafts of the g tokens that follow the known next token. Head 1's logits are
not passed: in greedy mode its argmax is the target's own next token, and in sampling mode that
token is drawn from the target (or by the verifier), so it is decided before drafting and
already appended to ``context``. Heads 2..g+1 at the current position predict the draft
positions 1..g, so ``head_logits[i]`` is head i+2's output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from ..sampling import SamplingConfig


@dataclass(frozen=True)
class Drafts:
    """Drafts for one decoding step.

    Drafters return them on the head logits' device, or on the host when they are computed by the
    C++ core; the decoder moves them to the target's device.

    Attributes:
        tokens: [p, g] int64 draft token ids, best first (greedy mode) or one sampled draft (p = 1).
        q: [p, g, V] float32 in sampling mode: q[r, i] is the distribution draft token i of row r
            was drawn from, given the row's earlier tokens; None in greedy mode.
    """

    tokens: torch.Tensor
    q: torch.Tensor | None = None


class Drafter(Protocol):
    """Common interface of the drafters (vanilla, n-gram lattice, neural, oracle)."""

    name: str
    num_drafts: int  # p, drafts per step (greedy, "tree-sample" and "multi" sampling verifiers)

    def propose(self, head_logits: torch.Tensor, context: Sequence[int]) -> Drafts:
        """Greedy drafts.

        Args:
            head_logits: [g, V] logits of heads 2..g+1 at the position of the last context token.
            context: all tokens so far (prompt, generated, and the known next token), model ids.
        Returns:
            Drafts with tokens [p', g], 1 <= p' <= num_drafts, rows distinct.
        """
        ...

    def sample(
        self,
        head_logits: torch.Tensor,
        context: Sequence[int],
        sampling: SamplingConfig,
        generator: torch.Generator | None,
        n: int = 1,
    ) -> Drafts:
        """n independent sampled drafts with their exact conditional distributions (tokens [n, g],
        q [n, g, V]); drafters that only sample one draft raise ValueError for n > 1."""
        ...


def check_head_logits(head_logits: torch.Tensor) -> None:
    """Raises ValueError unless head_logits is a float [g, V] tensor."""
    if not isinstance(head_logits, torch.Tensor) or head_logits.dim() != 2:
        raise ValueError(f"head_logits must be a [g, V] tensor, got {getattr(head_logits, 'shape', head_logits)}")
    if not head_logits.is_floating_point():
        raise ValueError(f"head_logits must be floating point, got {head_logits.dtype}")


def empty_drafts(vocab_size: int, sampling: bool, device: torch.device) -> Drafts:
    """Drafts of length 0 on ``device`` (used when only the known next token is left to generate)."""
    q = torch.zeros(1, 0, vocab_size, device=device) if sampling else None
    return Drafts(torch.zeros(1, 0, dtype=torch.int64, device=device), q)
