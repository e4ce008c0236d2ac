"""Drafts from the heads' top-k lattice: p-best paths, n-gram rescoring, sampled drafts.

Greedy decoding verifies the ``p`` best drafts of the heads' top-k lattice: without an LM the
search runs on the device (only the ``[B, p, g]`` draft ids go to the host); with an n-gram LM
only the top-k ids and log-probabilities go to the host, where draftlattice's C++ core rescores
them exactly (:func:`draftlattice.rescore_batch`, one LM memo per row kept across the steps).
With ``nodes``, the tree verified is instead the lattice's ``nodes`` best prefixes
(:func:`draftlattice.node_tree.best_nodes_batch`, with the LM or without): the same node budget
placed where acceptance is likeliest, not spent on the tails of p whole drafts.

Sampling draws drafts whose proposal law ``q`` is known: without an LM the heads' processed law
(independent positions, on the device); with an LM the full-support rescored lattice, with its
own weight ``sample_alpha``, as :func:`draftlattice.sample.sample_from_heads` builds it: only each
head's top-k and the mass outside it go to the host.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ...lattice import Lattice
from ...ngram import NgramLM
from ...node_tree import best_nodes_batch, tree_drafts
from ...rescore import LmMemo, rescore_batch
from ...sample import sample_drafts
from ...verify import draw_categorical, sampling_distribution
from .base import Proposal, SampledDrafts, Sampling, topk_lattice

# Context tokens passed to the LM per row: only the last order - 1 matter, and no draftlattice
# LM has order above 8.
LM_CONTEXT = 8
#: Most drafts a step (p) and most prefixes a tree (nodes): a verification forward holds a mask
#: and activations for every node, so a tree far beyond any that pays (Sequoia's largest are
#: ~768 nodes; p drafts of h - 1 tokens are up to p x (h - 1) nodes) would exhaust memory.
MAX_DRAFTS, MAX_NODES = 1024, 4096


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


class LatticeDrafter:
    """The heads' top-k lattice, rescored by an n-gram LM or not.

    Args:
        lm: a :class:`draftlattice.NgramLM` over the model's token ids, or None (the heads alone).
        k: candidates per head.
        p: drafts per step (deterministic drafts).
        alpha: LM weight of the p-best rescoring (lattice log-prob + alpha * LM log-prob).
        sample_alpha: LM weight of sampled drafts (0 = the heads' own law).
        nodes: deterministic drafts as the tree of the lattice's ``nodes`` best prefixes (the
            root, the known next token, not counted) instead of the ``p`` best drafts; None: the
            p best. ``p`` still counts the drafts sampled for the "multi" rule.
    """

    name = "lattice"

    def __init__(
        self,
        lm=None,
        k: int = 8,
        p: int = 4,
        alpha: float = 0.5,
        sample_alpha: float = 0.2,
        nodes: int | None = None,
    ) -> None:
        for label, value in (("k", k), ("p", p), ("nodes", 1 if nodes is None else nodes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{label} must be a positive int, got {value!r}")
        for label, value, most in (("p", p, MAX_DRAFTS), ("nodes", nodes or 1, MAX_NODES)):
            if value > most:
                raise ValueError(
                    f"{label} must be at most {most} (a verification forward holds every node), got {value}"
                )
        for label, value in (("alpha", alpha), ("sample_alpha", sample_alpha)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
                raise ValueError(f"{label} must be a finite number >= 0, got {value!r}")
        if lm is not None and not isinstance(lm, NgramLM):
            raise ValueError(f"lm must be a draftlattice.NgramLM or None, got {type(lm).__name__}")  # noqa: TRY004
        self.lm, self.k, self.p, self.nodes = lm, k, p, nodes
        if nodes is not None:  # a tree of deterministic drafts: greedy, or sampling's tree rule
            self.sample_rules = ("tree",)
        self.alpha, self.sample_alpha = float(alpha), float(sample_alpha)
        self.memos: list[LmMemo] = []  # one per batch row, kept across one decoding run's steps

    def propose(self, head_logits: Tensor, sampling: Sampling | None, draws: int) -> Proposal:
        B, g, V = head_logits.shape
        k = min(self.k, V)
        if sampling is None or draws == 0:
            ids, logprobs = topk_lattice(head_logits, k)
            if self.lm is None and self.nodes is None:
                return Proposal([pbest_paths(ids, logprobs, self.p)])
            return Proposal([ids, logprobs])
        q = sampling_distribution(
            head_logits, sampling.temperature, sampling.top_k, sampling.top_p, dtype=torch.float32
        )
        if self.lm is None:  # the heads are independent: n draws per position, the same q for all
            n = draws
            # By inversion, one cumulative sum a position for its n draws: torch.multinomial took
            # ~3 ms a step for 3 heads over 49,152 tokens on one CPU thread (bench/RESULTS.md).
            tokens = draw_categorical(q.view(B * g, V), count=n).view(B, g, n).transpose(1, 2)
            return Proposal([], SampledDrafts(tokens, q.unsqueeze(1).expand(B, n, g, V)))
        # The full-support lattice needs the top-k of each head and the mass outside it; the law
        # outside it stays here, so only [B, g, k] values and [B, g] masses cross to the host.
        top, ids = q.topk(k, dim=-1)
        # Zero-probability candidates (a head whose top-p support is below k) leave every head's top-k.
        keep = max(1, int((top > 0).sum(-1).min()))
        top, ids = top[..., :keep], ids[..., :keep]
        rest = q.scatter(-1, ids, 0.0)
        mass = rest.sum(-1)
        rest = rest / mass.clamp_min(torch.finfo(rest.dtype).tiny).unsqueeze(-1)
        return Proposal([ids, top.log(), mass.log()], rest=rest, draws=draws)

    def finish(
        self, proposal: Proposal, host: list[Tensor], contexts: list[list[int]], device: torch.device
    ) -> tuple[Tensor, SampledDrafts | None]:
        if proposal.sampled is not None:
            return proposal.sampled.tokens, proposal.sampled
        if self.lm is None and (self.nodes is None or proposal.draws):
            return host[0], None
        contexts = [c[-LM_CONTEXT:] for c in contexts]
        if proposal.draws == 0 and self.nodes is not None:
            return torch.from_numpy(self._best_nodes(host[0].numpy(), host[1].numpy(), contexts)), None
        if proposal.draws == 0:
            return torch.from_numpy(self._rescored(host[0].numpy(), host[1].numpy(), contexts)), None
        sampled = self._sampled(host, proposal.rest, proposal.draws, contexts)
        return sampled.tokens, sampled

    def _rescored(self, ids: np.ndarray, logprobs: np.ndarray, contexts: list[list[int]]) -> np.ndarray:
        """``[B, p, g]`` int64: the p best drafts of each top-k lattice under lattice + alpha * LM
        (draftlattice's exact C++ rescoring); padded by repeating the best when k**g < p."""
        B, g, _ = ids.shape
        self.memos.extend(LmMemo() for _ in range(B - len(self.memos)))
        results = rescore_batch((ids, logprobs), self.lm, contexts, p=self.p, alpha=self.alpha, memos=self.memos[:B])
        drafts = np.empty((B, self.p, g), dtype=np.int64)
        for b, result in enumerate(results):
            n = len(result)
            drafts[b, :n] = result.tokens
            drafts[b, n:] = result.tokens[0]
        return drafts

    def _best_nodes(self, ids: np.ndarray, logprobs: np.ndarray, contexts: list[list[int]]) -> np.ndarray:
        """``[B, leaves, g]`` int64: each row's tree of its lattice's ``nodes`` best prefixes, as
        its leaves' paths (``-1`` past a shorter path's end); rows with fewer leaves repeat their
        best path (a repeated draft adds no tree node). A lattice whose every prefix the LM rules
        out (``-inf``) drafts its heads' 1-best."""
        B, g, _ = ids.shape
        memos = None
        if self.lm is not None:
            self.memos.extend(LmMemo() for _ in range(B - len(self.memos)))
            memos = self.memos[:B]
        trees = best_nodes_batch((ids, logprobs), self.lm, self.nodes, self.alpha, contexts, memos=memos)
        paths = [tree_drafts(tree, ids[b], g) for b, tree in enumerate(trees)]
        drafts = np.empty((B, max(len(p) for p in paths), g), dtype=np.int64)
        for b, rows in enumerate(paths):
            drafts[b, : len(rows)] = rows
            drafts[b, len(rows) :] = rows[0]
        return drafts

    def _sampled(self, host: list[Tensor], rest: Tensor, n: int, contexts: list[list[int]]) -> SampledDrafts:
        """``n`` i.i.d. drafts per row from the full-support rescored lattice, with their
        exact laws q over the vocabulary (as :func:`draftlattice.sample.sample_from_heads`, split
        between host and device).

        ``host`` = top-k ids and log-probabilities ``[B, g, k]`` and the log-mass outside the
        top-k ``[B, g]``; ``rest`` the law outside the top-k ``[B, g, V]`` (device). The host
        samples the lattice's arcs (an "other" arc per position carries the mass outside the
        top-k); the device forms q and draws the concrete token of each "other" arc from ``rest``.
        The seeds come from torch's global generator, like generate()'s own draws."""
        ids, logp, other = (t.numpy() for t in host)
        B, g, k = ids.shape
        seed = torch.Generator().manual_seed(int(torch.randint(0, 2**62, (1,))))
        tokens, arc_q = [], []
        for b, context in enumerate(contexts):
            lattice = Lattice.from_topk(ids[b].astype(np.int32), logp[b].astype(np.float32))
            drawn = sample_drafts(
                lattice, self.lm, n, self.sample_alpha, np.asarray(context, np.int32), False, seed, other[b]
            )
            tokens.append(drawn.tokens)
            arc_q.append(drawn.q)
        device = rest.device
        tokens = torch.from_numpy(np.stack(tokens).astype(np.int64)).to(device)  # [B, n, g], -1 = other arc
        arc_q = torch.from_numpy(np.stack(arc_q).astype(np.float32)).to(device)  # [B, n, g, k + 1]
        top_ids = torch.from_numpy(ids).to(device).unsqueeze(1).expand(B, n, g, k)
        q = (arc_q[..., k : k + 1] * rest.unsqueeze(1)).scatter_(-1, top_ids, arc_q[..., :k])
        others = tokens < 0
        if bool(others.any()):
            # Inversion, not torch.multinomial: without replacement it draws an exponential per
            # vocabulary entry (about 7 ms a step at V = 49,152 on the CPU). n draws per
            # position from one cumulative sum of its rest; each "other" arc takes its own.
            draws = draw_categorical(rest, count=n).transpose(1, 2)  # [B, n, g]
            tokens = torch.where(others, draws, tokens)
        return SampledDrafts(tokens, q)
