"""The residual feed-forward head of blockwise heads 2..h (Stern et al. 2018).

Head j >= 2 maps the final hidden state z to z + W2 GELU(W1 z) and shares the output projection
with head 1. W2 and its bias start at zero, so every new head starts as head 1 and learns its
offset. :class:`~draftlattice.hf.DraftHeads` holds h - 1 of them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class ResidualHead(nn.Module):
    """z + W2 GELU(W1 z), z [..., width] -> [..., width].

    Args:
        width: d, the hidden size of the trunk.
        hidden: width of the head's one hidden layer.
    """

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.up = nn.Linear(width, hidden)
        self.down = nn.Linear(hidden, width)
        nn.init.zeros_(self.down.weight)  # starts as head 1; learns its offset
        nn.init.zeros_(self.down.bias)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return z + self.down(F.gelu(self.up(z)))
