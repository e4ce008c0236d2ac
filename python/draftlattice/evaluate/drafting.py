"""Drafters that replay from a trace: they see only the heads' recorded top-K and the committed text.

Each spec turns a batch of *steps* (prompt i, committed position n, draft length g) into drafts
[p, g] -- the same drafts the engine's drafter (:mod:`draftlattice.decode.drafters`) proposes
at that step:

* :class:`Vanilla`        each head's top-1 (Stern et al. 2018).
* :class:`NgramRescore`   the p best paths of the heads' top-k lattice under
                          lattice log-prob + alpha * n-gram log-prob (``rescore_batch``; C++
                          threads across the batch). alpha = 0 is the "p-best 0-gram" drafter.
                          The LM context is the live drafter's: the last ``LM_CONTEXT``
                          committed tokens, no ``<s>``, so replay and live give the same drafts.
* :class:`BestPrefixes`   the tree of the rescored lattice's n best prefixes
                          (:mod:`draftlattice.node_tree`), as its leaves' paths: the engine's
                          ``LatticeDrafter(lm, k, nodes=n, alpha=alpha)``.
* :class:`Oracle`         follows the reference while it is in each head's top-k (upper bound).
* :class:`Adaptive`       chooses (k, p) per step from the heads' entropies, then rescores.
* :class:`LiveDrafter`    wraps any engine drafter (:class:`draftlattice.decode.Drafter`): it
                          is called on pseudo-logits holding the top-K log-probs (every other
                          token at -1e4), which leaves each head's ranking and the drafter's
                          choice unchanged for drafters that only use ranking/differences
                          within a head's top-K.

Head j+1 at position n predicts ``y[n + j]``; the draft covers y[n+1 .. n+g] (y[n] is the step's
root, head 1's argmax, already known).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..decode.drafters import to_host
from ..decode.drafters.lattice import LM_CONTEXT
from ..lattice import Lattice
from ..node_tree import best_nodes_batch, tree_drafts
from ..rescore import rescore_batch
from .trace import Trace

Step = tuple[int, int, int]  # (prompt index, position n of the pending token, draft length g >= 1)


class TraceView:
    """Per-prompt arrays of a trace prepared for fast drafting (full text, reference ranks)."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.h, self.K = trace.num_heads, trace.top_k
        self.text = [np.concatenate([p, t]) for p, t in zip(trace.prompts, trace.tokens)]
        self.plen = [len(p) for p in trace.prompts]
        self._ranks: list[np.ndarray] | None = None

    def context(self, i: int, n: int, last: int) -> np.ndarray:
        """The last ``last`` tokens of prompt + y[: n + 1] (all if shorter)."""
        end = self.plen[i] + n + 1
        return self.text[i][max(0, end - last) : end]

    def reference(self, i: int, n: int, g: int) -> np.ndarray:
        return self.trace.tokens[i][n + 1 : n + 1 + g]

    def ranks(self, i: int) -> np.ndarray:
        """[T, h] int: rank of the reference token y[t + j] in head j+1's top-K at t (K if absent
        or beyond the decode). Column 0 (head 1) is 0 by construction of a greedy trace."""
        if self._ranks is None:
            self._ranks = []
            for ids, y in zip(self.trace.topk_ids, self.trace.tokens):
                t = len(y)
                ranks = np.full((t, self.h), self.K, np.int32)
                for j in range(self.h):
                    rows = np.arange(t - j)
                    hit = ids[rows, j, :] == y[rows + j][:, None]
                    ranks[rows, j] = np.where(hit.any(1), hit.argmax(1), self.K)
                self._ranks.append(ranks)
        return self._ranks[i]


def accepted_length(drafts: np.ndarray, reference: np.ndarray) -> int:
    """Greedy verification: the longest prefix of the reference matched by any draft row (the
    reference may end before the drafts: the engine's stopper drops what lies beyond it)."""
    if drafts.shape[1] == 0:
        return 0
    n = min(drafts.shape[1], len(reference))  # at the end of a trace the reference is shorter
    match = np.cumprod(drafts[:, :n] == reference[None, :n], axis=1)
    return int(match.sum(1).max())


def _check_k(k: int, view: TraceView) -> None:
    if not 1 <= k <= view.K:
        raise ValueError(f"k={k} needs 1 <= k <= the trace's top_k={view.K}")


@dataclass(frozen=True)
class Vanilla:
    name: str = "vanilla"

    def draft(self, view: TraceView, steps: Sequence[Step], num_threads=None) -> list[np.ndarray]:
        return [view.trace.topk_ids[i][n, 1 : 1 + g, 0][None] for i, n, g in steps]


@dataclass(frozen=True)
class NgramRescore:
    """p-best rescoring of the top-k lattice with an n-gram LM (weight alpha, natural log)."""

    lm: object
    k: int
    p: int = 1
    alpha: float = 1.0

    @property
    def name(self) -> str:
        return f"ngram(k={self.k},p={self.p},alpha={self.alpha:g})"

    def draft(self, view: TraceView, steps: Sequence[Step], num_threads=None) -> list[np.ndarray]:
        _check_k(self.k, view)
        return _rescore(view, steps, self.lm, [self.k] * len(steps), [self.p] * len(steps), self.alpha, num_threads)


@dataclass(frozen=True)
class BestPrefixes:
    """The tree of the n best prefixes of the top-k lattice under lattice log-prob + alpha *
    n-gram log-prob (``lm`` None: the lattice alone), as its leaves' paths (-1 past a shorter
    path's end). The LM context is the live drafter's, as for :class:`NgramRescore`."""

    lm: object
    k: int
    nodes: int
    alpha: float = 1.0

    @property
    def name(self) -> str:
        return f"best_prefixes(k={self.k},nodes={self.nodes},alpha={self.alpha:g})"

    def draft(self, view: TraceView, steps: Sequence[Step], num_threads=None) -> list[np.ndarray]:
        _check_k(self.k, view)
        lattices, contexts = zip(*(_step_lattice(view, step, self.k) for step in steps))
        trees = best_nodes_batch(list(lattices), self.lm, self.nodes, self.alpha, contexts, num_threads=num_threads)
        return [tree_drafts(tree, lattice.tokens, g) for tree, lattice, (_, _, g) in zip(trees, lattices, steps)]


def _step_lattice(view: TraceView, step: Step, k: int) -> tuple[Lattice, np.ndarray]:
    """The top-k lattice of heads 2..g+1 at a step, and the LM context a live
    :class:`draftlattice.decode.LatticeDrafter` gives it: the last ``LM_CONTEXT`` tokens of
    prompt + output, without ``<s>``."""
    i, n, g = step
    ids, logprobs = view.trace.topk_ids[i][n, 1 : 1 + g, :k], view.trace.topk_logprobs[i][n, 1 : 1 + g, :k]
    return Lattice.from_topk(ids, logprobs), view.context(i, n, LM_CONTEXT)


def _rescore(view, steps, lm, ks, ps, alpha, num_threads) -> list[np.ndarray]:
    """Rescored drafts per step; steps with equal p go to one rescore_batch call (lattices and
    contexts: :func:`_step_lattice`)."""
    out: list[np.ndarray | None] = [None] * len(steps)
    for p in sorted(set(ps)):
        idx = [s for s, q in enumerate(ps) if q == p]
        lattices, contexts = zip(*(_step_lattice(view, steps[s], ks[s]) for s in idx))
        results = rescore_batch(list(lattices), lm, list(contexts), p=p, alpha=alpha, num_threads=num_threads)
        for s, r in zip(idx, results):
            out[s] = r.tokens
    return out  # type: ignore[return-value]


@dataclass(frozen=True)
class Oracle:
    """Best draft from each head's top-k given the reference (not deployable; an upper bound)."""

    k: int

    @property
    def name(self) -> str:
        return f"oracle(k={self.k})"

    def draft(self, view: TraceView, steps: Sequence[Step], num_threads=None) -> list[np.ndarray]:
        _check_k(self.k, view)
        out = []
        for i, n, g in steps:
            hit = view.ranks(i)[n, 1 : 1 + g] < self.k
            a = int(np.cumprod(hit).sum())
            draft = view.trace.topk_ids[i][n, 1 : 1 + g, 0].copy()
            draft[:a] = view.reference(i, n, a)
            out.append(draft[None])
        return out


@dataclass(frozen=True)
class Adaptive:
    """Entropy-adaptive rescoring: ``policy(entropy [g]) -> (k, p)`` per step, entropies of heads
    2..g+1 at the step's position (nats, full vocabulary: available live at no cost)."""

    lm: object
    policy: Callable[[np.ndarray], tuple[int, int]]
    alpha: float = 1.0
    name: str = "adaptive"

    def draft(self, view: TraceView, steps: Sequence[Step], num_threads=None) -> list[np.ndarray]:
        choices = [self.policy(view.trace.entropy[i][n, 1 : 1 + g]) for i, n, g in steps]
        for k, _ in choices:
            _check_k(k, view)
        return _rescore(view, steps, self.lm, [c[0] for c in choices], [c[1] for c in choices], self.alpha, num_threads)


class LiveDrafter:
    """Any engine drafter replayed on pseudo-logits (see the module docstring), greedy mode."""

    def __init__(self, drafter) -> None:
        self.drafter = drafter
        self.name = f"live:{getattr(drafter, 'name', type(drafter).__name__)}"

    def draft(self, view: TraceView, steps: Sequence[Step], num_threads=None) -> list[np.ndarray]:
        out = []
        vocab = view.trace.vocab_size
        for i, n, g in steps:
            logits = torch.full((g, vocab), -1e4)
            ids = torch.from_numpy(view.trace.topk_ids[i][n, 1 : 1 + g].astype(np.int64))
            logits.scatter_(1, ids, torch.from_numpy(view.trace.topk_logprobs[i][n, 1 : 1 + g]))
            context = view.text[i][: view.plen[i] + n + 1].tolist()
            proposal = self.drafter.propose(logits[None], None, 0)
            drafts, _ = self.drafter.finish(proposal, to_host(proposal.to_host), [context], logits.device)
            out.append(drafts[0].numpy())
        return out
