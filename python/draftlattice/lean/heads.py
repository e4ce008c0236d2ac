"""Draft heads on the lean step's kernels: the residual heads of a
:class:`~draftlattice.hf.DraftHeads` with int4 weights (Q4_1's scheme) on the low-bit kernel.

Why: a drafted step runs the heads once (h - 1 small MLPs over one position); in PyTorch on the
step's single thread their nine matrix products cost ~2 ms, as much as a third of the target's
step. Here the heads' up and condition projections are one product over ``[z, e]`` for all heads
at once and their down projections one more, on our thread pool. The products read their weights
once for one row: 4 bits read half int8's bytes (~0.1 ms less a call for the default model's
heads) and left its demo's drafts as they were. Quantization changes the drafts a little, never
the output: the target verifies every draft.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import _core
from .lowbit import GROUP, LowbitLinear

BITS = 4  #: the heads' weights on our kernels (see the module's docstring)


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
        self.up = LowbitLinear(torch.cat(ups).float(), BITS, kernel)
        self.up_bias = torch.cat([b.up.bias for b in blocks]).detach().float()
        # All down projections in one product over all heads' rows: head i's state is block i of
        # row i. The other blocks are wasted work, cheaper than a kernel call per head (the
        # product is bound by reading the weights, read once for all rows either way).
        self.down = LowbitLinear(torch.cat([b.down.weight for b in blocks]).float(), BITS, kernel)
        self.down_bias = torch.stack([b.down.bias.detach().float() for b in blocks])  # [h-1, d]

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
        return [self.up, self.down]

    def __call__(self, z: Tensor, next_embeds: Tensor | None) -> Tensor:
        x = torch.cat([z, next_embeds.to(z.dtype)], dim=-1) if self.reads_next_token else z
        hidden = F.gelu(self.up(x).float() + self.up_bias).to(z.dtype)
        lead, c = z.shape[:-1], self.count
        blocks = self.down(hidden.view(*lead, c, self.hidden)).view(*lead, c, c, -1)  # [..., row, block, d]
        own = blocks.diagonal(dim1=-3, dim2=-2).transpose(-1, -2)  # [..., h-1, d]
        return (z.float().unsqueeze(-2) + own.float() + self.down_bias).to(z.dtype)


class HeadLogits:
    """``(z [..., d], next_ids [...]) -> float32 logits [..., h-1, V]`` of :class:`LeanHeads` in
    one C++ call (``_core.DraftHeadsStep``): the next tokens' embeddings, the heads' MLPs and the
    output rows they draft from (``rows``, for the tokens ``row_tokens``; None: the whole output
    layer), -inf outside them.

    Why: between two target steps each small PyTorch op runs 5-20x slower than hot (the step has
    flushed the caches), and the Python heads are ~20 of them around three products: 1.0-1.3 ms a
    call inside the decoding loop (bench/RESULTS.md, the target step's item 15). The same
    arithmetic as :class:`LeanHeads` then ``rows`` up to GELU's last bits (its erf as PyTorch's
    vectorized one, another exponential inside: a hidden unit may move by one bf16 unit in the
    last place); the heads only draft, so no decoding's output moves.
    """

    def __init__(
        self, lean: LeanHeads, embed: Tensor | None, rows: LowbitLinear, row_tokens: Tensor | None, vocab_size: int
    ) -> None:
        if lean.reads_next_token != (embed is not None):
            raise ValueError("heads that read the next token need its embedding table, and only they")
        self.count, self.hidden, self.vocab_size = lean.count, lean.down_bias.shape[1], vocab_size
        self.threads: int | None = None  #: the kernels' threads (None: torch.get_num_threads())
        self._step = _core.DraftHeadsStep(
            count=lean.count,
            hidden=self.hidden,
            width=lean.hidden,
            vocab=self.vocab_size,
            embedding=None if embed is None else embed.contiguous().view(torch.int16).numpy(),
            bits=BITS,
            up=(lean.up.codes, lean.up.scales, lean.up.mins),
            up_bias=lean.up_bias.contiguous().numpy(),
            down=(lean.down.codes, lean.down.scales, lean.down.mins),
            down_bias=lean.down_bias.contiguous().numpy(),
            rows_bits=rows.bits,
            rows=(rows.codes, rows.scales, rows.mins),
            rows_n=rows.out_features,
            row_tokens=None if row_tokens is None else row_tokens.to(torch.int64).contiguous().numpy(),
            kernel=rows.kernel,
        )

    def __call__(self, z: Tensor, next_ids: Tensor) -> Tensor:
        lead = z.shape[:-1]
        flat = z.reshape(-1, self.hidden).to(torch.bfloat16).contiguous()
        ids = next_ids.reshape(-1).to(torch.int64).contiguous()
        out = torch.empty(flat.shape[0], self.count, self.vocab_size, dtype=torch.float32)
        self._step.forward(
            flat.view(torch.int16).numpy(), ids.numpy(), out.numpy(), self.threads or torch.get_num_threads()
        )
        return out.view(*lead, self.count, self.vocab_size)
