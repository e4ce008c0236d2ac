"""Drafts from the heads' logits: top-k lattices, p-best search, LM rescoring, sampling.

Greedy decoding verifies the ``p`` best drafts of the heads' top-k lattice: without an LM the
search runs on the device (only the ``[B, p, g]`` draft ids go to the host); with an n-gram LM
only the top-k ids and log-probabilities go to the host, where draftlattice's C++ core rescores
them exactly (:func:`draftlattice.rescore_batch`). Sampling draws one draft per row whose
proposal law ``q`` is known, as lossless block verification requires.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ..lattice import Lattice
from ..rescore import rescore_batch
from ..sample import sample_drafts_batch
from ..verify import sampling_distribution

# Context tokens passed to the LM per row: only the last order - 1 matter, and no draftlattice
# LM has order above 8.
LM_CONTEXT = 8


@dataclass(frozen=True)
class DraftOptions:
    """The ``draft_*`` settings of :func:`draftlattice.hf.generate`."""

    lm: object | None
    k: int
    p: int
    alpha: float


def topk_lattice(head_logits: Tensor, k: int, temperature: float = 1.0) -> tuple[Tensor, Tensor]:
    """Top-k ``(ids [B, g, k], logprobs [B, g, k] float32)`` of ``log_softmax(logits / T)``."""
    logprobs = torch.log_softmax(head_logits.float() / temperature, dim=-1)
    values, ids = logprobs.topk(k, dim=-1)
    return ids, values


def pbest_paths(ids: Tensor, logprobs: Tensor, p: int) -> Tensor:
    """The ``p`` drafts of highest summed log-probability of a sausage lattice, ``[B, p, g]``.

    Exact: a prefix outside the p best prefixes cannot start one of the p best drafts (the p
    prefixes above it, with its suffix, all score higher). If ``k**g < p`` the list is padded by
    repeating the best draft (a repeated draft adds no tree node).
    """
    B, g, k = ids.shape
    score = logprobs[:, 0]  # [B, k]
    paths = ids[:, 0].unsqueeze(-1)  # [B, k, 1]
    keep = min(p, k)
    score, order = score.topk(keep, dim=-1)
    paths = paths.gather(1, order.unsqueeze(-1))
    for t in range(1, g):
        total = (score.unsqueeze(-1) + logprobs[:, t].unsqueeze(1)).reshape(B, -1)  # [B, keep*k]
        keep = min(p, total.shape[1])
        score, order = total.topk(keep, dim=-1)
        parent, column = order // k, order % k
        paths = torch.cat([paths.gather(1, parent.unsqueeze(-1).expand(B, keep, t)),
                           ids[:, t].gather(1, column).unsqueeze(-1)], dim=-1)
    if keep < p:
        paths = torch.cat([paths, paths[:, :1].expand(B, p - keep, g)], dim=1)
    return paths


def greedy_drafts(head_logits: Tensor, options: DraftOptions, contexts: list[list[int]]) -> np.ndarray:
    """``[B, p, g]`` int64 drafts on the host, best first (the one device->host copy)."""
    k = min(options.k, head_logits.shape[-1])
    ids, logprobs = topk_lattice(head_logits, k)
    if options.lm is None:
        return pbest_paths(ids, logprobs, options.p).cpu().numpy()
    ids_host, logprobs_host = ids.cpu().numpy(), logprobs.cpu().numpy()
    results = rescore_batch((ids_host, logprobs_host), options.lm, [c[-LM_CONTEXT:] for c in contexts],
                            p=options.p, alpha=options.alpha)
    B, g, _ = ids_host.shape
    drafts = np.empty((B, options.p, g), dtype=np.int64)
    for b, result in enumerate(results):
        n = len(result)
        drafts[b, :n] = result.tokens
        drafts[b, n:] = result.tokens[0]
    return drafts


@dataclass(frozen=True)
class SampledDrafts:
    """One draft per row: ``tokens [B, g]`` (device) and its proposal law ``q [B, g, V]``."""

    tokens: Tensor
    q: Tensor


def sampled_drafts(head_logits: Tensor, options: DraftOptions, contexts: list[list[int]],
                   temperature: float, top_k: int | None, top_p: float | None) -> SampledDrafts:
    """One draft per row sampled from a law ``q`` that block verification is given exactly.

    Without an LM, token ``t`` is drawn from the head's own distribution under the user's
    temperature / top-k / top-p. With an LM, the draft is drawn exactly from
    ``exp(lattice + alpha * LM)`` over the top-k lattice (:func:`draftlattice.sample_drafts_batch`),
    whose per-position conditionals ``q`` are scattered back over the vocabulary.
    """
    B, g, V = head_logits.shape
    if options.lm is None:
        q = sampling_distribution(head_logits, temperature, top_k, top_p, dtype=torch.float32)
        tokens = torch.multinomial(q.view(B * g, V), 1).view(B, g)
        return SampledDrafts(tokens, q)
    k = min(options.k, V)
    ids, logprobs = topk_lattice(head_logits, k, temperature)
    lattices = [Lattice.from_topk(i, lp) for i, lp in zip(ids.cpu().numpy(), logprobs.cpu().numpy())]
    seed = torch.Generator().manual_seed(int(torch.randint(0, 2**62, (1,))))
    samples = sample_drafts_batch(lattices, options.lm, [c[-LM_CONTEXT:] for c in contexts], n=1,
                                  alpha=options.alpha, generator=seed)
    device = head_logits.device
    tokens = torch.as_tensor(np.stack([s.tokens[0] for s in samples]), dtype=torch.int64).to(device)
    # q's columns follow each lattice's candidate order (Lattice.tokens), not topk's.
    q_topk = torch.as_tensor(np.stack([s.q[0] for s in samples]), dtype=torch.float32).to(device)
    columns = torch.as_tensor(np.stack([lat.tokens for lat in lattices]), dtype=torch.int64).to(device)
    q = torch.zeros(B, g, V, dtype=torch.float32, device=device).scatter_(-1, columns, q_topk)
    return SampledDrafts(tokens, q)
