"""Drafts from the heads' logits: top-k lattices, p-best search, LM rescoring, sampling.

Greedy decoding verifies the ``p`` best drafts of the heads' top-k lattice: without an LM the
search runs on the device (only the ``[B, p, g]`` draft ids go to the host); with an n-gram LM
only the top-k ids and log-probabilities go to the host, where draftlattice's C++ core rescores
them exactly (:func:`draftlattice.rescore_batch`). Sampling uses the decoder's lossless rules
(``draft_sample``): ``"multi"`` draws p drafts per row whose proposal law ``q`` is known (the
heads' processed law, or with an LM the full-support rescored lattice, as
:func:`draftlattice.sample.sample_from_heads` builds it, with its own weight ``sample_alpha``:
only each head's top-k and the mass outside it go to the host), verified by
recursive rejection sampling; ``"tree"`` proposes the p best drafts as in greedy mode (the
deterministic tree rule); ``"block"`` one sampled draft, block verification.

Drafting is split in two so that the decoding loop needs one device->host transfer per step:
:func:`propose` (device, right after verification) and :func:`finish` (host, after the
transfer that also carries the accepted lengths).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from ..lattice import Lattice
from ..rescore import LmMemo, rescore_batch
from ..sample import sample_drafts
from ..verify import sampling_distribution

# Context tokens passed to the LM per row: only the last order - 1 matter, and no draftlattice
# LM has order above 8.
LM_CONTEXT = 8

# The lossless rules of sampling mode (``draft_sample``), as the decoder's verifiers "multi",
# "tree-sample" and "block".
SAMPLE_RULES = ("multi", "tree", "block")


@dataclass(frozen=True)
class DraftOptions:
    """The ``draft_*`` settings of :func:`draftlattice.hf.generate`."""

    lm: object | None
    k: int
    p: int
    alpha: float
    sample_rule: str = "multi"
    sample_alpha: float = 0.2
    # One LM memo per batch row, kept across one generate() call's steps (made on first use).
    memos: list[LmMemo] = field(default_factory=list, compare=False, repr=False)

    @property
    def sampled_drafts(self) -> int:
        """Drafts sampled per row in sampling mode (0: the rule takes deterministic drafts)."""
        return {"multi": self.p, "block": 1, "tree": 0}[self.sample_rule]


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
        paths = torch.cat(
            [paths.gather(1, parent.unsqueeze(-1).expand(B, keep, t)), ids[:, t].gather(1, column).unsqueeze(-1)],
            dim=-1,
        )
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
    """``n`` drafts per row, ``tokens [B, n, g]`` (device), and their proposal laws
    ``q [B, n, g, V]``: ``q[b, i, j]`` is the law draft i's token j was drawn from, given its
    first j tokens (float32, device)."""

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
    #: sampling with an LM: the heads' processed law outside its top-k, renormalised [B, g, V]
    #: (device); the host only sees the top-k and the mass outside it.
    rest: Tensor | None = None


def propose(head_logits: Tensor, options: DraftOptions, sampling: Sampling | None) -> Proposal:
    """Device work of drafting: top-k lattice, p-best paths or sampled drafts.

    Sampled drafts without an LM stay on the device; with an LM the top-k of the heads' processed
    laws and the mass outside it go to the host, where the rescored lattice is sampled."""
    B, g, V = head_logits.shape
    k = min(options.k, V)
    if sampling is None or options.sampled_drafts == 0:
        ids, logprobs = topk_lattice(head_logits, k)
        if options.lm is None:
            return Proposal([pbest_paths(ids, logprobs, options.p)], vocab_size=V)
        return Proposal([ids, logprobs], vocab_size=V)
    q = sampling_distribution(head_logits, sampling.temperature, sampling.top_k, sampling.top_p, dtype=torch.float32)
    if options.lm is None:  # the heads are independent: n draws per position, the same q for all
        n = options.sampled_drafts
        tokens = torch.multinomial(q.view(B * g, V), n, replacement=True).view(B, g, n).transpose(1, 2)
        return Proposal([], SampledDrafts(tokens, q.unsqueeze(1).expand(B, n, g, V)), V)
    # The full-support lattice needs the top-k of each head and the mass outside it; the law
    # outside it stays here, so only [B, g, k] values and [B, g] masses cross to the host.
    top, ids = q.topk(k, dim=-1)
    # Zero-probability candidates (a head whose top-p support is below k) leave every head's top-k.
    keep = max(1, int((top > 0).sum(-1).min()))
    top, ids = top[..., :keep], ids[..., :keep]
    rest = q.scatter(-1, ids, 0.0)
    mass = rest.sum(-1)
    rest = rest / mass.clamp_min(torch.finfo(rest.dtype).tiny).unsqueeze(-1)
    return Proposal([ids, top.log(), mass.log()], vocab_size=V, rest=rest)


def finish(
    proposal: Proposal,
    host: list[Tensor],
    options: DraftOptions,
    contexts: list[list[int]],
    sampling: Sampling | None,
    device: torch.device,
) -> tuple[Tensor, SampledDrafts | None]:
    """Host part of drafting: ``(drafts [B, p, g], sampled)``; ``host`` = ``proposal.to_host``
    on the host. Deterministic drafts stay on the host (the tree is built there); sampled drafts
    are on the device."""
    if proposal.sampled is not None:
        return proposal.sampled.tokens, proposal.sampled
    if options.lm is None:
        return host[0], None
    contexts = [c[-LM_CONTEXT:] for c in contexts]
    if sampling is None or options.sampled_drafts == 0:
        ids, logprobs = host[0].numpy(), host[1].numpy()
        return torch.from_numpy(rescored_drafts(ids, logprobs, options, contexts)), None
    sampled = lattice_samples(host, proposal.rest, options, contexts)
    return sampled.tokens, sampled


def rescored_drafts(
    ids: np.ndarray, logprobs: np.ndarray, options: DraftOptions, contexts: list[list[int]]
) -> np.ndarray:
    """``[B, p, g]`` int64: the p best drafts of each top-k lattice under lattice + alpha * LM
    (draftlattice's exact C++ rescoring); padded by repeating the best when k**g < p."""
    B, g, _ = ids.shape
    options.memos.extend(LmMemo() for _ in range(B - len(options.memos)))
    results = rescore_batch(
        (ids, logprobs), options.lm, contexts, p=options.p, alpha=options.alpha, memos=options.memos[:B]
    )
    drafts = np.empty((B, options.p, g), dtype=np.int64)
    for b, result in enumerate(results):
        n = len(result)
        drafts[b, :n] = result.tokens
        drafts[b, n:] = result.tokens[0]
    return drafts


def lattice_samples(
    host: list[Tensor], rest: Tensor, options: DraftOptions, contexts: list[list[int]]
) -> SampledDrafts:
    """``options.sampled_drafts`` i.i.d. drafts per row from the full-support rescored lattice of
    the heads' processed laws, LM weight ``sample_alpha``, with their exact laws q over the
    vocabulary (as :func:`draftlattice.sample.sample_from_heads`, split between host and device).

    ``host`` = top-k ids and log-probabilities ``[B, g, k]`` and the log-mass outside the top-k
    ``[B, g]`` (host); ``rest`` the law outside the top-k ``[B, g, V]`` (device). The host samples
    the lattice's arcs (an "other" arc per position carries the mass outside the top-k); the
    device forms q and draws the concrete token of each "other" arc from ``rest``. The seeds come from torch's global generator, like generate()'s own draws."""
    ids, logp, other = (t.numpy() for t in host)
    B, g, k = ids.shape
    n = options.sampled_drafts
    seed = torch.Generator().manual_seed(int(torch.randint(0, 2**62, (1,))))
    tokens, arc_q = [], []
    for b, context in enumerate(contexts):
        lattice = Lattice.from_topk(ids[b].astype(np.int32), logp[b].astype(np.float32))
        drawn = sample_drafts(
            lattice, options.lm, n, options.sample_alpha, np.asarray(context, np.int32), False, seed, other[b]
        )
        tokens.append(drawn.tokens)
        arc_q.append(drawn.q)
    device = rest.device
    tokens = torch.from_numpy(np.stack(tokens).astype(np.int64)).to(device)  # [B, n, g], -1 = other arc
    arc_q = torch.from_numpy(np.stack(arc_q).astype(np.float32)).to(device)  # [B, n, g, k + 1]
    top_ids = torch.from_numpy(ids).to(device).unsqueeze(1).expand(B, n, g, k)
    q = (arc_q[..., k : k + 1] * rest.unsqueeze(1)).scatter(-1, top_ids, arc_q[..., :k])
    others = tokens < 0
    if bool(others.any()):
        draws = torch.multinomial(rest.unsqueeze(1).expand(B, n, g, -1)[others], 1).squeeze(1)
        tokens = tokens.masked_scatter(others, draws)
    return SampledDrafts(tokens, q)


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
