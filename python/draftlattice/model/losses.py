"""Blockwise training objective and evaluation metrics over windows of a token stream."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def blockwise_targets(window: torch.Tensor, num_heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Split windows [B, L + h] into inputs [B, L] and targets [B, L, h] (head j: token t + j + 1)."""
    L = window.shape[1] - num_heads
    inputs = window[:, :L]
    targets = torch.stack([window[:, j + 1 : j + 1 + L] for j in range(num_heads)], dim=2)
    return inputs, targets


def blockwise_loss(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum over heads of mean cross-entropy (nats). logits [B, L, h, V], targets [B, L, h].

    Returns (total, per-head [h]).
    """
    V = logits.shape[-1]
    per_token = F.cross_entropy(logits.float().reshape(-1, V), targets.reshape(-1), reduction="none")
    per_head = per_token.view(targets.shape).mean(dim=(0, 1))
    return per_head.sum(), per_head


def sampled_blockwise_loss(
    model, inputs: torch.Tensor, targets: torch.Tensor, head_fraction: float, generator: torch.Generator | None = None
):
    """Blockwise loss with heads 2..h scored on a random ``head_fraction`` of the positions.

    Head 1 is scored everywhere. Subsampling keeps each head's mean cross-entropy an unbiased
    estimate while cutting the h x V output projection, the dominant cost of a small model
    (about 2x faster on CPU at fraction 0.25). Returns (total, per-head [h]) as ``blockwise_loss``.
    """
    h = model.config.num_heads
    z = model.trunk(inputs)  # [B, L, d]
    embedding = model.embed.weight
    first = F.cross_entropy((z @ embedding.t()).float().flatten(0, 1), targets[:, :, 0].flatten())
    losses = [first]
    if h > 1:
        flat_z, flat_t = z.flatten(0, 1), targets.flatten(0, 1)  # [B*L, d], [B*L, h]
        n = flat_z.shape[0]
        keep = max(1, int(round(head_fraction * n)))
        index = (
            torch.randperm(n, generator=generator)[:keep].to(z.device) if keep < n else torch.arange(n, device=z.device)
        )
        zs, ts = flat_z[index], flat_t[index]
        for j, head in enumerate(model.heads, start=1):
            losses.append(F.cross_entropy((head(zs) @ embedding.t()).float(), ts[:, j]))
    per_head = torch.stack(losses)
    return per_head.sum(), per_head


@torch.inference_mode()
def evaluate_windows(model, windows: torch.Tensor, batch_size: int = 16, device="cpu", progress=None) -> dict:
    """Per-head top-1 accuracy and cross-entropy, head-1 perplexity, over windows [N, L + h].

    Every input position of every window is scored (the first positions of a window see a short
    context, as in non-overlapping evaluation).
    """
    h = model.config.num_heads
    nll = torch.zeros(h, dtype=torch.float64)
    correct = torch.zeros(h, dtype=torch.float64)
    count = 0
    model.eval()
    batches = range(0, windows.shape[0], batch_size)
    for start in progress(batches) if progress else batches:
        window = windows[start : start + batch_size].to(device)
        inputs, targets = blockwise_targets(window, h)
        logits = model(inputs).logits.float()
        V = logits.shape[-1]
        ce = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), reduction="none").view(targets.shape)
        nll += ce.sum(dim=(0, 1)).double().cpu()
        correct += (logits.argmax(-1) == targets).sum(dim=(0, 1)).double().cpu()
        count += targets.shape[0] * targets.shape[1]
    per_head_ce = (nll / count).tolist()
    return {
        "tokens": count,
        "head_ce": per_head_ce,
        "head_accuracy": (correct / count).tolist(),
        "perplexity": math.exp(per_head_ce[0]),
    }
