"""Drafts from the heads' logits: top-k lattices, p-best search, LM rescoring, sampling.

Greedy decoding verifies the ``p`` best drafts of the heads' top-k lattice: without an LM the
search runs on the device (only the ``[B, p, g]`` draft ids go to the host); with an n-gram LM
only the top-k ids and log-probabilities go to the host, where draftlattice's C++ core rescores
them exactly (:func:`draftlattice.rescore_batch`). Sampling draws one draft per row whose
proposal law ``q`` is known, as lossless block verification requires.

Drafting is split in two so that the decoding loop needs one device->host transfer per step:
:func:`propose` (device, right after verification) and :func:`finish` (host, after the
transfer that also carries the accepted lengths).
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


@dataclass(frozen=True)
class Sampling:
    """generate()'s sampling warpers, which the heads' proposal law also uses."""

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None


@dataclass(frozen=True)
class SampledDrafts:
    """One draft per row: ``tokens [B, g]`` (device) and its proposal law ``q [B, g, V]``."""

    tokens: Tensor
    q: Tensor


@dataclass
class Proposal:
    """The device part of drafting from the heads' logits ``[B, g, V]``.

    Only ``to_host`` goes to the host (with the step's accepted-length read, in one transfer):
    the p best paths (greedy, no LM), or the top-k ids and log-probabilities (with an LM).
    Sampling without an LM stays on the device.
    """

    to_host: list[Tensor]
    sampled: SampledDrafts | None = None
    vocab_size: int = 0


def propose(head_logits: Tensor, options: DraftOptions, sampling: Sampling | None) -> Proposal:
    """Device work of drafting: top-k lattice, p-best paths or sampled drafts."""
    B, g, V = head_logits.shape
    k = min(options.k, V)
    if sampling is None:
        ids, logprobs = topk_lattice(head_logits, k)
        if options.lm is None:
            return Proposal([pbest_paths(ids, logprobs, options.p)], vocab_size=V)
        return Proposal([ids, logprobs], vocab_size=V)
    if options.lm is None:
        q = sampling_distribution(head_logits, sampling.temperature, sampling.top_k, sampling.top_p,
                                  dtype=torch.float32)
        tokens = torch.multinomial(q.view(B * g, V), 1).view(B, g)
        return Proposal([], SampledDrafts(tokens, q), V)
    return Proposal(list(topk_lattice(head_logits, k, sampling.temperature)), vocab_size=V)


def finish(proposal: Proposal, host: list[Tensor], options: DraftOptions, contexts: list[list[int]],
           sampling: Sampling | None, device: torch.device) -> tuple[Tensor, SampledDrafts | None]:
    """Host part of drafting: ``(drafts [B, p, g], sampled)``; ``host`` = ``proposal.to_host``
    on the host. Greedy drafts stay on the host (the tree is built there); sampled drafts are on
    the device."""
    if proposal.sampled is not None:
        return proposal.sampled.tokens.unsqueeze(1), proposal.sampled
    if options.lm is None:
        return host[0], None
    ids, logprobs = host[0].numpy(), host[1].numpy()
    contexts = [c[-LM_CONTEXT:] for c in contexts]
    if sampling is None:
        return torch.from_numpy(rescored_drafts(ids, logprobs, options, contexts)), None
    sampled = lattice_samples(ids, logprobs, options, contexts, proposal.vocab_size, device)
    return sampled.tokens.unsqueeze(1), sampled


def rescored_drafts(ids: np.ndarray, logprobs: np.ndarray, options: DraftOptions,
                    contexts: list[list[int]]) -> np.ndarray:
    """``[B, p, g]`` int64: the p best drafts of each top-k lattice under lattice + alpha * LM
    (draftlattice's exact C++ rescoring); padded by repeating the best when k**g < p."""
    results = rescore_batch((ids, logprobs), options.lm, contexts, p=options.p, alpha=options.alpha)
    B, g, _ = ids.shape
    drafts = np.empty((B, options.p, g), dtype=np.int64)
    for b, result in enumerate(results):
        n = len(result)
        drafts[b, :n] = result.tokens
        drafts[b, n:] = result.tokens[0]
    return drafts


def lattice_samples(ids: np.ndarray, logprobs: np.ndarray, options: DraftOptions, contexts: list[list[int]],
                    vocab_size: int, device: torch.device) -> SampledDrafts:
    """One draft per row drawn exactly from ``exp(lattice + alpha * LM)`` over the top-k lattice
    (:func:`draftlattice.sample_drafts_batch`), its conditionals ``q`` scattered over the vocabulary."""
    lattices = [Lattice.from_topk(i, lp) for i, lp in zip(ids, logprobs)]
    seed = torch.Generator().manual_seed(int(torch.randint(0, 2**62, (1,))))
    samples = sample_drafts_batch(lattices, options.lm, contexts, n=1, alpha=options.alpha, generator=seed)
    B, g, _ = ids.shape
    tokens = torch.as_tensor(np.stack([s.tokens[0] for s in samples]), dtype=torch.int64)
    # q's columns follow each lattice's candidate order (Lattice.tokens), not topk's.
    q_topk = torch.as_tensor(np.stack([s.q[0] for s in samples]), dtype=torch.float32)
    columns = torch.as_tensor(np.stack([lat.tokens for lat in lattices]), dtype=torch.int64)
    q = torch.zeros(B, g, vocab_size, dtype=torch.float32, device=device)
    q.scatter_(-1, columns.to(device, non_blocking=True), q_topk.to(device, non_blocking=True))
    return SampledDrafts(tokens.to(device, non_blocking=True), q)


def greedy_drafts(head_logits: Tensor, options: DraftOptions, contexts: list[list[int]]) -> np.ndarray:
    """``[B, p, g]`` int64 greedy drafts on the host (:func:`propose` then :func:`finish`)."""
    proposal = propose(head_logits, options, None)
    drafts, _ = finish(proposal, [t.cpu() for t in proposal.to_host], options, contexts, None, head_logits.device)
    return drafts.numpy()


def to_host(tensors: list[Tensor]) -> list[Tensor]:
    """Copy device tensors to the host with one synchronisation (pinned, non-blocking copies)."""
    if not tensors or tensors[0].device.type != "cuda":
        return [t.cpu() for t in tensors]
    host = [t.to("cpu", non_blocking=True) for t in tensors]
    torch.cuda.current_stream(tensors[0].device).synchronize()
    return host
