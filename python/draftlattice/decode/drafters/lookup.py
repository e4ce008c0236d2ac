"""Drafts copied from the context (prompt lookup), added to another drafter's drafts.

Chat answers restate their question and text repeats its own names and phrases; the heads,
which see one hidden state, rarely draft such copies exactly. Prompt lookup (Saxena 2023, in
transformers as ``prompt_lookup_num_tokens``) finds an earlier occurrence of the context's final
n tokens and proposes what followed it (:func:`continuation` says which occurrence). Here that continuation joins the lattice's p
drafts as one more branch of the token tree: a step accepts whichever prefix is longest, so the
two sources add up (measured on the demo's prompts: ``bench/lookup_drafts.py``).

The copied draft may be longer than the heads' horizon: the tree holds drafts of different
lengths (``-1`` past a draft's end), and the heads read the hidden state at the last accepted
node, wherever it is.

With a :class:`~draftlattice.datastore.Datastore` (``datastore=``), a context with no copy of its
own drafts what followed its last tokens in the datastore's corpus instead (REST's retrieval
draft; measured on the demo's prompts: ``bench/lookup_drafts.py``), in the same one branch. With
``retrieval=n`` a context that has a copy also gets the datastore's continuation (up to n tokens)
as a branch of its own: the two sources draft different text (replayed on the recipe's held-out
answers, 2.61 tokens a call for the copy-else-retrieval at 6.2 nodes, 2.77 with a 3-token
retrieval branch beside the copy at 7.3 nodes; ``bench/RESULTS.md``), worth its nodes where
verifying a few more tokens is nearly free.

Without another drafter (``ContextLookup(None)``) the copy is the only draft: no heads run, and a
step whose context has no copy verifies the root alone, a plain decoding step. Where a step's
cost barely grows with its first few tokens (the lean step on a CPU) this never loses much to
plain decoding and gains on every copy accepted.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .base import Drafter, Proposal, SampledDrafts, Sampling

# Padding past the end of a shorter draft in a drafts tensor.
PAD = -1
# Longest copied draft by default: 6 drafted best on the demo's prompts (bench/lookup_drafts.py).
LOOKUP_TOKENS = 6
# The sampling rules a copied draft can join (see ContextLookup).
JOINING_RULES = ("tree", "multi")


def continuation(context: list[int], max_ngram: int, length: int, min_ngram: int = 1) -> list[int]:
    """What followed an earlier occurrence of the context's last n tokens, up to ``length``
    tokens, for the longest n from ``max_ngram`` down to ``min_ngram`` that occurs (``[]`` if
    none does).

    Of the occurrences, the most recent one followed by ``length`` tokens (recent text is the
    likeliest to continue alike), else the earliest (the longest continuation: in a periodic
    context the most recent occurrence is followed by a single token). Measured on the demo's
    prompts, ``bench/lookup_drafts.py``: 1.992 tokens per verification call, against 1.924 always
    the most recent and 1.938 always the earliest (transformers' prompt lookup's choice).
    """
    size = len(context)
    for n in range(min(max_ngram, size - 1), min_ngram - 1, -1):
        tail = context[size - n :]
        first, earliest = tail[0], None
        for start in range(size - n - 1, -1, -1):
            if context[start] == first and context[start : start + n] == tail:
                if start + n + length <= size:
                    return context[start + n : start + n + length]
                earliest = start
        if earliest is not None:
            return context[earliest + n : earliest + n + length]
    return []


class ContextLookup:
    """Another drafter's drafts plus one draft copied from each row's context.

    Args:
        drafter: the drafter whose drafts are kept (e.g. a :class:`~.lattice.LatticeDrafter`).
        max_ngram: longest context suffix matched (tried first, down to 1 token).
        length: longest copied draft, in tokens (may exceed the heads' horizon).
        datastore: where a context has no copy, the draft retrieved from this datastore (its
            ``max_length`` at least ``length``); None: none.
        retrieval: with a datastore, where the context has a copy, also the datastore's
            continuation of up to this many tokens as one more draft (0: only where it has none).

    The copied draft is deterministic: greedy decoding (tree or chains), sampling with the tree
    rule (any fixed tree of drafts is verified exactly), or sampled drafts with recursive
    rejection (``draws``), where its law is one-hot (one copy only: the retrieval branch joins
    deterministic drafts, not sampled ones). Drafts of different lengths are
    ``-1``-padded; joined to sampled drafts, the copy has their length (a row whose context has
    no copy that long keeps one more sampled draft instead: the drafter samples p + 1).

    ``drafter=None``: the copy alone (greedy decoding, or sampling by the tree rule, on a token
    tree; :attr:`reads_heads` is false, so the engine runs no heads), all ``-1`` where the context
    has none; with ``length=0``
    no copy ever, so every step is a plain decoding step (plain greedy decoding on the engine's
    step, e.g. where no draft pays: :func:`draftlattice.default_model.fastest.fastest_drafting`).
    """

    name = "lookup"
    layouts = ("tree", "batch")  #: verification layouts the drafts fit (see drafter=None)

    def __init__(
        self,
        drafter: Drafter | None,
        max_ngram: int = 3,
        length: int = LOOKUP_TOKENS,
        datastore=None,
        retrieval: int = 0,
    ) -> None:
        for label, value in (("max_ngram", max_ngram), ("length", length)):
            if label == "length" and drafter is None and value == 0:
                continue  # no copy at all: plain decoding steps (see the class's docstring)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{label} must be a positive int, got {value!r}")
        if datastore is not None and datastore.max_length < length:
            raise ValueError(
                f"the datastore drafts at most {datastore.max_length} tokens (max_length), fewer than length={length}"
            )
        if isinstance(retrieval, bool) or not isinstance(retrieval, int) or retrieval < 0:
            raise ValueError(f"retrieval must be a non-negative int, got {retrieval!r}")
        if retrieval and datastore is None:
            raise ValueError("retrieval drafts the datastore's continuation beside the copy: it needs a datastore")
        if retrieval and datastore.max_length < retrieval:
            raise ValueError(
                f"the datastore drafts at most {datastore.max_length} tokens (max_length), fewer than retrieval={retrieval}"
            )
        self.drafter, self.max_ngram, self.length, self.datastore = drafter, max_ngram, length, datastore
        self.retrieval = retrieval
        self.reads_heads = drafter is not None
        branches = 2 if retrieval else 1  # the copy (else the retrieval), and the retrieval beside a copy
        if drafter is None:
            # An empty draft is a tree of the root alone; chains have no room for one. The copy is
            # a fixed tree, so the tree rule samples exactly through it (a sampled rule has no law
            # to judge a copied token by: the multi rule takes it only beside sampled drafts).
            self.p, self.lm, self.sample_rules, self.layouts = branches, None, ("tree",), ("tree",)
            return
        self.p = drafter.p + branches
        self.lm = getattr(drafter, "lm", None)  # the engine reports whether drafts were rescored
        # The copy joins several drafts: the one-draft rules ("block", "token") have no room for it.
        inner = getattr(drafter, "sample_rules", JOINING_RULES)
        self.sample_rules = tuple(rule for rule in JOINING_RULES if rule in inner)

    def propose(self, head_logits: Tensor | None, sampling: Sampling | None, draws: int) -> Proposal:
        if self.drafter is None:
            return Proposal([])
        return self.drafter.propose(head_logits, sampling, draws)  # draws = p + 1: one may become the copy

    def finish(
        self, proposal: Proposal, host: list[Tensor], contexts: list[list[int]], device: torch.device
    ) -> tuple[Tensor, SampledDrafts | None]:
        if self.drafter is None:
            copies = [self.copies(context) for context in contexts]
            width = max([1, *(len(c) for row in copies for c in row)])
            out = torch.full((len(contexts), self.p, width), PAD, dtype=torch.int64)
            for b, row in enumerate(copies):
                for i, copy in enumerate(row):
                    out[b, i, : len(copy)] = torch.tensor(copy, dtype=torch.int64)
            return out, None
        drafts, sampled = self.drafter.finish(proposal, host, contexts, device)
        if sampled is not None:
            return self._join_sampled(sampled, contexts)
        B, p, g = drafts.shape
        copies = [self.copies(context) for context in contexts]
        width = max([g, *(len(c) for row in copies for c in row)])
        # p: the drafts this step (a tree of best prefixes has as many as it has leaves)
        out = torch.full((B, p + self.p - self.drafter.p, width), PAD, dtype=torch.int64)
        out[:, :p, :g] = drafts.cpu()
        out[:, p:, :g] = drafts[:, :1].cpu()  # no copy: the best draft again (a repeat adds no tree node)
        for b, row in enumerate(copies):
            for i, copy in enumerate(row):
                out[b, p + i, :g] = PAD
                out[b, p + i, : len(copy)] = torch.tensor(copy)
        return out, sampled

    def copied(self, context: list[int]) -> list[int]:
        """The draft copied for ``context`` (up to ``length`` tokens; ``[]`` if none)."""
        return self._copy(context, self.length)

    def copies(self, context: list[int]) -> list[list[int]]:
        """Every non-empty draft of this source for ``context``: the copy (else the datastore's
        continuation), and with ``retrieval`` beside a copy the datastore's continuation too."""
        copy = continuation(context, self.max_ngram, self.length)
        if not copy:
            retrieved = self._retrieved(context, self.length)
            return [retrieved] if retrieved else []
        beside = self._retrieved(context, self.retrieval)
        return [copy, beside] if beside and beside != copy[: len(beside)] else [copy]

    def _copy(self, context: list[int], length: int) -> list[int]:
        """The context's own copy, else (with a datastore) the datastore's continuation."""
        return continuation(context, self.max_ngram, length) or self._retrieved(context, length)

    def _retrieved(self, context: list[int], length: int) -> list[int]:
        """The datastore's continuation of up to ``length`` tokens (``[]`` without one, or for 0)."""
        return self.datastore.continuation(context, length) if self.datastore is not None and length else []

    def _join_sampled(self, sampled: SampledDrafts, contexts: list[list[int]]) -> tuple[Tensor, SampledDrafts]:
        """The last of the p + 1 sampled drafts replaced, in each row whose context has one, by
        the copy (its first g tokens, law one-hot), which becomes the first draft. The drafts
        are drawn independently of each other, so dropping a draw and adding a fixed draft, in
        an order fixed before the draws, keeps recursive rejection exact."""
        tokens, q = sampled.tokens, sampled.q  # [B, p + 1, g], [B, p + 1, g, V]
        if self.retrieval:  # the draw drawn for the retrieval branch, which joins no sampled drafts
            tokens, q = tokens[:, :-1], q[:, :-1]
        g = tokens.shape[-1]
        copies = [self._copy(context, g) for context in contexts]
        rows = [b for b, copy in enumerate(copies) if len(copy) == g]
        if not rows:  # no copy anywhere: the p drafts asked for
            return tokens[:, :-1], SampledDrafts(tokens[:, :-1], q[:, :-1])
        # The copy goes first: recursive rejection tries rows in order, and a copy that repeats
        # the text is likelier under the target than after the sampled drafts' rejections.
        tokens, q = tokens.roll(1, dims=1), q.roll(1, dims=1)  # the extra draw last -> first, then replaced
        index = torch.tensor(rows, device=tokens.device)
        copied = torch.tensor([copies[b] for b in rows], device=tokens.device)  # [R, g]
        tokens[index, 0] = copied
        q[index, 0] = torch.nn.functional.one_hot(copied, q.shape[-1]).to(q.dtype)
        return tokens, SampledDrafts(tokens, q)
