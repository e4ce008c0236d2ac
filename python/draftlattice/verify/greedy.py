"""Greedy verification of several drafts (Stern et al. 2018; Kim et al. 2024)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from ._common import _as_lengths

__all__ = ["GreedyResult", "greedy_accept", "target_tokens"]


class GreedyResult(NamedTuple):
    """Result of :func:`greedy_accept` (unpacks as ``best_draft, num_accepted, next_token``)."""

    best_draft: Tensor  #: [B] int64, index of the chosen draft
    num_accepted: Tensor  #: [B] int64, accepted draft tokens (0..h)
    next_token: Tensor  #: [B] int64, the target's greedy token after them


def target_tokens(target: Tensor) -> Tensor:
    """Greedy tokens from logits ``[..., V]`` (first argmax on ties), or int tokens unchanged."""
    if not target.is_floating_point():
        return target.to(torch.int64)
    if target.device.type == "cpu" and target.dtype in (torch.float32, torch.float64):
        # NumPy's argmax is vectorised, PyTorch's CPU one is not: ~20x faster over a step's scores
        # (12 nodes x 49,152 float32: 50 us, not 1 ms). Same first maximum, and a NaN counts as
        # the maximum in both.
        return torch.from_numpy(np.asarray(target.detach().numpy().argmax(-1), dtype=np.int64))
    return target.argmax(-1)


def greedy_accept(drafts: Tensor, target_logits: Tensor, lengths: Tensor | int | None = None) -> GreedyResult:
    """Greedy acceptance of the longest draft prefix that the target would have decoded itself.

    Args:
        drafts: ``[B, p, h]`` int64, ``p`` drafts of length ``h`` per sequence, best-ranked first
            (``[p, h]`` for a single sequence; outputs are then 0-d).
        target_logits: the target's logits at the ``h + 1`` positions of each draft,
            ``[B, p, h + 1, V]`` (position ``j`` is the prediction after the context and
            ``drafts[b, d, :j]``), or its greedy tokens ``[B, p, h + 1]``.
        lengths: optional real draft lengths, ``[B, p]``, ``[B]`` (same for all drafts of a row)
            or an int; tokens at ``j >= lengths`` are padding and never accepted.

    Returns:
        ``GreedyResult(best_draft [B], num_accepted [B], next_token [B])``: the draft with the
        longest prefix equal to the target's greedy tokens (ties: the lowest index, i.e. the
        higher-ranked draft), its accepted length ``k``, and the target's greedy token at
        position ``k`` of that draft.  Appending ``drafts[best, :k]`` and ``next_token``
        reproduces greedy decoding of the target exactly.
    """
    single = drafts.dim() == 2
    if single:
        drafts = drafts.unsqueeze(0)
        target_logits = target_logits.unsqueeze(0)
    B, P, H = drafts.shape
    t = target_tokens(target_logits)  # [B, p, h+1]
    if t.shape != (B, P, H + 1):
        raise ValueError(
            f"target has shape {tuple(target_logits.shape)}; expected [B, p, h+1(, V)] for drafts {tuple(drafts.shape)}"
        )
    match = drafts == t[..., :H]
    if lengths is not None:
        L = _as_lengths(lengths, (B, P), H, drafts.device)
        match &= torch.arange(H, device=drafts.device) < L.unsqueeze(-1)
    num = match.to(torch.int64).cumprod(-1).sum(-1)  # [B, p]
    # Unique maximum: longest prefix first, then the lowest draft index.
    key = num * P + (P - 1 - torch.arange(P, device=drafts.device))
    best = key.argmax(-1)  # [B]
    num_best = num.gather(1, best.unsqueeze(1))  # [B, 1]
    row = t.gather(1, best.view(B, 1, 1).expand(B, 1, H + 1)).squeeze(1)  # [B, h+1]
    nxt = row.gather(1, num_best).squeeze(1)
    res = GreedyResult(best, num_best.squeeze(1), nxt)
    if single:
        res = GreedyResult(*(x.squeeze(0) for x in res))
    return res
