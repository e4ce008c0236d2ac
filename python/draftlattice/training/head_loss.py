"""Cross-entropy through a frozen output layer without materialising [N, V] logits.

A draft head's loss is ``CE(softmax(W h), y)`` with the model's output layer ``W [V, d]`` (frozen,
V = 49,152 for the default model). Computing all logits of a batch in fp32 and keeping them for
the backward costs N x V x 4 bytes and most of a training step. :class:`ChunkedLinearCE` walks N
in chunks: each chunk's logits are computed in W's dtype (bf16 on AMX or a GPU), the softmax in
fp32, and the gradient with respect to ``h`` is formed right away (``(softmax - onehot) W``) and
kept ([N, d]); nothing of size V outlives a chunk. W gets no gradient.
"""

from __future__ import annotations

import torch
from torch import Tensor


class ChunkedLinearCE(torch.autograd.Function):
    """Mean CE of ``h [N, d] @ weight.T`` against ``targets [N]``; ``stats`` gets top-k hits."""

    @staticmethod
    def forward(ctx, h: Tensor, weight: Tensor, targets: Tensor, chunk: int, ks: tuple[int, ...], stats: list):
        n = h.shape[0]
        grad = torch.empty(h.shape, dtype=torch.float32, device=h.device)
        total = torch.zeros((), dtype=torch.float32, device=h.device)
        hits = torch.zeros(len(ks), dtype=torch.float32, device=h.device)
        w = weight.detach()
        for start in range(0, n, chunk):
            hc = h[start : start + chunk].detach().to(w.dtype)
            yc = targets[start : start + chunk]
            logits = (hc @ w.T).float()
            lse = torch.logsumexp(logits, dim=-1)
            gold = logits.gather(1, yc[:, None]).squeeze(1)
            total += (lse - gold).sum()
            if ks:
                rank = (logits > gold[:, None]).sum(dim=1)  # tokens strictly above the gold one
                hits += torch.stack([(rank < k).sum() for k in ks]).float()
            probs = torch.exp(logits - lse[:, None])
            probs.scatter_add_(1, yc[:, None], -torch.ones_like(gold)[:, None])
            grad[start : start + chunk] = (probs.to(w.dtype) @ w).float()
        ctx.save_for_backward(grad / max(n, 1))
        ctx.input_dtype = h.dtype
        stats.append(hits.cpu() / max(n, 1))
        return total / max(n, 1)

    @staticmethod
    def backward(ctx, grad_output: Tensor):
        (grad,) = ctx.saved_tensors
        return (grad * grad_output).to(ctx.input_dtype), None, None, None, None, None


def chunked_linear_ce(
    h: Tensor, weight: Tensor, targets: Tensor, chunk: int = 1024, ks: tuple[int, ...] = (1,)
) -> tuple[Tensor, list[float]]:
    """``(mean CE, [top-k accuracy for k in ks])`` of logits ``h @ weight.T`` (see module doc)."""
    if h.ndim != 2 or targets.shape != h.shape[:1]:
        raise ValueError(f"h must be [N, d] and targets [N]; got {tuple(h.shape)} and {tuple(targets.shape)}")
    stats: list = []
    loss = ChunkedLinearCE.apply(h, weight, targets, chunk, tuple(ks), stats)
    return loss, [float(v) for v in stats[0]]
