"""Draft heads on the lean step's kernels: the residual heads of a
:class:`~draftlattice.hf.DraftHeads` with int8 weights (Q8_0's scheme) on the low-bit kernel.

Why: a drafted step runs the heads once (h - 1 small MLPs over one position); in PyTorch on the
step's single thread their nine matrix products cost ~2 ms, as much as a third of the target's
step. Here the heads' up and condition projections are one product over ``[z, e]`` for all heads
at once and each down projection one more, on our thread pool. Int8 changes the drafts a little,
never the output: the target verifies every draft.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .lowbit import GROUP, LowbitLinear


class LeanHeads:
    """``(z [..., d], e [..., d_e] | None) -> states [..., h-1, d]`` as ``DraftHeads.forward``."""

    def __init__(self, heads, kernel: str) -> None:
        blocks = list(heads.heads)
        self.count, self.hidden = len(blocks), blocks[0].up.out_features
        self.reads_next_token = blocks[0].condition is not None
        ups = [
            torch.cat([b.up.weight, b.condition.weight], dim=1) if self.reads_next_token else b.up.weight
            for b in blocks
        ]
        self.up = LowbitLinear(torch.cat(ups).float(), 8, kernel)
        self.up_bias = torch.cat([b.up.bias for b in blocks]).detach().float()
        self.downs = [LowbitLinear(b.down.weight.float(), 8, kernel) for b in blocks]
        self.down_biases = [b.down.bias.detach().float() for b in blocks]

    @staticmethod
    def fits(heads) -> bool:
        """Whether ``heads`` are residual heads whose widths the kernel takes (multiples of 32)."""
        blocks = list(getattr(heads, "heads", []))
        if not blocks or not all(hasattr(b, "up") and hasattr(b, "down") for b in blocks):
            return False
        widths = [blocks[0].up.in_features, blocks[0].down.in_features]
        if blocks[0].condition is not None:
            widths.append(blocks[0].condition.in_features)
        return all(w % GROUP == 0 for w in widths)

    @property
    def layers(self) -> list[LowbitLinear]:
        return [self.up, *self.downs]

    def __call__(self, z: Tensor, next_embeds: Tensor | None) -> Tensor:
        x = torch.cat([z, next_embeds.to(z.dtype)], dim=-1) if self.reads_next_token else z
        pre = self.up(x).float() + self.up_bias
        hidden = F.gelu(pre).to(z.dtype)
        states = [
            z.float() + down(hidden[..., i * self.hidden : (i + 1) * self.hidden]).float() + bias
            for i, (down, bias) in enumerate(zip(self.downs, self.down_biases))
        ]
        return torch.stack(states, dim=-2).to(z.dtype)
