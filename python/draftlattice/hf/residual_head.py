"""The residual feed-forward head of blockwise heads 2..h (Stern et al. 2018).

Head j >= 2 maps the final hidden state z to z + W2 GELU(W1 z) and shares the output projection
with head 1. W2 and its bias start at zero, so every new head starts as head 1 and learns its
offset. :class:`~draftlattice.hf.DraftHeads` holds h - 1 of them.

A head may also read the embedding e of the token at t + 1 (``condition_width``): z + W2 GELU(W1 z
+ We e). That token is known when heads 2..h draft (the target chose it in the forward that gave
z), and the small head cannot compute the target's argmax from z itself, so naming it helps: on
the default model's held-out greedy output, top-1 accuracy of heads 2-4 rose from 0.371 / 0.186 /
0.117 to 0.429 / 0.224 / 0.128 after the same 400 training steps (bench/train_heads_speed.py
--next-token-steps, bench/RESULTS.md).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class ResidualHead(nn.Module):
    """z + W2 GELU(W1 z [+ We e]), z [..., width] -> [..., width].

    Args:
        width: d, the hidden size of the trunk.
        hidden: width of the head's one hidden layer.
        condition_width: width of the next token's embedding e the head also reads (None: it
            reads z alone).
    """

    def __init__(self, width: int, hidden: int, condition_width: int | None = None) -> None:
        super().__init__()
        self.up = nn.Linear(width, hidden)
        self.down = nn.Linear(hidden, width)
        nn.init.zeros_(self.down.weight)  # starts as head 1; learns its offset
        nn.init.zeros_(self.down.bias)
        self.condition = nn.Linear(condition_width, hidden, bias=False) if condition_width else None

    def forward(self, z: torch.Tensor, next_embeds: torch.Tensor | None = None) -> torch.Tensor:
        pre = self.up(z)
        if self.condition is not None:
            if next_embeds is None:
                raise ValueError("this head reads the next token: pass its embedding (next_embeds)")
            pre = pre + self.condition(next_embeds.to(pre.dtype))
        return z + self.down(F.gelu(pre))

    def widened(self, hidden: int) -> ResidualHead:
        """This head with a hidden layer of ``hidden`` >= its own units, computing the same function:
        the new units' input weights start as a fresh layer's, their output weights at zero (as a
        new head's), so training grows them from this head rather than from scratch. A copy, on
        this head's device and dtype."""
        old = self.up.out_features
        if isinstance(hidden, bool) or not isinstance(hidden, int) or hidden < old:
            raise ValueError(f"hidden must be an int >= {old} (this head's own width), got {hidden!r}")
        condition_width = self.condition.in_features if self.condition is not None else None
        param = self.up.weight
        out = ResidualHead(self.up.in_features, hidden, condition_width).to(device=param.device, dtype=param.dtype)
        with torch.no_grad():
            out.up.weight[:old].copy_(self.up.weight)
            out.up.bias[:old].copy_(self.up.bias)
            out.down.weight[:, :old].copy_(self.down.weight)  # the new columns stay zero
            out.down.bias.copy_(self.down.bias)
            if self.condition is not None:
                out.condition.weight[:old].copy_(self.condition.weight)
        return out.train(self.training)
